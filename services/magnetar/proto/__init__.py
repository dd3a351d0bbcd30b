"""Generated code (`make proto`): gRPC stubs in v1 (the wire contract lives in
proto/magnetar/v1/) and Pulsar's binary protocol messages in pulsar
(proto/magnetar/pulsar/)."""
