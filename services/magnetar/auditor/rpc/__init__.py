"""The auditor's gRPC door: the ``magnetar.v1.Auditor`` servicer and the calls to a replica."""
