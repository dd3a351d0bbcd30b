"""Bookie add throughput vs. a raw append + fdatasync loop on the same disk.

Starts a real ZooKeeper and one bookie process, streams adds of 100 B, 1 KiB and
64 KiB entries with many requests in flight, and reads the bookie's journal counters
to learn the group size it achieved (adds per fsync). Then, in the same run, a plain
Python loop appends records of the same on-disk size to a file in the same directory
and calls fdatasync after every group of that size. Prints both and their ratio;
writes bench/results/bookie_add.json.

Target (issue 2): 1 KiB entries at >= 30,000 adds/s and >= 50% of the raw loop.

    python bench/bookie_add.py [--seconds 5] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from magnetar.bookie.record import HEADER_SIZE
from magnetar.common.childproc import ChildProcess
from magnetar.common.healthcheck import grpc_health_serving
from magnetar.common.netutil import free_port
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.ledger.bookie_client import BookieClient
from magnetar.proto.v1 import bookie_pb2 as pb

SIZES = (100, 1024, 65536)
REQUEST_BYTES = 256 * 1024  # entries per request: about this much payload
IN_FLIGHT = 16  # requests in flight on the stream


async def bookie_run(address: str, size: int, seconds: float, ledger_id: int) -> dict[str, float]:
    per_request = max(1, REQUEST_BYTES // size)
    payload = os.urandom(size)
    async with BookieClient(address) as client:
        before = await client.info()
        window: list[asyncio.Future] = []
        next_entry = 0
        adds = 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            req = pb.AddRequest(
                entries=[
                    pb.AddEntry(ledger_id=ledger_id, entry_id=e, last_add_confirmed=e - 1, payload=payload)
                    for e in range(next_entry, next_entry + per_request)
                ]
            )
            next_entry += per_request
            window.append(await client.send_add_request(req))
            if len(window) >= IN_FLIGHT:
                failed = await window.pop(0)
                assert not failed, failed
                adds += per_request
        for fut in window:
            assert not await fut
            adds += per_request
        elapsed = time.perf_counter() - start
        after = await client.info()
    records = after.journal_records - before.journal_records
    fsyncs = max(1, after.journal_fsyncs - before.journal_fsyncs)
    return {
        "adds_per_s": adds / elapsed,
        "mb_per_s": adds * size / elapsed / 1e6,
        "group_size": records / fsyncs,
        "fsyncs_per_s": fsyncs / elapsed,
    }


def raw_loop(directory: Path, record_size: int, group: int, seconds: float) -> dict[str, float]:
    """The baseline: append records of the same size and fdatasync after each group."""
    path = directory / "raw-loop.dat"
    record = os.urandom(record_size)
    n = 0
    with open(path, "ab") as fh:
        fd = fh.fileno()
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            for _ in range(group):
                fh.write(record)
            fh.flush()
            os.fdatasync(fd)
            n += group
        elapsed = time.perf_counter() - start
    path.unlink()
    return {"adds_per_s": n / elapsed, "mb_per_s": n * (record_size - HEADER_SIZE) / elapsed / 1e6}


async def run_all(address: str, work: Path, seconds: float) -> list[dict]:
    results = []
    for i, size in enumerate(SIZES):
        await bookie_run(address, size, min(1.0, seconds), ledger_id=1000 + i)  # warm-up
        b = await bookie_run(address, size, seconds, ledger_id=2000 + i)
        group = max(1, round(b["group_size"]))
        r = raw_loop(work, size + HEADER_SIZE, group, seconds)
        ratio = b["adds_per_s"] / r["adds_per_s"]
        results.append({"entry_bytes": size, "bookie": b, "raw": r, "ratio": ratio})
        print(f"{size:>7} {b['adds_per_s']:>14,.0f} {b['mb_per_s']:>7.1f} {group:>6} "
              f"{r['adds_per_s']:>11,.0f} {r['mb_per_s']:>9.1f} {ratio:>6.2f}", flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each run")
    parser.add_argument("--dir", default=None, help="directory on the disk to test (default: a temp dir)")
    parser.add_argument("--out", default="bench/results/bookie_add.json")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="magnetar-bench-", dir=args.dir))
    zk = ZooKeeperServer(work / "zk", force_sync=False)
    bookie = None
    try:
        zk.start()
        port = free_port()
        env = dict(os.environ, MAGNETAR_BOOKIE_MIN_FREE_DISK_BYTES="0", MAGNETAR_BOOKIE_LOG_LEVEL="WARNING")
        bookie = ChildProcess(
            "bookie",
            [sys.executable, "-m", "magnetar.bookie", "--zookeeper", zk.connect_string, "--zk-root", "/bench",
             "--port", str(port), "--data-dir", str(work / "bookie")],
            work / "bookie.log",
            env=env,
        )
        bookie.start()
        address = f"127.0.0.1:{port}"
        bookie.wait_ready(lambda: grpc_health_serving(address), timeout=60)
        fs = subprocess.run(["df", "-h", str(work)], capture_output=True, text=True).stdout.splitlines()[-1]
        print(f"disk: {fs}")
        print(f"{'entry':>7} {'bookie adds/s':>14} {'MB/s':>7} {'group':>6} {'raw adds/s':>11} {'raw MB/s':>9} {'ratio':>6}")
        results = asyncio.run(run_all(address, work, args.seconds))
        one_k = next(x for x in results if x["entry_bytes"] == 1024)
        ok = one_k["bookie"]["adds_per_s"] >= 30_000 and one_k["ratio"] >= 0.5
        print(f"target (1 KiB: >= 30,000 adds/s and >= 50% of raw): {'MET' if ok else 'NOT MET'}")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"results": results, "target_met": ok}, indent=2))
        return 0
    finally:
        if bookie is not None:
            bookie.terminate()
        zk.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
