"""The chaos run: a cluster of real processes, the workload, the nemesis, the checker.

    python tests/chaos/run.py --duration 600 --seed N --rate 2000 --interval 20 --out docs/chaos/

prints the seed first (random when not given), starts the cluster (cluster.py), records
everything in a History under ``--work`` (default ``build/chaos/<seed>``, with the
processes' logs), runs the workload and the fault schedule for ``--duration`` seconds
with a progress line every 10 s, then heals every fault, stops producing, drains,
checks the history and writes the report (``chaos-<seed>.json`` and ``.png``) to
``--out``. Exit status 0 when the check passes, 1 otherwise. The cluster, its network
namespaces and its mounts are removed in every case (Ctrl-C and SIGTERM included).

The workload runs on an asyncio loop in a thread of its own; the nemesis runs in the
main thread, because the processes it restarts die with the thread that started them.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import logging
import os
import random
import signal
import sys
import threading
import time
import urllib.request
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from checker import CheckResult, check
from cluster import ChaosCluster, ClusterSettings
from history import History
from nemesis import KINDS, Nemesis
from report import summary, write_report
from workload import Workload

from magnetar.testing import pulsarclient

log = logging.getLogger("chaos")
T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]


class LoopThread:
    """An asyncio loop in a thread of its own; :meth:`call` runs a coroutine on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="workload-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except (concurrent.futures.TimeoutError, KeyboardInterrupt):
            future.cancel()
            raise

    def close(self) -> None:
        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self.loop.is_running():
            try:
                self.call(cancel_all(), timeout=10)
            except Exception:  # noqa: BLE001 - closing anyway
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
        if not self.loop.is_running():
            self.loop.close()


STALL_S = 60.0
"""A topic without one acknowledged send for this long while producing is stalled: more
than the send timeout (30 s) plus the longest fault (about 12 s) can explain."""


def ack_gaps(events: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Per topic, the longest time without an acknowledged send while producing (from
    the ``producing`` phase to the last acknowledged send of any topic). Read once."""
    start = stop = None
    last: dict[str, float] = {}
    gaps: dict[str, float] = {}
    for ev in events:
        kind = ev.get("type")
        if kind == "phase" and ev.get("name") == "producing":
            start = ev["t"]
        elif kind == "phase" and ev.get("name") == "stopped_producing":
            stop = ev["t"]
        elif kind == "workload":
            for topic in (ev.get("topics") or {}).values():
                last.setdefault(topic, -1.0)
        elif kind == "send_ok" and stop is None:
            t, topic = ev["t"], ev["topic"]
            prev = last.get(topic, -1.0)
            prev = start if prev < 0 and start is not None else prev
            if prev is not None and prev >= 0:
                gaps[topic] = max(gaps.get(topic, 0.0), t - prev)
            last[topic] = t
    # Producing ends when the last send of any topic is acknowledged (stopped_producing
    # comes later: it waits for the outcome of every pending send).
    end = max([v for v in last.values()] + [0.0])
    for topic, t in last.items():
        since = (start if t < 0 else t) or 0.0
        gaps[topic] = round(max(gaps.get(topic, 0.0), end - since), 2)
    return gaps


@dataclass
class Outcome:
    seed: int
    result: CheckResult
    json_path: Path
    png_path: Path
    text: str
    settings: dict[str, Any]
    stalled: dict[str, float]
    """Topics whose producer had nothing acknowledged for longer than STALL_S."""

    @property
    def ok(self) -> bool:
        return bool(self.result.ok) and not self.stalled


def _gateway_state(url: str | None) -> str:
    if url is None:
        return "-"
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=1) as resp:
            return "ready" if resp.status == 200 else str(resp.status)
    except Exception:  # noqa: BLE001 - only shown
        return "not ready"


def _progress(stop: threading.Event, t0: float, workload: Workload, nemesis: Nemesis, cluster: ChaosCluster,
              every_s: float) -> None:  # fmt: skip
    last: dict[str, int] = {}
    while not stop.wait(every_s):
        try:
            counters = workload.counters()
        except RuntimeError:  # changed size while copied: next time
            continue
        rate = (counters.get("acked", 0) - last.get("acked", 0)) / every_s
        last = counters
        step = nemesis.current
        shown = " ".join(f"{k}={v}" for k, v in sorted(counters.items()))
        print(f"[{time.monotonic() - t0:6.0f} s] {shown} ack/s={rate:.0f} gateway={_gateway_state(cluster.gateway_url)} "
              f"fault={step.describe() if step else '-'}", flush=True)  # fmt: skip


def run_chaos(*, duration_s: float, seed: int, rate: float, interval_s: float, out_dir: Path, work_dir: Path,
              drain_timeout_s: float = 120.0, kinds: tuple[str, ...] = KINDS,
              settings: ClusterSettings | None = None, progress_every_s: float = 10.0) -> Outcome:  # fmt: skip
    """One chaos run (see the module's docstring); the cluster is always stopped."""
    work_dir.mkdir(parents=True, exist_ok=True)
    history_path = work_dir / f"history-{seed}.jsonl"
    settings = settings or ClusterSettings()
    run_settings: dict[str, Any] = {"duration": duration_s, "rate": rate, "interval": interval_s, "kinds": list(kinds),
                                    "drain_timeout": drain_timeout_s, "work_dir": str(work_dir)}  # fmt: skip
    cluster = ChaosCluster(work_dir, settings)
    loop: LoopThread | None = None
    nemesis: Nemesis | None = None
    stop_progress = threading.Event()
    history = History(history_path)
    # The SDK's and the nemesis's messages (reconnects, fault start/end) go to a log of
    # the workload's own next to the services' logs, whatever the console shows.
    (work_dir / "logs").mkdir(parents=True, exist_ok=True)
    file_log = logging.FileHandler(work_dir / "logs" / "workload.log")
    file_log.setLevel(logging.INFO)
    file_log.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(file_log)
    # pulsar-client's C++ core logs through one logger of its own (not propagated).
    pulsar_log = logging.FileHandler(work_dir / "logs" / "pulsar-client.log")
    pulsar_log.setFormatter(file_log.formatter)
    pulsarclient.LOGGER.addHandler(pulsar_log)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    handler_log = logging.getLogger("magnetar.client.handler")
    handler_level = handler_log.level
    handler_log.setLevel(logging.DEBUG)  # each failed reconnect and why (a stalled producer's story)
    try:
        t = time.monotonic()
        cluster.start()
        run_settings["cluster"] = cluster.describe()
        run_settings["cluster_start_s"] = round(time.monotonic() - t, 1)
        history.record("cluster", **run_settings["cluster"])
        print(f"cluster up in {run_settings['cluster_start_s']} s: {json.dumps(cluster.describe()['members'])}"
              + (f" (no network namespaces: {cluster.netns_reason})" if not cluster.lab else ""), flush=True)  # fmt: skip
        loop = LoopThread()

        async def make() -> Workload:
            return Workload(cluster.service_url, history, pulsar_url=cluster.pulsar_url, rate=rate, seed=seed,
                            topic_prefix=f"chaos-{seed}")

        workload = loop.call(make())
        loop.call(workload.start(), timeout=300)
        nemesis = Nemesis(cluster, history, seed, interval_s, kinds=kinds)
        run_settings["kinds"] = list(nemesis.schedule.kinds)
        t0 = time.monotonic()
        progress = threading.Thread(target=_progress, name="progress", daemon=True,
                                    args=(stop_progress, t0, workload, nemesis, cluster, progress_every_s))  # fmt: skip
        progress.start()
        nemesis.run(duration_s)
        healed = cluster.heal_all()
        if healed:
            history.record("error", what="still faulty after the schedule (crashed?)", error="; ".join(healed))
            print(f"healed at the end: {healed}", flush=True)
        print("stopping producers, draining", flush=True)
        loop.call(workload.stop_producing(), timeout=180)
        loop.call(workload.drain(drain_timeout_s), timeout=drain_timeout_s + 60)
        missing = workload.missing()
        if missing:
            print(f"not drained within {drain_timeout_s:g} s: {missing}", flush=True)
        nemesis.finish(wait_qw_s=90)
        stop_progress.set()
        run_settings["counters"] = workload.counters()
        run_settings["faults"] = len(nemesis.steps_done)
        loop.call(workload.close(), timeout=60)
    finally:
        stop_progress.set()
        if nemesis is not None:
            for w in nemesis.watches:
                w.stop(timeout=5)
        if loop is not None:
            loop.close()
        history.close()
        cluster.stop()
        root.removeHandler(file_log)
        pulsarclient.LOGGER.removeHandler(pulsar_log)
        pulsar_log.close()
        root.setLevel(old_level)
        handler_log.setLevel(handler_level)
        file_log.close()
    result = check(History.iter(history_path))
    gaps = ack_gaps(History.iter(history_path))
    stalled = {t: g for t, g in gaps.items() if g > STALL_S}
    run_settings["longest_ack_gap_s"] = gaps
    run_settings["stalled_topics"] = stalled
    json_path, png_path = write_report(History.iter(history_path), result, out_dir, seed=seed, settings=run_settings)
    text = summary(result, seed, duration=duration_s)
    text += "\n  longest time without an acknowledged send, per topic: " + ", ".join(
        f"{t.rsplit('/', 1)[-1]} {g:.1f} s" for t, g in sorted(gaps.items()))
    if stalled:
        text += f"\n  STALLED (no acknowledged send for over {STALL_S:g} s while producing): {stalled}"
    return Outcome(seed, result, json_path, png_path, text, run_settings, stalled)


def _sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=600.0, help="seconds of faults and traffic (default 600)")
    p.add_argument("--seed", type=str, default="", help="the run's seed (default: random); replays the schedule")
    p.add_argument("--rate", type=float, default=2000.0, help="messages/s produced (default 2000)")
    p.add_argument("--interval", type=float, default=20.0, help="seconds between faults (default 20)")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "chaos", help="where the report goes")
    p.add_argument("--work", type=Path, default=None, help="history and logs (default build/chaos/<seed>)")
    p.add_argument("--drain-timeout", type=float, default=0.0,
                   help="seconds to wait for every subscription to catch up (default: half the duration, at least 120)")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"fault kinds (default all: {','.join(KINDS)})")
    p.add_argument("--no-netns", action="store_true", help="no network namespaces (no partitions)")
    p.add_argument("--disk-mb", type=int, default=0, help="each bookie's filesystem (default: from duration and rate)")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    seed = int(args.seed) if args.seed.strip() else random.randrange(1 << 31)
    print(f"seed {seed}", flush=True)
    console = logging.StreamHandler()
    console.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # The faults always; the SDK's chatter with -v only (all of it is in <work>/logs/workload.log).
    console.addFilter(lambda r: (args.verbose and r.levelno >= logging.INFO) or r.levelno >= logging.WARNING
                      or r.name in ("nemesis", "chaos"))
    console.setLevel(logging.INFO)
    logging.getLogger().addHandler(console)
    logging.getLogger().setLevel(logging.INFO)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    # Room for what an hour at 2,000 msgs/s leaves on a bookie (sparse: only used space counts).
    disk_mb = args.disk_mb or max(512, int(args.rate * args.duration * 600 / (1 << 20)))
    settings = ClusterSettings(use_netns=False if args.no_netns else None, disk_bytes=disk_mb << 20)
    work = args.work or ROOT / "build" / "chaos" / str(seed)
    # On 2 cores running the whole cluster, the Shared subscription with one ack per
    # message falls behind its 500 msgs/s by about 190 msgs/s while everything else
    # runs: after an hour its backlog is several 100,000 messages, delivered in the drain.
    drain_s = args.drain_timeout or max(120.0, args.duration / 2)
    signal.signal(signal.SIGTERM, _sigterm)
    try:
        outcome = run_chaos(duration_s=args.duration, seed=seed, rate=args.rate, interval_s=args.interval,
                            out_dir=args.out, work_dir=work, drain_timeout_s=drain_s, kinds=kinds,
                            settings=settings)  # fmt: skip
    except KeyboardInterrupt:
        print(f"interrupted; cluster stopped. seed {seed}, history and logs in {work}", file=sys.stderr)
        return 130
    print(outcome.text)
    print(f"report: {outcome.json_path} {outcome.png_path}; history and logs: {work}")
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
