"""The framed session door: the SDK's session (``SessionRequest`` / ``SessionResponse``)
over plain TCP or TLS on ``session_port``, without gRPC's cost per message."""
