"""The gateway: Pulsar's admin REST API (v2) and WebSocket API over HTTP, on FastAPI.

A separate process and a door like the broker's gRPC servicer: it holds no state of its
own. Admin calls go to the brokers over their gRPC admin RPCs (the admin client, which
sends a topic's calls to its owner); produce and consume go through the SDK; storage
views read ZooKeeper through ``metadata/``. See docs/gateway.md.
"""
