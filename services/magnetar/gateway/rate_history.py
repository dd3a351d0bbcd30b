"""The cluster's message rates over the last 15 minutes, kept by the gateway so that a
freshly opened console shows history (docs/console.md).

Every ``console_rates_interval_s`` the gateway asks each live broker for its load
measured now (``GetLiveLoadReport``, with the gateway's own token) and keeps the sums
(messages and bytes per second in and out) for ``WINDOW_S``, and each broker's latest
report. A broker that does not answer is left out of that sample (``brokers`` counts
those that answered). The samples live in the gateway's memory only: a restarted
gateway starts a new history.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from magnetar.common.errors import MagnetarError

log = logging.getLogger(__name__)
WINDOW_S = 900.0
BROKER_FIELDS = ("brokerId", "cpu", "memory", "bandwidthIn", "bandwidthOut", "msgRateIn", "msgRateOut",
                 "msgThroughputIn", "msgThroughputOut", "numTopics", "numBundles", "numProducers", "numConsumers",
                 "bundles", "maxResourceUsage", "lastUpdate")

Reports = Callable[[], Awaitable[dict[str, dict[str, Any] | None]]]
"""Each live broker's load report now (None: it did not answer)."""


@dataclass(frozen=True, slots=True)
class RateSample:
    """The cluster's rates at one moment (Pulsar's field names)."""

    timestamp: int
    """Milliseconds since the epoch."""
    msgRateIn: float  # noqa: N815
    msgRateOut: float  # noqa: N815
    msgThroughputIn: float  # noqa: N815
    msgThroughputOut: float  # noqa: N815
    brokers: int


def _num(doc: dict[str, Any], name: str) -> float:
    value = doc.get(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


class ClusterRateHistory:
    """Samples of the cluster's rates, the last ``window_s`` of them."""

    def __init__(self, reports: Reports, interval_s: float, window_s: float = WINDOW_S,
                 clock: Callable[[], float] = time.time) -> None:
        self._reports = reports
        self.interval_s = interval_s
        self.window_s = window_s
        self._clock = clock
        self.samples: deque[RateSample] = deque(maxlen=math.ceil(window_s / interval_s) + 1)
        self.brokers: dict[str, dict[str, Any]] = {}
        """Each broker's latest report (the fields of BROKER_FIELDS)."""
        self._task: asyncio.Task[None] | None = None

    async def sample(self) -> RateSample:
        """Ask the brokers once; keep and return the sample."""
        answers = await self._reports()
        docs = {broker: doc for broker, doc in answers.items() if doc is not None}
        now_ms = int(self._clock() * 1000)
        def total(name: str) -> float:
            return sum((_num(d, name) for d in docs.values()), 0.0)

        sample = RateSample(now_ms, total("msgRateIn"), total("msgRateOut"), total("msgThroughputIn"),
                            total("msgThroughputOut"), len(docs))
        self.samples.append(sample)
        while self.samples and self.samples[0].timestamp < now_ms - self.window_s * 1000:
            self.samples.popleft()
        self.brokers = {b: {k: d[k] for k in BROKER_FIELDS if k in d} for b, d in sorted(docs.items())}
        return sample

    def doc(self) -> dict[str, Any]:
        """The history as the REST API answers it."""
        return {"intervalSeconds": self.interval_s, "windowSeconds": self.window_s,
                "samples": [asdict(s) for s in self.samples], "brokers": self.brokers}

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="gateway-rate-history")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.sample()
            except MagnetarError as exc:
                log.warning("could not sample the brokers' rates: %s", exc.message)
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))
