"""Re-replication: the time for the auditor to restore a lost bookie's data.

Starts a real ZooKeeper and four bookie processes (ZooKeeper session timeout 4 s, so a
killed bookie's registration vanishes quickly), then writes closed ledgers of 1 KiB
entries through the ledger client with E=3 Qw=2 Qa=2, 10,000 entries per ledger, until
one bookie holds at least ``--mb`` MB (10^6 bytes) of entry payload. What a bookie holds
is computed from each ledger's metadata (:func:`magnetar.auditor.fragments.entries_on`:
with E=3, Qw=2 a bookie of a fragment stores 2 of every 3 of its entries); that bookie
is the victim. With four bookies each ledger lands on three of them, so about twice the
victim's share is written in all, spread over many ledgers so the replication workers
(default 2) have ledgers to take in parallel.

Then one auditor process starts (grace period 1 s, poll interval 0.2 s, throttling off,
default workers and batch size) and the victim is killed with SIGKILL. The bench polls
the under-replication markers in ZooKeeper every 50 ms:

* replication time: from the first marker seen until none is left (what the issue's
  target is about; the time before it is detection: session expiry + grace period);
* time from kill: from the SIGKILL until none is left.

Rate = the victim's payload bytes / replication time, in MB/s (10^6 bytes). Progress
(markers left, entries copied as the auditor's status RPC reports) is printed every 2 s,
and, for the replication time, the CPU seconds of the auditor and each surviving bookie
and the disk's write rate and busy time (/proc, Linux): they tell whether CPU, disk or
round trips are the limit. All processes share this machine's cores and disk. The
entries were written seconds before, so the sources read them from the page cache, as
a bookie that died soon after its data was written would; cold reads would be slower.
``--profile FILE`` records the auditor with py-spy during the copy (if installed).

At the end it checks that no ledger's metadata names the victim and that the bookie
that replaced it in each fragment holds its entries: a sample (``--check-entries`` per
ledger, default 200; 0 for every entry) is read from that bookie directly and compared
byte for byte with what was written (each payload starts with its ledger and entry id).

Target (issue 7): >= 20 MB/s with throttling off. Writes bench/results/rereplication.json.

    python bench/rereplication.py [--mb 100] [--ledger-entries 10000] [--runs 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from procstats import cpu_seconds, disk_stats

from magnetar.auditor.fragments import entries_on
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.ledger.client import LedgerClient
from magnetar.ledger.framing import unframe
from magnetar.ledger.metadata import LedgerMetadata
from magnetar.metadata.session import ZkSession
from magnetar.metadata.underreplication import ZkUnderReplicationStore
from magnetar.proto.v1 import auditor_pb2 as apb
from magnetar.proto.v1 import auditor_pb2_grpc as apb_grpc
from magnetar.testing.processes import AuditorProcess, BookieProcess

ROOT = "/bench"
SIZE = 1024
QUORUM = (3, 2, 2)
BOOKIES = 4
IN_FLIGHT = 2000
BOOKIE_CONFIG = {"zk_session_timeout_s": 4.0, "min_free_disk_bytes": 0, "log_level": "WARNING"}
AUDITOR_CONFIG = {"grace_period_s": 1.0, "poll_interval_s": 0.2, "zk_session_timeout_s": 4.0, "throttle_entries_per_s": 0}
TARGET_MB_PER_S = 20.0
_ID = struct.Struct(">QQ")


def payload(filler: bytes, ledger_id: int, entry_id: int) -> bytes:
    """``SIZE`` bytes that say which entry they are (checked after the copy)."""
    return _ID.pack(ledger_id, entry_id) + filler[_ID.size :]


def held_entries(md: LedgerMetadata) -> dict[str, int]:
    """Entries each bookie of a closed ledger stores, from its metadata."""
    out: dict[str, int] = defaultdict(int)
    for i, f in enumerate(md.fragments):
        last = md.fragment_last_entry(i)
        for b in f.bookies:
            out[b] += len(entries_on(f.bookies, md.write_quorum, b, f.first_entry, last))
    return out


async def write_until(client: LedgerClient, target_bytes: int, ledger_entries: int, filler: bytes) -> tuple[str, dict[int, LedgerMetadata]]:
    """Closed ledgers until some bookie holds ``target_bytes`` of payload; (that bookie, metadata by ledger)."""
    held: dict[str, int] = defaultdict(int)
    written: dict[int, LedgerMetadata] = {}
    start = time.perf_counter()
    while max(held.values(), default=0) * SIZE < target_bytes:
        handle = await client.create_ledger(*QUORUM)
        lid = handle.ledger_id
        window: list[asyncio.Future[int]] = []
        for e in range(ledger_entries):
            window.append(handle.add_entry(payload(filler, lid, e)))
            if len(window) >= IN_FLIGHT:
                await asyncio.gather(*window[: IN_FLIGHT // 2])
                del window[: IN_FLIGHT // 2]
        await asyncio.gather(*window)
        await handle.close()
        md = await client.ledger_metadata(lid)
        written[lid] = md
        for b, n in held_entries(md).items():
            held[b] += n
    elapsed = time.perf_counter() - start
    total = sum(md.last_entry_id + 1 for md in written.values())
    print(f"wrote {len(written)} ledgers, {total:,} entries ({total * SIZE / 1e6:.0f} MB payload) in {elapsed:.1f} s "
          f"({total / elapsed:,.0f} adds/s); held per bookie: "
          + ", ".join(f"{b} {n * SIZE / 1e6:.1f} MB" for b, n in sorted(held.items())), flush=True)  # fmt: skip
    victim = max(held, key=lambda b: held[b])
    return victim, written


async def auditor_entries_copied(address: str) -> int | None:
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            status = await apb_grpc.AuditorStub(channel).GetStatus(apb.GetStatusRequest(), timeout=2)
            return int(status.entries_copied)
    except grpc.RpcError:
        return None


async def wait_restored(
    session: ZkSession, client: LedgerClient, auditor: str, victim: str, killed_at: float, timeout_s: float,
    on_first_marker: Callable[[], None],
) -> tuple[float, float]:
    """Poll the markers; (time the first marker was seen, time none was left) as perf_counter values."""
    markers = ZkUnderReplicationStore(session)
    first_seen: float | None = None
    next_report = time.perf_counter() + 2
    while True:
        now = time.perf_counter()
        if now - killed_at > timeout_s:
            raise TimeoutError(f"not restored within {timeout_s:g} s of the kill")
        ids = await markers.list_ids()
        seen = time.perf_counter()
        if ids and first_seen is None:
            first_seen = seen
            on_first_marker()
            print(f"  {seen - killed_at:6.1f} s after kill: first marker ({len(ids)} ledgers marked)", flush=True)
        if not ids and first_seen is not None:
            # Done only if no ledger names the victim any more (the leader could still be marking).
            named = [lid for lid in await client.list_ledgers() if victim in (await client.ledger_metadata(lid)).bookies()]
            if not named:
                return first_seen, seen
        if seen >= next_report:
            copied = await auditor_entries_copied(auditor)
            print(f"  {seen - killed_at:6.1f} s after kill: {len(ids)} ledgers under-replicated, "
                  f"{'?' if copied is None else f'{copied:,}'} entries copied", flush=True)  # fmt: skip
            next_report = seen + 2
        await asyncio.sleep(0.05)


async def verify(client: LedgerClient, before: dict[int, LedgerMetadata], victim: str, filler: bytes, sample: int) -> int:
    """Check that the bookie replacing the victim in each fragment holds its entries; how many were read.

    Raises:
        AssertionError: metadata still names the victim, or an entry is missing or wrong.
    """
    checked = 0
    rng = random.Random(7)
    for lid, old in before.items():
        new = await client.ledger_metadata(lid)
        assert victim not in new.bookies(), f"ledger {lid} still names {victim}: {new.fragments}"
        assert new.last_entry_id == old.last_entry_id
        for i, (f_old, f_new) in enumerate(zip(old.fragments, new.fragments, strict=True)):
            if victim not in f_old.bookies:
                continue
            replacement = f_new.bookies[f_old.bookies.index(victim)]
            ids = entries_on(f_new.bookies, new.write_quorum, replacement, f_new.first_entry, new.fragment_last_entry(i))
            if sample and len(ids) > sample:
                ids = sorted(rng.sample(ids, sample))
            got = await client.pool.get(replacement).read_entry_list(lid, ids)
            assert [e.entry_id for e in got] == ids, f"ledger {lid}: {replacement} lacks some of its entries"
            for e in got:
                assert unframe(e.payload)[1] == payload(filler, lid, e.entry_id), f"ledger {lid} entry {e.entry_id} differs"
            checked += len(got)
    return checked


def py_spy(pid: int, out: str) -> subprocess.Popen[bytes] | None:
    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not os.path.exists(exe):
        print("py-spy is not installed: no profile", flush=True)
        return None
    fmt = "flamegraph" if out.endswith(".svg") else "raw"  # raw: collapsed stacks, one per line
    return subprocess.Popen([exe, "record", "--pid", str(pid), "--output", out, "--format", fmt, "--rate", "100", "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


async def one_run(args: argparse.Namespace, work: Path, zk: ZooKeeperServer) -> dict[str, Any]:
    bookies = [
        BookieProcess(zk.connect_string, ROOT, work / f"bookie-{i}", config=BOOKIE_CONFIG, name=f"bookie-{i}").start(60)
        for i in range(BOOKIES)
    ]
    auditor: AuditorProcess | None = None
    session = ZkSession(zk.connect_string, ROOT)
    await session.start()
    client = LedgerClient(session)
    filler = os.urandom(SIZE)
    try:
        victim, before = await write_until(client, int(args.mb * 1e6), args.ledger_entries, filler)
        victim_entries = sum(held_entries(md)[victim] for md in before.values())
        victim_bytes = victim_entries * SIZE
        victim_ledgers = sum(victim in md.bookies() for md in before.values())
        auditor_config = dict(AUDITOR_CONFIG, log_level="INFO")
        if args.workers:
            auditor_config["replication_workers"] = args.workers
        auditor = AuditorProcess(zk.connect_string, ROOT, work / "auditor", config=auditor_config, name="auditor").start(60)
        await asyncio.sleep(1.0)  # the auditor elects itself leader and sees every bookie registered
        process = next(b for b in bookies if b.address == victim)
        print(f"killing {victim} ({process.name}): {victim_entries:,} entries, {victim_bytes / 1e6:.1f} MB payload "
              f"in {victim_ledgers} ledgers", flush=True)  # fmt: skip
        profiler = py_spy(auditor.process.pid or 0, args.profile) if args.profile else None
        killed_at = time.perf_counter()
        process.kill()
        procs = {"auditor": auditor.process.pid, **{b.name: b.process.pid for b in bookies if b is not process}}
        cpu_at_first: dict[str, float] = {}

        disk_at_first: list[tuple[int, int] | None] = [None]

        def snapshot() -> None:
            cpu_at_first.update({name: cpu_seconds(pid) for name, pid in procs.items()})
            disk_at_first[0] = disk_stats(work)

        first, restored = await wait_restored(
            session, client, auditor.address, victim, killed_at, args.timeout, snapshot
        )
        cpu = {name: round(cpu_seconds(pid) - cpu_at_first[name], 2) for name, pid in procs.items()}
        disk_end, disk_start = disk_stats(work), disk_at_first[0]
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)
            profiler.wait(60)
            print(f"profile of the auditor: {args.profile}")
        replication_s = restored - first
        rate = victim_bytes / replication_s / 1e6
        disk = {"write_mb_per_s": float("nan"), "busy_pct": float("nan")}
        if disk_start is not None and disk_end is not None:
            disk["write_mb_per_s"] = (disk_end[0] - disk_start[0]) * 512 / replication_s / 1e6
            disk["busy_pct"] = (disk_end[1] - disk_start[1]) / 10 / replication_s
        checked = await verify(client, before, victim, filler, args.check_entries)
        print(f"CPU seconds used during the {replication_s:.1f} s of replication ({os.cpu_count()} cores: {(os.cpu_count() or 1) * replication_s:.1f} available): "
              + ", ".join(f"{n} {c:.1f}" for n, c in cpu.items())
              + f"; disk writes {disk['write_mb_per_s']:.0f} MB/s, busy {disk['busy_pct']:.0f}%", flush=True)  # fmt: skip
        print(f"verified: no ledger names {victim}; {checked:,} copied entries read back from the new bookies and equal",
              flush=True)  # fmt: skip
        return {
            "victim_entries": victim_entries,
            "victim_bytes": victim_bytes,
            "victim_ledgers": victim_ledgers,
            "ledgers": len(before),
            "detection_s": first - killed_at,
            "replication_s": replication_s,
            "from_kill_s": restored - killed_at,
            "mb_per_s": rate,
            "entries_checked": checked,
            "cpu_s_during_replication": cpu,
            "disk_during_replication": disk,
        }
    except BaseException:
        if auditor is not None:
            print(f"--- auditor log ({auditor.log_path}):\n{auditor.log_tail(40)}", file=sys.stderr)
        raise
    finally:
        await client.close()
        await session.close()
        if auditor is not None:
            auditor.stop()
        for b in bookies:
            if b.alive:
                b.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100.0, help="payload the lost bookie holds, MB (10^6 bytes)")
    parser.add_argument("--ledger-entries", type=int, default=10_000, help="entries per ledger")
    parser.add_argument("--runs", type=int, default=1, help="runs, each on fresh bookies; the median is reported")
    parser.add_argument("--workers", type=int, default=0, help="auditor replication_workers (0: its default)")
    parser.add_argument("--check-entries", type=int, default=200, help="entries read back per ledger (0: all)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds from the kill before giving up")
    parser.add_argument("--profile", default="", help="record the auditor with py-spy into this file (.svg: flame graph, else collapsed stacks)")
    parser.add_argument("--out", default="bench/results/rereplication.json")
    args = parser.parse_args()
    results = []
    for run in range(args.runs):
        work = Path(tempfile.mkdtemp(prefix="magnetar-bench-"))
        zk = ZooKeeperServer(work / "zk", force_sync=False)
        try:
            zk.start()
            print(f"run {run + 1}/{args.runs}: {BOOKIES} bookies, E={QUORUM[0]} Qw={QUORUM[1]} Qa={QUORUM[2]}, "
                  f"{SIZE} B entries, {args.ledger_entries:,} per ledger, victim >= {args.mb:g} MB", flush=True)  # fmt: skip
            r = asyncio.run(one_run(args, work, zk))
        finally:
            zk.stop()
            shutil.rmtree(work, ignore_errors=True)
        results.append(r)
        print(f"restored {r['victim_bytes'] / 1e6:.1f} MB ({r['victim_entries']:,} entries, {r['victim_ledgers']} ledgers): "
              f"detection {r['detection_s']:.1f} s, replication {r['replication_s']:.1f} s, "
              f"{r['from_kill_s']:.1f} s from kill; {r['mb_per_s']:.1f} MB/s", flush=True)  # fmt: skip
    rate = statistics.median(r["mb_per_s"] for r in results)
    ok = rate >= TARGET_MB_PER_S
    print(f"re-replication: {rate:.1f} MB/s (median of {len(results)}) vs target >= {TARGET_MB_PER_S:g} MB/s: "
          f"{'MET' if ok else 'NOT MET'}")  # fmt: skip
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({
        "config": {"mb": args.mb, "ledger_entries": args.ledger_entries, "entry_bytes": SIZE, "quorum": QUORUM,
                   "bookies": BOOKIES, "auditor": AUDITOR_CONFIG, "workers": args.workers or "default"},
        "runs": results, "mb_per_s": rate, "target_mb_per_s": TARGET_MB_PER_S, "target_met": ok,
    }, indent=2))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
