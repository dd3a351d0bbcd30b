"""Topics in the metadata (issue 35): how fast the gateway's REST creates non-partitioned
topics, and whether the broker's memory stays independent of topics it has not loaded.

Starts a real ZooKeeper (transaction log fsynced unless ``--no-zk-force-sync``; JVM heap
``--zk-heap``, 2g), one broker and the gateway (no bookies: an admin create writes
metadata only, docs/gateway.md "Creating a topic"), makes a tenant and a namespace through
the REST API, then ``--workers`` client processes (2) each keep ``--concurrency`` (64)
keep-alive HTTP/1.1 connections busy with ``PUT /admin/v2/persistent/bench/metadata/t<N>``
until ``--topics`` (1,000,000) are created or ``--max-seconds`` (1,500) have passed. The
client speaks plain HTTP/1.1 over asyncio streams (a few µs of CPU a request) so that the
client's own cost does not hide the servers'.

Prints progress every ``--progress-seconds`` (created, rate, broker and gateway RSS,
ZooKeeper's znode count), then the rate, each process's CPU per create, ZooKeeper's requests
per create (``mntr`` packets received), the broker's RSS at start and end, the znode count,
the load average at start and end and the verdict against the targets: >= 1,000 topics/s
and all ``--topics`` created. Writes bench/results/metadata.json.

    python bench/metadata.py [--topics 1000000] [--workers 2] [--concurrency 64]
                             [--max-seconds 1500] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from magnetar.common.zkserver import ZooKeeperServer
from magnetar.testing.processes import BrokerProcess, GatewayProcess

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procstats import cpu_seconds, rss_kib, zk_mntr  # noqa: E402

TARGET_RATE = 1000.0
TARGET_TOPICS = 1_000_000
TENANT, NAMESPACE = "bench", "metadata"
REPORT_EVERY_S = 0.5
"""How often a client process reports its counts."""


# -- HTTP/1.1 over asyncio streams -----------------------------------------------------
async def request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, method: str, path: str,
                  body: bytes = b"") -> tuple[int, bytes]:  # fmt: skip
    """One request on a keep-alive connection; returns the status and the body."""
    head = f"{method} {path} HTTP/1.1\r\nHost: bench\r\nContent-Length: {len(body)}\r\n"
    if body:
        head += "Content-Type: application/json\r\n"
    writer.write(head.encode() + b"\r\n" + body)
    lines = (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, (await reader.readexactly(length) if length else b"")


async def http(url: str, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        return await request(reader, writer, method, path, json.dumps(body).encode() if body is not None else b"")
    finally:
        writer.close()


async def list_namespace(url: str) -> dict[str, Any]:
    """GET the namespace's topics once (how long, how many, or why not)."""
    t0 = time.monotonic()
    try:
        status, body = await asyncio.wait_for(http(url, "GET", f"/admin/v2/persistent/{TENANT}/{NAMESPACE}"), 600)
    except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "seconds": time.monotonic() - t0}
    if status != 200:
        return {"error": f"{status} {body[:300].decode(errors='replace')}", "seconds": time.monotonic() - t0}
    return {"count": len(json.loads(body)), "seconds": time.monotonic() - t0}


# -- a client process (``metadata.py --worker``) ------------------------------------------
async def worker_main(url: str, first: int, count: int, concurrency: int, deadline_s: float) -> None:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    counts = {"created": 0, "exists": 0, "failed": 0}
    errors: list[str] = []
    latencies: list[float] = []
    next_index = first
    end = first + count
    stop_at = time.monotonic() + deadline_s

    async def connection() -> None:
        nonlocal next_index
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while next_index < end and time.monotonic() < stop_at:
                i = next_index
                next_index += 1
                t0 = time.perf_counter()
                status, body = await request(reader, writer, "PUT", f"/admin/v2/persistent/{TENANT}/{NAMESPACE}/t{i}")
                latencies.append(time.perf_counter() - t0)
                if status == 204:
                    counts["created"] += 1
                elif status == 409:
                    counts["exists"] += 1
                else:
                    counts["failed"] += 1
                    if len(errors) < 5:
                        errors.append(f"{status} {body[:200].decode(errors='replace')}")
        finally:
            writer.close()

    async def report() -> None:
        while True:
            print(json.dumps(counts), flush=True)
            await asyncio.sleep(REPORT_EVERY_S)

    reporter = asyncio.get_running_loop().create_task(report())
    try:
        await asyncio.gather(*(connection() for _ in range(concurrency)))
    finally:
        reporter.cancel()
    latencies.sort()
    q = (lambda p: latencies[min(len(latencies) - 1, int(len(latencies) * p))] * 1000) if latencies else (lambda p: 0.0)
    print(json.dumps({**counts, "done": True, "errors": errors, "p50_ms": q(0.5), "p99_ms": q(0.99)}), flush=True)


# -- profiling (``--profile``: py-spy, from bench/requirements-compare.lock) ----------------
def py_spy(pid: int | None, seconds: float, out: Path) -> subprocess.Popen[bytes] | None:
    exe = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if not exe or pid is None:
        print("  (py-spy not found: no profile; pip install py-spy)", flush=True)
        return None
    return subprocess.Popen([exe, "record", "--nonblocking", "-r", "200", "-d", str(int(seconds)), "-f", "raw",
                             "-o", str(out), "--pid", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def own_time(collapsed: Path, top: int = 12) -> list[tuple[str, float]]:
    """The functions with the most samples of their own (the innermost frame), in percent."""
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frame = stack.rsplit(";", 1)[-1]
        own[frame.split(" (")[0] + " (" + frame.split(" (")[-1].rsplit("/", 1)[-1] if " (" in frame else frame] += int(n)
        total += int(n)
    return [(f, 100 * c / total) for f, c in own.most_common(top)] if total else []


# -- the run ---------------------------------------------------------------------------
class Worker:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.last: dict[str, Any] = {"created": 0, "exists": 0, "failed": 0}

    async def follow(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self.last = json.loads(line)
        await self.proc.wait()


async def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    load_start = os.getloadavg()
    zk = ZooKeeperServer(work / "zk", force_sync=args.zk_force_sync, max_heap=args.zk_heap)
    broker = gateway = None
    zk.start()
    try:
        broker = BrokerProcess(zk.connect_string, "/bench", work / "broker", config={"log_level": "WARNING"}).start(60)
        gateway = GatewayProcess(zk.connect_string, "/bench", work / "gateway", config={"log_level": "WARNING"}).start(60)
        url = gateway.url
        status, body = await http(url, "PUT", f"/admin/v2/tenants/{TENANT}", {"adminRoles": [], "allowedClusters": ["standalone"]})
        assert status in (204, 409), (status, body)
        status, body = await http(url, "PUT", f"/admin/v2/namespaces/{TENANT}/{NAMESPACE}", {})
        assert status in (204, 409), (status, body)
        pids = {"broker": broker.process.pid, "gateway": gateway.process.pid, "zookeeper": zk.process.pid if zk.process else None}
        rss_start = {k: rss_kib(p) for k, p in pids.items()}
        mntr_start = zk_mntr(zk)
        print(f"load average at start {load_start[0]:.2f}; broker RSS {rss_start['broker'] / 1024:.1f} MiB, gateway "
              f"{rss_start['gateway'] / 1024:.1f} MiB, ZooKeeper {rss_start['zookeeper'] / 1024:.1f} MiB, "
              f"{mntr_start.get('znode_count', 0):,} znodes", flush=True)  # fmt: skip
        print(f"creating {args.topics:,} topics through {url}: {args.workers} client processes x "
              f"{args.concurrency} connections; at most {args.max_seconds:g} s", flush=True)  # fmt: skip
        cpu_start = {k: cpu_seconds(p) for k, p in pids.items()}
        share, extra = divmod(args.topics, args.workers)
        workers, first = [], 0
        t0 = time.monotonic()
        for w in range(args.workers):
            n = share + (w < extra)
            proc = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--worker", url, str(first), str(n), str(args.concurrency), str(args.max_seconds),
                stdout=asyncio.subprocess.PIPE)  # fmt: skip
            workers.append(Worker(proc))
            first += n
        following = asyncio.gather(*(w.follow() for w in workers))
        spies = {}
        if args.profile:
            for k in ("broker", "gateway"):
                spies[k] = (py_spy(pids[k], args.profile, work / f"{k}.txt"), work / f"{k}.txt")
        client_cpu: dict[int, float] = {}
        marks: list[dict[str, Any]] = []
        last_t, last_n = t0, 0
        while not following.done():
            await asyncio.wait({following}, timeout=args.progress_seconds)
            for w in workers:
                client_cpu[w.proc.pid] = cpu_seconds(w.proc.pid) if w.proc.returncode is None else client_cpu.get(w.proc.pid, 0.0)
            now, n = time.monotonic(), sum(w.last["created"] for w in workers)
            mark = {"seconds": round(now - t0, 1), "created": n, "rate": (n - last_n) / max(now - last_t, 1e-9),
                    "broker_rss_kib": rss_kib(pids["broker"]), "gateway_rss_kib": rss_kib(pids["gateway"]),
                    "znodes": zk_mntr(zk).get("znode_count", 0)}  # fmt: skip
            marks.append(mark)
            print(f"  {mark['seconds']:7.1f} s  {n:>9,} created  {mark['rate']:7.0f}/s now  {n / (now - t0):7.0f}/s overall  "
                  f"broker {mark['broker_rss_kib'] / 1024:6.1f} MiB  gateway {mark['gateway_rss_kib'] / 1024:6.1f} MiB  "
                  f"{mark['znodes']:>9,} znodes", flush=True)  # fmt: skip
            last_t, last_n = now, n
        took = time.monotonic() - t0
        await following
        profile = {}
        for k, (spy, path) in spies.items():
            if spy is not None:
                spy.wait()
                profile[k] = own_time(path) if path.exists() else []
        cpu = {k: cpu_seconds(p) - cpu_start[k] for k, p in pids.items()}
        cpu["clients"] = sum(client_cpu.values())
        finals = [w.last for w in workers]
        created = sum(f["created"] for f in finals)
        exists = sum(f["exists"] for f in finals)
        failed = sum(f["failed"] for f in finals)
        mntr_end = zk_mntr(zk)
        rss_end = {k: rss_kib(p) for k, p in pids.items()}
        listing = await list_namespace(url) if args.list else {}
    finally:
        for p in (gateway, broker):
            if p is not None:
                with contextlib.suppress(Exception):
                    p.stop()
        zk.stop()
    load_end = os.getloadavg()
    done = created + exists + failed
    rate = created / took if took else 0.0
    per = max(done, 1)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"), "topics": args.topics, "created": created, "exists": exists,
        "failed": failed, "errors": [e for f in finals for e in f.get("errors", [])][:10], "seconds": took, "rate": rate,
        "p50_ms": max(f.get("p50_ms", 0) for f in finals), "p99_ms": max(f.get("p99_ms", 0) for f in finals),
        "cpu_ms_per_create": {k: v * 1000 / per for k, v in cpu.items()},
        "zk_requests_per_create": (mntr_end.get("packets_received", 0) - mntr_start.get("packets_received", 0)) / per,
        "znodes": mntr_end.get("znode_count"), "zk_watches": mntr_end.get("watch_count"), "listing": listing,
        "zk_data_bytes": mntr_end.get("approximate_data_size"),
        "rss_start_kib": rss_start, "rss_end_kib": rss_end,
        "broker_rss_per_topic_bytes": (rss_end["broker"] - rss_start["broker"]) * 1024 / max(created, 1),
        "load_start": load_start, "load_end": load_end, "marks": marks, "profile": profile,
        "workers": args.workers, "concurrency": args.concurrency, "zk_force_sync": args.zk_force_sync, "zk_heap": args.zk_heap,
    }  # fmt: skip


def print_verdict(r: dict[str, Any], target_topics: int) -> bool:
    print(f"\n{r['created']:,} topics created in {r['seconds']:.1f} s ({r['exists']:,} existed, {r['failed']:,} failed): "
          f"{r['rate']:,.0f} topics/s; a create's latency p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms")  # fmt: skip
    for e in r["errors"]:
        print(f"  error: {e}")
    print("CPU per create: " + ", ".join(f"{k} {v:.3f} ms" for k, v in r["cpu_ms_per_create"].items()))
    print(f"ZooKeeper: {r['zk_requests_per_create']:.2f} requests per create, {r['znodes'] or 0:,} znodes, "
          f"{(r['zk_data_bytes'] or 0) / 2**20:.1f} MiB of data, RSS {r['rss_start_kib']['zookeeper'] / 1024:.0f} → "
          f"{r['rss_end_kib']['zookeeper'] / 1024:.0f} MiB (heap {r['zk_heap']}, fsync {'on' if r['zk_force_sync'] else 'off'})")  # fmt: skip
    listing = r["listing"]
    if listing:
        print(f"listing the namespace (GET): {listing.get('count', 0):,} topics" if "count" in listing
              else f"listing the namespace (GET) failed: {listing['error']}", f"in {listing['seconds']:.1f} s")
    print(f"ZooKeeper watches at the end: {r['zk_watches']}")
    print(f"broker RSS {r['rss_start_kib']['broker'] / 1024:.1f} → {r['rss_end_kib']['broker'] / 1024:.1f} MiB "
          f"({r['broker_rss_per_topic_bytes']:.1f} bytes per topic created); gateway "
          f"{r['rss_start_kib']['gateway'] / 1024:.1f} → {r['rss_end_kib']['gateway'] / 1024:.1f} MiB")  # fmt: skip
    for k, top in r["profile"].items():
        print(f"{k}'s own time (py-spy): " + "; ".join(f"{f} {p:.1f}%" for f, p in top))
    print(f"load average: start {r['load_start'][0]:.2f}, end {r['load_end'][0]:.2f}")
    rate_ok = r["rate"] >= TARGET_RATE
    count_ok = r["created"] + r["exists"] >= target_topics and r["failed"] == 0
    print(f"target >= {TARGET_RATE:,.0f} topics/s: {r['rate']:,.0f} {'pass' if rate_ok else 'FAIL'}")
    print(f"target {target_topics:,} topics in the metadata: {r['created'] + r['exists']:,} {'pass' if count_ok else 'FAIL'}")
    return rate_ok and count_ok


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        url, first, count, concurrency, deadline = sys.argv[2:7]
        asyncio.run(worker_main(url, int(first), int(count), int(concurrency), float(deadline)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=TARGET_TOPICS, help="topics to create")
    parser.add_argument("--workers", type=int, default=2, help="client processes")
    parser.add_argument("--concurrency", type=int, default=64, help="connections (creates in flight) per client process")
    parser.add_argument("--max-seconds", type=float, default=1500.0, help="stop creating after this long")
    parser.add_argument("--progress-seconds", type=float, default=10.0)
    parser.add_argument("--zk-heap", default="2g", help="ZooKeeper's JVM -Xmx")
    parser.add_argument("--zk-force-sync", action=argparse.BooleanOptionalAction, default=True,
                        help="fsync ZooKeeper's transaction log on every write (as in production)")
    parser.add_argument("--profile", type=float, default=0.0, metavar="SECONDS",
                        help="record the broker and the gateway with py-spy for this long from the start of the creates")
    parser.add_argument("--list", action=argparse.BooleanOptionalAction, default=True,
                        help="list the namespace through the REST API once the creates are done")
    parser.add_argument("--quick", action="store_true", help="a small run: 20,000 topics")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "metadata.json"))
    args = parser.parse_args()
    if args.quick:
        args.topics = min(args.topics, 20_000)
    if args.topics < 1 or args.workers < 1 or args.concurrency < 1:
        parser.error("--topics, --workers and --concurrency must be >= 1")
    with tempfile.TemporaryDirectory(prefix="magnetar-bench-metadata-") as tmp:
        result = asyncio.run(run(args, Path(tmp)))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    ok = print_verdict(result, args.topics)
    print(f"written: {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
