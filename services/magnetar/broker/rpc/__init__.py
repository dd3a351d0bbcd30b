"""The broker's gRPC door: the servicer, its admin RPCs and their translation to the core."""
