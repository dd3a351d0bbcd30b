"""The bookie: stores ledger entries durably behind an fsync'd journal and serves them over gRPC."""
