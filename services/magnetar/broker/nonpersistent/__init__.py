"""Non-persistent topics (``non-persistent://``): no storage, at-most-once dispatch to the consumers connected at publish time (see docs/non-persistent.md)."""
