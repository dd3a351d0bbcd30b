"""CPU per message of each process, phase by phase, with pulsar-client (its C++ core)
through the broker's Pulsar protocol door: what limits the door's throughput on this
machine (docs/performance.md, "The Pulsar protocol door").

Starts the cluster of ``make bench-compare`` (3 bookies, E=3 Qw=2 Qa=2, 1 broker) and runs
:mod:`systems.pulsar_client`'s throughput workloads, 100 B, in this process; for the
produce and the consume phase of each it prints messages/s and the CPU seconds per
message of the client (this whole process: Python and the C++ core's threads), the
broker and the three bookies. CPU time, unlike msgs/s, is not inflated by other work on a
shared machine. Written to bench/results/pulsar_cpu.json.

    python bench/pulsar_cpu.py [--batched-messages 200000] [--unbatched-messages 50000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procstats import cpu_seconds  # noqa: E402
from systems.pulsar_client import PulsarClientSystem  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "pulsar_cpu.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batched-messages", type=int, default=200_000)
    parser.add_argument("--unbatched-messages", type=int, default=50_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-pulsar-cpu-"))
    system = PulsarClientSystem()
    report: dict[str, object] = {"load_average_start": os.getloadavg()[0]}
    try:
        asyncio.run(system.start(work))
        cluster = system.cluster
        assert cluster.broker is not None
        pids = {"broker": [cluster.broker.process.pid], "bookies": [b.process.pid for b in cluster.bookies]}
        marks: list[tuple[str, float, dict[str, float]]] = []

        def mark(name: str) -> None:
            cpu = {k: sum(cpu_seconds(p) for p in v) for k, v in pids.items()}
            cpu["client"] = time.process_time()
            marks.append((name, time.perf_counter(), cpu))

        system.on_phase = mark
        for batched, messages in ((True, args.batched_messages), (False, args.unbatched_messages)):
            marks.clear()
            result = asyncio.run(system.throughput(size=100, messages=messages, batched=batched, window=1000))
            kind = "batched" if batched else "unbatched"
            phases = {}
            for (name, t0, c0), (_next, t1, c1) in zip(marks, marks[1:], strict=False):
                us = {k: round((c1[k] - c0[k]) / messages * 1e6, 2) for k in c0}
                phases[name] = {"msgs_s_wall": round(messages / (t1 - t0)), "cpu_us_per_message": us}
                print(f"{kind} 100 B {name}: {messages / (t1 - t0):,.0f} msgs/s (phase wall clock); CPU µs per message: "
                      + ", ".join(f"{k} {v:.1f}" for k, v in us.items()), flush=True)  # fmt: skip
            report[kind] = {"messages": messages, "result": result.to_json(), "phases": phases}
    finally:
        asyncio.run(system.stop())
        shutil.rmtree(work, ignore_errors=True)
    report["load_average_end"] = os.getloadavg()[0]
    print(f"load average {report['load_average_start']:.2f} at the start, {report['load_average_end']:.2f} at the end")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
