"""One scrape of a broker's Pulsar metrics with N loaded topics (docs/metrics.md,
docs/performance.md "Pulsar metrics"): how long the broker's event loop spends reading
the topics' stats (in all, and at most in one turn, while nothing else can run), how long
the scrape takes from request to text, and how big the text is.

The topics are real (PersistentTopic, its managed ledger, a Shared subscription with a
consumer, a producer) over the in-memory twins of the ledger client and the metadata
store, idle as in "Lean topics"; the scrape is the broker's own path
(:meth:`~magnetar.broker.metrics.BrokerMetrics.exposition`, called from a thread as the
metrics HTTP server does).

    python bench/metrics_scrape.py --topics 10000 [--namespace-level]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from test_managed_ledger_core import FakeLedgerClient, MemoryStore  # noqa: E402
from test_topic_memory import idle_topic  # noqa: E402

from magnetar.broker import metrics  # noqa: E402
from magnetar.broker.config import BrokerConfig  # noqa: E402
from magnetar.broker.lease import SessionLease  # noqa: E402

TARGET_SCRAPE_S = 1.0
TARGET_LOOP_HOLD_S = 0.05


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--namespace-level", action="store_true", help="expose_topic_level_metrics_in_prometheus=false")
    args = parser.parse_args()
    load_start = os.getloadavg()
    config = BrokerConfig()
    client, store = FakeLedgerClient(), MemoryStore()
    topics = {}
    for i in range(args.topics):
        t = await idle_topic(client, store, i, namespace=f"ns{i % 10}", config=config)
        topics[t.name] = t
    lease = SessionLease(30.0)
    lease.renewed(lease.clock())
    service = SimpleNamespace(topics=topics, nonpersistent={}, lease=lease, lease_held=True, lease_lapses=0, config=config)

    # The longest the loop is held: a ticker notes how late each of its turns comes.
    late: list[float] = []

    async def ticker() -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0)
            late.append(time.perf_counter() - before)

    pulsar = metrics.BrokerMetrics(service, asyncio.get_running_loop(), not args.namespace_level)  # type: ignore[arg-type]
    tick = asyncio.create_task(ticker())
    timings = []
    for _ in range(3):
        late.clear()
        started, cpu = time.perf_counter(), time.process_time()
        text = await asyncio.to_thread(pulsar.exposition)
        timings.append((time.perf_counter() - started, max(late, default=0.0), len(text), time.process_time() - cpu))
    tick.cancel()
    load_end = os.getloadavg()
    best = min(timings)
    print(f"topics {args.topics}, {'namespace' if args.namespace_level else 'topic'} level; "
          f"load average {load_start[0]:.2f} -> {load_end[0]:.2f}")
    for n, (scrape_s, hold_s, size, cpu_s) in enumerate(timings, 1):
        print(f"scrape {n}: {scrape_s * 1000:.0f} ms ({cpu_s * 1000:.0f} ms CPU), longest loop hold {hold_s * 1000:.1f} ms, "
              f"{size / 1024:.0f} KiB")
    scrape_s, hold_s = best[0], max(t[1] for t in timings)
    print(f"scrape (best of 3) {scrape_s * 1000:.0f} ms, target <= {TARGET_SCRAPE_S * 1000:.0f} ms: "
          f"{'pass' if scrape_s <= TARGET_SCRAPE_S else 'FAIL'}")
    print(f"longest loop hold {hold_s * 1000:.1f} ms, target <= {TARGET_LOOP_HOLD_S * 1000:.0f} ms: "
          f"{'pass' if hold_s <= TARGET_LOOP_HOLD_S else 'FAIL'}")
    for t in topics.values():
        await t.close()


if __name__ == "__main__":
    asyncio.run(main())
