"""Where the CPU goes: py-spy profiles of the broker, a bookie and the client while
``bench/compare.py``'s Magnetar workloads run (docs/performance.md quotes them).

Starts the same cluster as ``make bench-compare`` (3 bookies, E=3 Qw=2 Qa=2, 1 broker),
runs one workload in a child process and samples each process with ``py-spy record``
(non-blocking, so the program is not paused) for ``--seconds`` after a warm-up. Prints
the top functions by own time (a function's own Python line, plus the C code it calls)
and by inclusive time, with the CPU each process used per message, and writes the raw
collapsed stacks under bench/results/profiles/.

With ``--door pulsar`` the client is pulsar-client (its C++ core) through the broker's
Pulsar protocol door (:mod:`systems.pulsar_client`) instead of the asyncio SDK.

    python bench/profile.py [--workload unbatched|batched|latency] [--door sdk|pulsar] [--top 25]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procstats import cpu_seconds  # noqa: E402
from systems.magnetar_cluster import MagnetarSystem  # noqa: E402

DOORS = ("sdk", "pulsar")

OUT = Path(__file__).resolve().parent / "results" / "profiles"
WORKLOADS = {
    "unbatched": {"messages": 200_000, "batched": False},
    "batched": {"messages": 2_000_000, "batched": True},
    "latency": {"rate": 2000, "seconds": 20.0},
}
_FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>[^:]*)(?::\d+)?\)$")
_SITE = re.compile(r".*/(site-packages|services|python3\.\d+)/")


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not os.access(found, os.X_OK):
        raise SystemExit("py-spy is missing: make bench-compare installs it (bench/requirements-compare.lock)")
    return found


def _key(frame: str) -> str:
    m = _FRAME.match(frame)
    if not m:
        return frame
    return f"{m['fn']} ({_SITE.sub('', m['file'])})"


def top(collapsed: Path, n: int) -> dict[str, list[tuple[float, str]]]:
    """Own and inclusive shares (%) of the samples, the ``n`` largest of each."""
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        k = int(count)
        total += k
        frames = [_key(f) for f in stack.split(";")]
        own[frames[-1]] += k
        for f in set(frames):
            incl[f] += k
    if not total:
        return {"own": [], "inclusive": [], "samples": []}
    return {
        "own": [(100 * v / total, f) for f, v in own.most_common(n)],
        "inclusive": [(100 * v / total, f) for f, v in incl.most_common(n)],
        "samples": [(float(total), "samples")],
    }


def client_main(url: str, workload: str, door: str) -> None:
    """The child: run one workload against ``url`` and print its result as JSON."""
    if door == "pulsar":
        from systems.pulsar_client import PulsarClientSystem

        system: MagnetarSystem | PulsarClientSystem = PulsarClientSystem(url)
    else:
        system = MagnetarSystem(url)
    spec = WORKLOADS[workload]

    async def run() -> object:
        if workload == "latency":
            return (await system.latency(size=100, rate=int(spec["rate"]), seconds=spec["seconds"], warmup_s=1.0)).to_json()
        return (await system.throughput(size=100, messages=int(spec["messages"]), batched=bool(spec["batched"]), window=1000)).to_json()

    print(json.dumps(asyncio.run(run())), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="unbatched")
    parser.add_argument("--seconds", type=float, default=8.0, help="how long each process is sampled")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of the workload before sampling")
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--door", choices=DOORS, default="sdk",
                        help="the client: the asyncio SDK (gRPC) or pulsar-client (Pulsar's protocol)")  # fmt: skip
    parser.add_argument("--messages", type=int, help="messages of a throughput workload (default: the workload's)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--client", nargs=3, metavar=("URL", "WORKLOAD", "DOOR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        if args.messages and args.client[1] in ("batched", "unbatched"):
            WORKLOADS[args.client[1]]["messages"] = args.messages
        client_main(*args.client)
        return 0
    spy = py_spy()
    stem = args.workload if args.door == "sdk" else f"{args.door}-{args.workload}"
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="magnetar-profile-"))
    system = MagnetarSystem()
    asyncio.run(system.start(work))
    try:
        assert system.broker is not None
        bookies = [b.process.pid for b in system.bookies]
        cpu_start = {"broker": cpu_seconds(system.broker.process.pid), "bookies": sum(cpu_seconds(p) for p in bookies)}
        url = system.broker.pulsar_url if args.door == "pulsar" else system.url
        more = ["--messages", str(args.messages)] if args.messages else []
        client = subprocess.Popen([sys.executable, __file__, *more, "--client", url, args.workload, args.door],
                                  stdout=subprocess.PIPE, text=True)  # fmt: skip
        targets = {"broker": system.broker.process.pid, "bookie": system.bookies[0].process.pid, "client": client.pid}
        time.sleep(args.warmup)
        cpu0 = {k: cpu_seconds(p) for k, p in targets.items()}
        spies = {
            name: subprocess.Popen([spy, "record", "--nonblocking", "-p", str(pid), "-d", str(int(args.seconds)), "-r", str(args.rate),
                                    "-f", "raw", "-o", str(OUT / f"{stem}-{name}.txt")],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            for name, pid in targets.items()
        }
        for s in spies.values():
            s.wait()
        cpu1 = {k: cpu_seconds(p) for k, p in targets.items()}
        out, _ = client.communicate(timeout=600)
        result = json.loads(out.strip().splitlines()[-1])
        children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the client, reaped (the services are not yet)
        cpu_total = {"broker": cpu_seconds(system.broker.process.pid) - cpu_start["broker"],
                     "bookies": sum(cpu_seconds(p) for p in bookies) - cpu_start["bookies"],
                     "client": children.ru_utime + children.ru_stime}  # fmt: skip
    finally:
        asyncio.run(system.stop())
        shutil.rmtree(work, ignore_errors=True)
    print(f"workload {args.workload}, door {args.door}: {result}")
    count = result.get("messages") or result.get("sent") or 1
    per_message = {k: v / count * 1e6 for k, v in cpu_total.items()}
    print("CPU µs per message over the whole workload (the client's includes its start and, for the throughput "
          "workloads, the consume phase): " + ", ".join(f"{k} {v:.1f}" for k, v in per_message.items()))
    report: dict[str, object] = {"workload": args.workload, "door": args.door, "result": result, "seconds": args.seconds,
                                 "cpu_us_per_message": per_message, "load_average": os.getloadavg()[0], "processes": {}}  # fmt: skip
    for name in targets:
        shares = top(OUT / f"{stem}-{name}.txt", args.top)
        busy = (cpu1[name] - cpu0[name]) / args.seconds
        report["processes"][name] = {"cpu_share_of_one_core": busy, **shares}  # type: ignore[index]
        print(f"\n== {name}: {100 * busy:.0f}% of a core while sampled; top {args.top} by own time")
        for pct, fn in shares["own"]:
            print(f"  {pct:5.1f}%  {fn}")
    (OUT / f"{stem}.json").write_text(json.dumps(report, indent=2))
    print(f"\nwrote {OUT}/{stem}-*.txt and {stem}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
