"""Pulsar's WebSocket API (``/ws/v2/...``): producer, consumer and reader sockets that
speak Pulsar's JSON frames, each over a handle of the SDK."""
