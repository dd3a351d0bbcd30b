"""The broker's gRPC door: the ``magnetar.v1.Broker`` servicer and its admin RPC mixins,
the authorization interceptor, and the outgoing publisher of retry and dead-letter moves
to topics other brokers serve. Wire messages are converted to the core's calls here."""
