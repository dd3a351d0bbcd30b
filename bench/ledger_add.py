"""Replicated ledger adds: 1 KiB entries, E=Qw=Qa=1 vs E=3 Qw=2 Qa=2, in one run.

Starts a real ZooKeeper and three bookie processes on this machine, then writes 1 KiB
entries through the ledger client with many adds in flight, for each quorum setting.
Each setting runs three times, alternating; medians are compared. Prints adds/s, the disk's write bandwidth during
each run (from /proc/diskstats), and the replicated rate as a share of the single-copy
rate; writes bench/results/ledger_add.json.

On one machine all bookies share one disk, and each copy of an entry is written twice
(journal, then entry log): once single-copy runs at the disk's bandwidth, replication
can at best halve the rate. The printed disk bandwidth shows when that is the limit.

Target (issue 3): >= 20,000 adds/s replicated, and replicated >= 60% of single-copy.

``--ledgers N`` measures instead what a broker with many topics does: N ledgers (E=3
Qw=2 Qa=2) of one client, one 100 B entry added to each in the same event-loop turn, the
next round once all are confirmed. It prints adds/s, the add requests each bookie got per
round and the journal records per fsync, the bookies' own counters. Adds to one bookie
are batched across ledgers (``ledger/addbatcher.py``): a round is one request per bookie.

    python bench/ledger_add.py [--seconds 5] [--ledgers N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from procstats import disk_stats

from magnetar.common.zkserver import ZooKeeperServer
from magnetar.ledger.client import LedgerClient
from magnetar.metadata.session import ZkSession
from magnetar.testing.processes import BookieProcess

SETTINGS = ((1, 1, 1), (3, 2, 2))
IN_FLIGHT = 2000
ROUNDS = 3
SIZE = 1024


async def run(zk: str, quorum: tuple[int, int, int], seconds: float, root: str = "/bench") -> dict[str, float]:
    session = ZkSession(zk, root)
    await session.start()
    client = LedgerClient(session)
    try:
        handle = await client.create_ledger(*quorum)
        payload = os.urandom(SIZE)
        window: list[asyncio.Future[int]] = []
        confirmed = 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            while len(window) < IN_FLIGHT:
                window.append(handle.add_entry(payload))
            half = window[: IN_FLIGHT // 2]
            del window[: IN_FLIGHT // 2]
            await asyncio.gather(*half)
            confirmed += len(half)
        await asyncio.gather(*window)
        confirmed += len(window)
        elapsed = time.perf_counter() - start
        await handle.close()
        return {"adds_per_s": confirmed / elapsed, "mb_per_s": confirmed * SIZE / elapsed / 1e6}
    finally:
        await client.close()
        await session.close()


async def run_all(zk: str, seconds: float, data_dir: Path) -> list[dict]:
    """Each setting ROUNDS times, alternating, so drifting machine load hits both alike."""
    results = []
    for quorum in SETTINGS:
        await run(zk, quorum, min(1.0, seconds))  # warm-up
    for _ in range(ROUNDS):
        for quorum in SETTINGS:
            before, t0 = disk_stats(data_dir), time.perf_counter()
            r = await run(zk, quorum, seconds)
            after = disk_stats(data_dir)
            disk = (after[0] - before[0]) * 512 / (time.perf_counter() - t0) / 1e6 if before is not None and after is not None else float("nan")
            r["disk_write_mb_per_s"] = disk
            results.append({"ensemble": quorum[0], "write_quorum": quorum[1], "ack_quorum": quorum[2], **r})
            print(f"E={quorum[0]} Qw={quorum[1]} Qa={quorum[2]}  {r['adds_per_s']:>10,.0f} adds/s  "
                  f"{r['mb_per_s']:>6.1f} MB/s payload  disk writes {disk:>5.0f} MB/s", flush=True)
    return results


async def many_ledgers(zk: str, ledgers: int, seconds: float, root: str = "/bench") -> dict[str, float]:
    """Rounds of one entry in each of ``ledgers`` ledgers (see the module docstring)."""
    session = ZkSession(zk, root)
    await session.start()
    client = LedgerClient(session)
    try:
        handles = []
        for i in range(0, ledgers, 100):
            handles += await asyncio.gather(*(client.create_ledger(3, 2, 2) for _ in range(min(100, ledgers - i))))
        bookies = sorted({b for h in handles for b in h.metadata.current_ensemble})
        payload = os.urandom(100)
        await asyncio.gather(*(h.add_entry(payload) for h in handles))  # warm-up: streams open
        before = [await client.pool.get(b).info() for b in bookies]
        requests = [client.context.adds.requests(b) if hasattr(client.context, "adds") else 0 for b in bookies]
        rounds = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            await asyncio.gather(*(h.add_entry(payload) for h in handles))
            rounds += 1
        elapsed = time.perf_counter() - start
        after = [await client.pool.get(b).info() for b in bookies]
        records = sum(a.journal_records - b.journal_records for a, b in zip(after, before, strict=True))
        fsyncs = max(1, sum(a.journal_fsyncs - b.journal_fsyncs for a, b in zip(after, before, strict=True)))
        sent = [client.context.adds.requests(b) - r if hasattr(client.context, "adds") else float("nan")
                for b, r in zip(bookies, requests, strict=True)]
        await asyncio.gather(*(h.close() for h in handles))
        return {"ledgers": ledgers, "rounds": rounds, "adds_per_s": rounds * ledgers / elapsed,
                "requests_per_bookie_per_round": sum(sent) / len(sent) / max(1, rounds),
                "records_per_fsync": records / fsyncs}
    finally:
        await client.close()
        await session.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--bookies", type=int, default=3)
    parser.add_argument("--ledgers", type=int, default=0, help="many-ledgers mode: this many ledgers, one entry each per turn")
    parser.add_argument("--out", default="bench/results/ledger_add.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="magnetar-bench-"))
    zk = ZooKeeperServer(work / "zk", force_sync=False)
    bookies: list[BookieProcess] = []
    try:
        zk.start()
        for i in range(args.bookies):
            b = BookieProcess(zk.connect_string, "/bench", work / f"bookie-{i}",
                              config={"min_free_disk_bytes": 0, "log_level": "WARNING"})  # fmt: skip
            bookies.append(b.start(60))
        if args.ledgers:
            print(f"{args.bookies} bookies up; {args.ledgers} ledgers (E=3 Qw=2 Qa=2), one 100 B entry each per turn, "
                  f"{args.seconds:g} s; load average {os.getloadavg()[0]:.2f}")
            r = asyncio.run(many_ledgers(zk.connect_string, args.ledgers, args.seconds))
            print(f"{r['adds_per_s']:,.0f} adds/s over {r['rounds']} rounds; add requests per bookie per round "
                  f"{r['requests_per_bookie_per_round']:.2f}; journal records per fsync {r['records_per_fsync']:.1f}; "
                  f"load average {os.getloadavg()[0]:.2f}")
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).with_name("ledger_add_many.json").write_text(json.dumps(r, indent=2))
            return 0
        print(f"{args.bookies} bookies up; {SIZE} B entries, {IN_FLIGHT} adds in flight, {args.seconds:g} s per run")
        results = asyncio.run(run_all(zk.connect_string, args.seconds, work))
        single = statistics.median(r["adds_per_s"] for r in results if r["ensemble"] == 1)
        replicated = statistics.median(r["adds_per_s"] for r in results if r["ensemble"] == 3)
        print(f"median of {ROUNDS}: single-copy {single:,.0f} adds/s, replicated {replicated:,.0f} adds/s")
        ratio = replicated / single
        ok = replicated >= 20_000 and ratio >= 0.6
        print(f"replicated / single-copy: {ratio:.2f}")
        print(f"target (>= 20,000 adds/s replicated, >= 60% of single-copy): {'MET' if ok else 'NOT MET'}")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"results": results, "ratio": ratio, "target_met": ok}, indent=2))
        return 0
    finally:
        for b in bookies:
            b.stop()
        zk.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
