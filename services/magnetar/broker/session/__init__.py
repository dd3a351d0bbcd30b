"""The session door: the SDK's session (``SessionRequest`` / ``SessionResponse``, many
producers and consumers on one connection). ``handles.py`` serves a session's handles with
no transport of its own; the gRPC ``Session`` RPC (``broker/rpc/session.py``) and the
framed TCP/TLS listener on ``session_port`` (``listener.py``, without gRPC's cost per
message) both drive it."""
