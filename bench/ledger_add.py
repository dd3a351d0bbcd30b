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

    python bench/ledger_add.py [--seconds 5]
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--bookies", type=int, default=3)
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
