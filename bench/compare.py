"""Magnetar side by side with Redis Streams, NATS JetStream and RabbitMQ quorum queues, in
one run on this machine (``make bench-compare``). Magnetar is measured through two doors:
its asyncio SDK (gRPC) and Apache's pulsar-client (its C++ core) through the Pulsar
protocol door, each on a cluster of its own built the same way.

Each system in turn gets a fresh temporary directory, is started (its Debian package
installed first when missing), runs every workload below and is stopped by PID, also when
it fails or on Ctrl-C; a system that fails is reported and the others still run. What each
system does for "batched", "unbatched" and "consume" is in its module's docstring
(``bench/systems/``) and in its one-line description in the results.

* throughput, batched, 100 B and 1 KB: ``--messages`` messages produced (first send to
  last acknowledgement), then consumed from the start and acknowledged (first to last
  receipt);
* throughput, unbatched (one message per request, at most 1,000 unacknowledged), 100 B and
  1 KB: the same with ``--unbatched-messages`` (a quarter of ``--messages`` by default: these
  run 10-100x slower, and a quarter still lasts seconds for every system);
* publish and end-to-end latency, one message per request, 100 B, paced at 1,000, 2,000
  and 5,000 msgs/s for ``--latency-seconds`` after a 1 s warm-up, a consumer attached.

Writes bench/results/compare.json (the machine, each system's description, every
figure), docs/performance-compare.png, and the section of docs/performance.md between
``<!-- bench-compare:begin -->`` and ``<!-- bench-compare:end -->`` (the table with
Magnetar's ratio to each peer, the chart and the targets with pass/fail).

    python bench/compare.py [--systems magnetar,pulsar,redis,nats,rabbitmq] [--messages 200000]
        [--unbatched-messages 50000] [--latency-seconds 10] [--quick] [--loop uvloop]
    python bench/compare.py --report-only   # the chart and doc section again, from the JSON
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "compare.json"
DOC = ROOT / "docs" / "performance.md"
CHART = ROOT / "docs" / "performance-compare.png"
BEGIN, END = "<!-- bench-compare:begin -->", "<!-- bench-compare:end -->"


@dataclass(frozen=True)
class Entry:
    module: str
    cls: str
    short: str
    """The name in "Magnetar/<short>"."""


SYSTEMS = {
    "magnetar": Entry("systems.magnetar_cluster", "MagnetarSystem", "Magnetar"),
    "pulsar": Entry("systems.pulsar_client", "PulsarClientSystem", "pulsar-client"),
    "redis": Entry("systems.redis_streams", "RedisStreams", "Redis"),
    "nats": Entry("systems.nats_jetstream", "NatsJetStream", "NATS"),
    "rabbitmq": Entry("systems.rabbitmq_quorum", "RabbitQuorum", "RabbitMQ"),
}
OURS = ("magnetar", "pulsar")
"""Magnetar through its two doors: the SDK (gRPC) and pulsar-client (Pulsar's protocol);
every other system is a peer, and the table gives each of ours its ratio to each peer."""
WINDOW = 1000
SIZES = (100, 1024)
RATES = (1000, 2000, 5000)
LATENCY_SIZE = 100
WARMUP_S = 1.0
TARGET_RATE = 2000


def workloads() -> list[tuple[str, bool, int]]:
    """(key, batched, size) of the throughput workloads, in the order they run."""
    return [(f"{'batched' if b else 'unbatched'}-{s}", b, s) for b in (True, False) for s in SIZES]


def size_label(size: int) -> str:
    return f"{size // 1024} KB" if size % 1024 == 0 else f"{size} B"


def workload_label(key: str) -> str:
    kind, size = key.split("-")
    return f"{kind} {size_label(int(size))}" + (f" (window {WINDOW:,})" if kind == "unbatched" else "")


@dataclass
class Outcome:
    """One system's run: every figure, or why it is missing."""

    key: str
    name: str
    describe: str = ""
    error: str | None = None
    throughput: dict[str, dict[str, Any]] = field(default_factory=dict)
    latency: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


# -- Running ------------------------------------------------------------------------------


async def run_system(key: str, args: argparse.Namespace) -> Outcome:
    entry = SYSTEMS[key]
    outcome = Outcome(key, entry.short)
    try:
        system = getattr(importlib.import_module(entry.module), entry.cls)()
    except Exception as exc:  # e.g. magnetar_cluster.py not written yet, a client missing
        outcome.error = f"not available: {exc!r}"
        print(f"{key}: {outcome.error}", flush=True)
        return outcome
    outcome.name = system.name
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-compare-{key}-"))
    started = time.monotonic()
    try:
        print(f"{key}: starting ({workdir})", flush=True)
        await system.start(workdir)
        outcome.describe = system.describe()
        print(f"{key}: {outcome.describe}", flush=True)
        for name, batched, size in workloads():
            messages = args.messages if batched else args.unbatched_messages
            print(f"{key}: {workload_label(name)}, {messages:,} messages ...", end=" ", flush=True)
            try:
                result = await asyncio.wait_for(
                    system.throughput(size=size, messages=messages, batched=batched, window=WINDOW),
                    timeout=300 + messages / 200,
                )
            except Exception as exc:
                outcome.errors[name] = repr(exc)
                print(f"FAILED: {exc!r}", flush=True)
                continue
            outcome.throughput[name] = result.to_json()
            print(f"produce {result.produce_msgs_s:,.0f} msgs/s, consume {result.consume_msgs_s:,.0f} msgs/s",
                  flush=True)  # fmt: skip
        for rate in RATES:
            print(f"{key}: latency at {rate:,} msgs/s, {size_label(LATENCY_SIZE)}, "
                  f"{args.latency_seconds:g} s ...", end=" ", flush=True)  # fmt: skip
            try:
                lat = await asyncio.wait_for(
                    system.latency(size=LATENCY_SIZE, rate=rate, seconds=args.latency_seconds, warmup_s=WARMUP_S),
                    timeout=180 + args.latency_seconds * 3,
                )
            except Exception as exc:
                outcome.errors[f"latency-{rate}"] = repr(exc)
                print(f"FAILED: {exc!r}", flush=True)
                continue
            outcome.latency[str(rate)] = lat.to_json()
            print(f"publish p50 {lat.publish.p50_ms:.2f} ms p99 {lat.publish.p99_ms:.2f} ms, end to end "
                  f"p50 {lat.end_to_end.p50_ms:.2f} ms p99 {lat.end_to_end.p99_ms:.2f} ms", flush=True)  # fmt: skip
    except Exception as exc:
        outcome.error = repr(exc)
        print(f"{key}: FAILED: {exc!r}", flush=True)
    finally:
        try:
            await system.stop()
        except Exception as exc:
            print(f"{key}: stopping failed: {exc!r}", flush=True)
        shutil.rmtree(workdir, ignore_errors=True)
        outcome.seconds = round(time.monotonic() - started, 1)
        if not outcome.describe:
            try:
                outcome.describe = system.describe()
            except Exception:
                outcome.describe = outcome.name
        print(f"{key}: stopped ({outcome.seconds:.0f} s)", flush=True)
    return outcome


async def run_guarded(key: str, args: argparse.Namespace) -> Outcome:
    """:func:`run_system`, with SIGTERM treated like Ctrl-C: the run is cancelled, the
    system stopped and its directory removed, then :class:`KeyboardInterrupt` is raised."""
    task = asyncio.current_task()
    assert task is not None
    terminated = False

    def on_sigterm() -> None:
        nonlocal terminated
        terminated = True
        task.cancel()

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        return await run_system(key, args)
    except asyncio.CancelledError:
        if terminated:
            raise KeyboardInterrupt from None
        raise


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop every client runs on: asyncio's default, or uvloop's."""
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return None


def machine() -> dict[str, Any]:
    cpu = "?"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))  # fmt: skip
    except (OSError, StopIteration):
        pass
    uname = subprocess.run(["uname", "-a"], capture_output=True, text=True).stdout.strip()
    return {
        "uname": uname or " ".join(platform.uname()),
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }


# -- The report ---------------------------------------------------------------------------


def figure(outcome: Outcome | None, row: tuple[str, str, str]) -> float | None:
    """The figure of ``row`` = (kind, workload or rate, field) for ``outcome``."""
    if outcome is None:
        return None
    kind, which, name = row
    if kind == "throughput":
        value = outcome.throughput.get(which, {}).get(name)
    else:
        stat, pct = name.split(".")
        value = outcome.latency.get(which, {}).get(stat, {}).get(pct)
    return value if isinstance(value, (int, float)) and value == value else None


def rows() -> list[tuple[str, tuple[str, str, str]]]:
    """(label, figure address) of every row of the table."""
    out = []
    for name, _batched, _size in workloads():
        for phase in ("produce", "consume"):
            out.append((f"{workload_label(name)} {phase}, msgs/s", ("throughput", name, f"{phase}_msgs_s")))
    for rate in RATES:
        for stat, label in (("publish", "publish"), ("end_to_end", "end to end")):
            for pct in ("p50", "p99"):
                out.append((f"{label} {pct} at {rate:,} msgs/s, ms", ("latency", str(rate), f"{stat}.{pct}_ms")))
    return out


def fmt(value: float | None, row: tuple[str, str, str], failed: bool) -> str:
    if value is None:
        return "error" if failed else "—"
    return f"{value:,.0f}" if row[0] == "throughput" else f"{value:.2f}"


def table(outcomes: dict[str, Outcome]) -> str:
    ours = [k for k in OURS if k in outcomes]
    peers = [k for k in outcomes if k not in OURS]
    head = ["Workload"] + [outcomes[k].name for k in ours]
    for k in peers:
        head.append(outcomes[k].name)
        head.extend(f"{SYSTEMS[o].short}/{SYSTEMS[k].short}" for o in ours)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" + "---:|" * (len(head) - 1)]
    for label, row in rows():
        cells = [label]
        mine = {o: figure(outcomes[o], row) for o in ours}
        cells.extend(fmt(mine[o], row, _failed(outcomes[o], row)) for o in ours)
        for k in peers:
            theirs = figure(outcomes[k], row)
            cells.append(fmt(theirs, row, _failed(outcomes[k], row)))
            for o in ours:
                value = mine[o]
                cells.append(f"{value / theirs:.2f}×" if value is not None and theirs else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _failed(outcome: Outcome, row: tuple[str, str, str]) -> bool:
    kind, which, _ = row
    return outcome.error is not None or (which if kind == "throughput" else f"latency-{which}") in outcome.errors


@dataclass
class Target:
    text: str
    value: float | None
    ok: bool | None
    """None: not measured (Magnetar or the peer did not run, or that workload failed)."""
    fmt: str = "{:,.0f}"

    def line(self) -> str:
        if self.ok is None:
            return f"- [ ] not measured — {self.text}"
        shown = "—" if self.value is None else self.fmt.format(self.value)
        return f"- [{'x' if self.ok else ' '}] **{'pass' if self.ok else 'FAIL'}** — {self.text}: {shown}"


def targets(outcomes: dict[str, Outcome]) -> list[Target]:
    m, door = outcomes.get("magnetar"), outcomes.get("pulsar")
    redis, rabbit = outcomes.get("redis"), outcomes.get("rabbitmq")
    out: list[Target] = []

    def absolute(who: Outcome | None, text: str, row: tuple[str, str, str], limit: float, at_most: bool = False,
                 unit: str = "") -> None:  # fmt: skip
        v = figure(who, row)
        ok = None if v is None else (v <= limit if at_most else v >= limit)
        out.append(Target(text, v, ok, "{:.2f} ms" if unit == "ms" else "{:,.0f} msgs/s"))

    def ratio(who: Outcome | None, text: str, row: tuple[str, str, str], peer: Outcome | None, limit: float) -> None:
        v, p = figure(who, row), figure(peer, row)
        r = v / p if v is not None and p else None
        out.append(Target(text, r, None if r is None else r >= limit, "{:.2f}×"))

    rate = str(TARGET_RATE)
    if m is not None:
        for phase in ("produce", "consume"):
            row = ("throughput", "batched-100", f"{phase}_msgs_s")
            absolute(m, f"batched 100 B {phase} ≥ 250,000 msgs/s", row, 250_000)
            ratio(m, f"batched 100 B {phase} ≥ 1.5× Redis Streams", row, redis, 1.5)
        row = ("throughput", "unbatched-100", "produce_msgs_s")
        absolute(m, f"unbatched (window {WINDOW:,}) 100 B produce ≥ 30,000 msgs/s", row, 30_000)
        ratio(m, f"unbatched (window {WINDOW:,}) 100 B produce ≥ 1× RabbitMQ quorum", row, rabbit, 1.0)
        absolute(m, f"unbatched publish latency at {TARGET_RATE:,} msgs/s p50 ≤ 1.5 ms",
                 ("latency", rate, "publish.p50_ms"), 1.5, at_most=True, unit="ms")  # fmt: skip
        absolute(m, f"unbatched publish latency at {TARGET_RATE:,} msgs/s p99 ≤ 5 ms",
                 ("latency", rate, "publish.p99_ms"), 5.0, at_most=True, unit="ms")  # fmt: skip
    if door is not None:  # the Pulsar protocol door's targets (issue 32)
        who = "pulsar-client through the Pulsar door:"
        for phase in ("produce", "consume"):
            row = ("throughput", "batched-100", f"{phase}_msgs_s")
            absolute(door, f"{who} batched 100 B {phase} ≥ 400,000 msgs/s", row, 400_000)
            ratio(door, f"{who} batched 100 B {phase} ≥ 4× Redis Streams", row, redis, 4.0)
        row = ("throughput", "unbatched-100", "produce_msgs_s")
        absolute(door, f"{who} unbatched (window {WINDOW:,}) 100 B produce ≥ 40,000 msgs/s", row, 40_000)
        absolute(door, f"{who} unbatched publish latency at {TARGET_RATE:,} msgs/s p50 ≤ 1.5 ms",
                 ("latency", rate, "publish.p50_ms"), 1.5, at_most=True, unit="ms")  # fmt: skip
        absolute(door, f"{who} unbatched publish latency at {TARGET_RATE:,} msgs/s p99 ≤ 5 ms",
                 ("latency", rate, "publish.p99_ms"), 5.0, at_most=True, unit="ms")  # fmt: skip
    return out


def section(outcomes: dict[str, Outcome], mach: dict[str, Any], args: argparse.Namespace) -> str:
    systems = "\n".join(
        f"- **{o.name}**: {o.describe}" + (f" — **failed**: `{o.error}`" if o.error else "")
        + "".join(f"\n  - {w} failed: `{e}`" for w, e in o.errors.items())
        for o in outcomes.values()
    )  # fmt: skip
    chart = f"![Throughput and latency, each system]({CHART.relative_to(DOC.parent).as_posix()})"
    return f"""## Magnetar and its peers (`make bench-compare`)

Run on {mach['date']}: {mach['nproc']} cores ({mach['cpu']}), {mach['memory_gib']} GiB,
`{mach['uname']}`.
Load average {mach['loadavg_start'][0]:.2f} at the start, {mach['loadavg_end'][0]:.2f} at the end:
timings from one run on a shared 2-core machine, so expect noise and compare figures of
the same run only.

Every client is Python in the bench's process: asyncio ({args.loop} event loop), except
pulsar-client (blocking calls and callbacks on its C++ core's threads, run in a thread of
their own, timed by the same clocks); every server listens on 127.0.0.1 with its data in
a temporary directory.
Produce msgs/s: first send to last acknowledgement.
Consume msgs/s: first to last receipt of the backlog, every message acknowledged.
Batched: {args.messages:,} messages, each system's way of sending in bulk.
Unbatched: {args.unbatched_messages:,} messages, one per request, at most {WINDOW:,} unacknowledged.
Latency: one message per request, {size_label(LATENCY_SIZE)}, paced for {args.latency_seconds:g} s
after {WARMUP_S:g} s of warm-up, a consumer attached.
A ratio (Magnetar's SDK or pulsar-client over a peer) above 1× means Magnetar is faster in
msgs/s; below 1×, faster in latency.
Raw figures: `bench/results/compare.json`.

{systems}

{table(outcomes)}

{chart}

Targets:

{chr(10).join(t.line() for t in targets(outcomes))}
"""


def update_doc(text: str) -> None:
    """Rewrite the marked section of docs/performance.md, or add it (and the file)."""
    block = f"{BEGIN}\n{text.rstrip()}\n{END}"
    if DOC.exists():
        current = DOC.read_text()
    else:
        current = "# Performance\n\nMeasurements of Magnetar on this project's machines.\n"
    if BEGIN in current and END in current.split(BEGIN, 1)[1]:
        before, rest = current.split(BEGIN, 1)
        updated = before + block + rest.split(END, 1)[1]
    else:
        updated = current.rstrip() + "\n\n" + block + "\n"
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(updated)


COLORS = {"magnetar": "#6a3d9a", "pulsar": "#1f77b4", "redis": "#d62728", "nats": "#2ca02c", "rabbitmq": "#ff7f0e"}


def chart(outcomes: dict[str, Outcome], mach: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(outcomes)
    fig = plt.figure(figsize=(13, 9.5))
    grid = fig.add_gridspec(2, 2, height_ratios=(1.15, 1))
    top = fig.add_subplot(grid[0, :])
    groups = [(f"{n.split('-')[0]} {size_label(s)}\n{p}", ("throughput", n, f"{p}_msgs_s"))
              for n, _b, s in workloads() for p in ("produce", "consume")]  # fmt: skip
    width = 0.8 / max(len(keys), 1)
    for i, k in enumerate(keys):
        xs = [g + (i - (len(keys) - 1) / 2) * width for g in range(len(groups))]
        ys = [figure(outcomes[k], row) or 0 for _label, row in groups]
        bars = top.bar(xs, ys, width, label=outcomes[k].name, color=COLORS.get(k))
        for bar, y in zip(bars, ys, strict=True):
            if y:
                top.annotate(f"{y / 1000:.0f}k" if y >= 1000 else f"{y:.0f}", (bar.get_x() + bar.get_width() / 2, y),
                             ha="center", va="bottom", fontsize=6.5, rotation=90, xytext=(0, 2),
                             textcoords="offset points")  # fmt: skip
    top.set_yscale("log")
    top.set_xticks(range(len(groups)), [label for label, _ in groups], fontsize=8)
    top.set_ylabel("msgs/s (log scale)")
    top.set_title(f"Throughput (unbatched: one message per request, at most {WINDOW:,} unacknowledged)")
    top.legend(fontsize=8, loc="upper right")
    top.grid(axis="y", alpha=0.3)
    for col, (stat, title) in enumerate((("publish", "Publish latency"), ("end_to_end", "End-to-end latency"))):
        ax = fig.add_subplot(grid[1, col])
        for i, k in enumerate(keys):
            xs = [g + (i - (len(keys) - 1) / 2) * width for g in range(len(RATES))]
            p50 = [figure(outcomes[k], ("latency", str(r), f"{stat}.p50_ms")) for r in RATES]
            p99 = [figure(outcomes[k], ("latency", str(r), f"{stat}.p99_ms")) for r in RATES]
            ax.bar(xs, [v or 0 for v in p50], width, color=COLORS.get(k), label=f"{outcomes[k].name} p50")
            ax.scatter([x for x, v in zip(xs, p99, strict=True) if v], [v for v in p99 if v], marker="_", s=120,
                       color="black", label="p99" if i == 0 else None, zorder=3)  # fmt: skip
        ax.set_yscale("log")
        ax.set_xticks(range(len(RATES)), [f"{r:,} msgs/s" for r in RATES])
        ax.set_ylabel("ms (log scale): bar p50, dash p99")
        ax.set_title(f"{title}, {size_label(LATENCY_SIZE)}, one message per request")
        ax.grid(axis="y", alpha=0.3)
        if col == 1:
            ax.legend(fontsize=7)
    fig.suptitle(f"make bench-compare, {mach['date']}: one run on a shared {mach['nproc']}-core machine")
    fig.tight_layout()
    CHART.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(CHART, dpi=110)
    plt.close(fig)


# -- main ---------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help=f"comma-separated, in the order to run (default: {','.join(SYSTEMS)})")  # fmt: skip
    parser.add_argument("--messages", type=int, help="messages per batched workload (default 200,000)")
    parser.add_argument("--unbatched-messages", type=int, help="messages per unbatched workload (default messages / 4)")
    parser.add_argument("--latency-seconds", type=float, help="seconds recorded per rate (default 10)")
    parser.add_argument("--quick", action="store_true", help="a short check: 20,000 messages, 2 s per rate")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio",
                        help="the clients' event loop, the same for every system (default asyncio)")  # fmt: skip
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: redraw the chart and the doc section from bench/results/compare.json")  # fmt: skip
    args = parser.parse_args(argv)
    args.messages = args.messages or (20_000 if args.quick else 200_000)
    args.unbatched_messages = args.unbatched_messages or max(args.messages // 4, 1)
    args.latency_seconds = args.latency_seconds or (2.0 if args.quick else 10.0)
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in args.systems if s not in SYSTEMS]
    if unknown:
        parser.error(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(SYSTEMS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report_only:
        return report_only()
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # `systems` as a package
    mach = machine()
    print(f"bench-compare: {', '.join(args.systems)}; {mach['nproc']} cores, {mach['cpu']}; "
          f"load average {mach['loadavg_start'][0]:.2f}", flush=True)  # fmt: skip
    outcomes: dict[str, Outcome] = {}
    try:
        for key in args.systems:
            with asyncio.Runner(loop_factory=loop_factory(args.loop)) as runner:
                outcomes[key] = runner.run(run_guarded(key, args))
    except KeyboardInterrupt:
        print("\ninterrupted: every server started was stopped; no results written", flush=True)
        return 130
    mach["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    settings = {"messages": args.messages, "unbatched_messages": args.unbatched_messages, "window": WINDOW,
                "sizes": list(SIZES), "latency_size": LATENCY_SIZE, "rates": list(RATES),
                "latency_seconds": args.latency_seconds, "warmup_s": WARMUP_S, "loop": args.loop}  # fmt: skip
    report = {
        "machine": mach,
        "settings": settings,
        "systems": {k: vars(o) for k, o in outcomes.items()},
        "targets": [{"target": t.text, "value": t.value, "pass": t.ok} for t in targets(outcomes)],
    }
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    write_report(outcomes, mach, args)
    failed = [k for k, o in outcomes.items() if o.error]
    return 1 if failed and len(failed) == len(outcomes) else 0


def write_report(outcomes: dict[str, Outcome], mach: dict[str, Any], args: argparse.Namespace) -> None:
    """The chart and docs/performance.md's section; the table and targets on stdout."""
    chart(outcomes, mach)
    update_doc(section(outcomes, mach, args))
    print("\n" + table(outcomes) + "\n")
    print("\n".join(t.line() for t in targets(outcomes)))
    print(f"\nwrote {RESULTS.relative_to(ROOT)}, {CHART.relative_to(ROOT)}, {DOC.relative_to(ROOT)} "
          "(its bench-compare section)")  # fmt: skip


def report_only() -> int:
    """Redraw the chart and rewrite the doc section from bench/results/compare.json."""
    report = json.loads(RESULTS.read_text())
    outcomes = {k: Outcome(**v) for k, v in report["systems"].items()}
    s = report["settings"]
    args = argparse.Namespace(messages=s["messages"], unbatched_messages=s["unbatched_messages"],
                              latency_seconds=s["latency_seconds"], loop=s.get("loop", "asyncio"))  # fmt: skip
    write_report(outcomes, report["machine"], args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
