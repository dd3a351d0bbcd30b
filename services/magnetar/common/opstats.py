"""BookKeeper's ``OpStatsLogger`` without its quantiles: how many operations succeeded
and failed and the sum of what each observed (its latency, or an amount), kept as plain
numbers on the path that counts them and read by a Prometheus collector at scrape time."""

from __future__ import annotations


class OpStats:
    __slots__ = ("successes", "success_sum", "failures", "failure_sum")

    def __init__(self) -> None:
        self.successes = 0
        self.success_sum = 0.0
        self.failures = 0
        self.failure_sum = 0.0

    def record(self, ok: bool, value: float) -> None:
        """One operation, with what it observed (seconds for a latency)."""
        if ok:
            self.successes += 1
            self.success_sum += value
        else:
            self.failures += 1
            self.failure_sum += value
