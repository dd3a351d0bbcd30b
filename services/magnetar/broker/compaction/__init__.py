"""Topic compaction: the latest message per key of a topic, kept in a compacted ledger
recorded in the ``__compaction`` cursor (as Pulsar's TwoPhaseCompactor)."""
