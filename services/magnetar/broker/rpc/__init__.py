"""The broker's gRPC door: the ``magnetar.v1.Broker`` servicer and its admin RPC mixins,
the authorization interceptor, the outgoing publisher of retry and dead-letter moves to
topics other brokers serve, and the translation between the wire's messages and the
core's types (``wire.py``)."""
