"""The bookie's gRPC door: the ``magnetar.v1.Bookie`` servicer."""
