"""Generated gRPC stubs (`make proto`); the wire contract lives in proto/magnetar/v1/."""
