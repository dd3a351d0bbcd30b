"""The chaos report: ``chaos-<seed>.json`` and a timeline ``chaos-<seed>.png``, plus the
few lines printed at the end of a run (always with the seed and the replay command)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from checker import CATEGORIES, CheckResult

MAX_PROBLEMS_IN_REPORT = 200


def _timeline(events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """One pass over the history: per-second counts, faults, replication, phases."""
    acked: dict[int, int] = defaultdict(int)
    delivered: dict[int, int] = defaultdict(int)
    failed: dict[int, int] = defaultdict(int)
    faults: list[dict[str, Any]] = []
    open_faults: dict[tuple[str, str], dict[str, Any]] = {}
    restores: list[dict[str, Any]] = []
    phases: list[dict[str, Any]] = []
    end = 0.0
    for ev in events:
        t = float(ev.get("t", 0.0))
        end = max(end, t)
        kind = ev.get("type")
        if kind == "send_ok":
            acked[int(t)] += 1
        elif kind == "send_fail":
            failed[int(t)] += 1
        elif kind in ("deliver", "dlq"):
            delivered[int(t)] += 1
        elif kind == "fault":
            ident = (str(ev.get("kind")), str(ev.get("target")))
            if ev.get("phase", "start") == "start":
                fault = {"kind": ev.get("kind"), "target": ev.get("target"), "start": t, "end": None,
                         "detail": ev.get("detail")}
                faults.append(fault)
                open_faults[ident] = fault
            elif ident in open_faults:
                open_faults.pop(ident)["end"] = t
            else:  # an end without a start: keep it visible
                faults.append({"kind": ev.get("kind"), "target": ev.get("target"), "start": t, "end": t,
                               "detail": ev.get("detail")})
        elif kind == "qw_restored":
            restores.append({k: ev.get(k) for k in ("t", "bookie", "seconds", "ok")})
        elif kind == "phase":
            phases.append({"t": t, "name": ev.get("name")})
    seconds = int(end) + 1
    return {
        "seconds": seconds,
        "acked_per_s": [acked.get(i, 0) for i in range(seconds)],
        "delivered_per_s": [delivered.get(i, 0) for i in range(seconds)],
        "send_failed_per_s": [failed.get(i, 0) for i in range(seconds)],
        "faults": faults,
        "qw_restored": restores,
        "phases": phases,
    }


def write_report(
    events: Iterable[dict[str, Any]], result: CheckResult, out_dir: Path, *, seed: int, settings: dict[str, Any]
) -> tuple[Path, Path]:
    """Write ``chaos-<seed>.json`` and ``chaos-<seed>.png`` into ``out_dir``.

    ``events`` may be a list or a one-shot iterator (``History.iter(path)``): it is read once.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    timeline = _timeline(events)
    doc = {
        "seed": seed,
        "ok": result.ok,
        "settings": settings,
        "replay": replay_command(seed, settings.get("duration")),
        "counts": result.counts(),
        "problems": result.problems[:MAX_PROBLEMS_IN_REPORT],
        "problems_total": sum(getattr(result, c) for c in CATEGORIES),
        **timeline,
    }
    json_path = out_dir / f"chaos-{seed}.json"
    json_path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    png_path = out_dir / f"chaos-{seed}.png"
    _draw(timeline, result, seed, png_path)
    return json_path, png_path


def _draw(timeline: dict[str, Any], result: CheckResult, seed: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = list(range(timeline["seconds"]))
    fig, (ax, gantt) = plt.subplots(2, 1, figsize=(14, 7.5), sharex=True, height_ratios=(3, 1))
    ax.plot(xs, timeline["acked_per_s"], label="acknowledged sends/s", lw=1, color="tab:blue")
    ax.plot(xs, timeline["delivered_per_s"], label="deliveries/s (all subscriptions)", lw=1, color="tab:green")
    if any(timeline["send_failed_per_s"]):
        ax.plot(xs, timeline["send_failed_per_s"], label="failed sends/s", lw=1, color="tab:red")
    kinds = sorted({str(f["kind"]) for f in timeline["faults"]})
    colours = plt.get_cmap("tab10")
    end = max(1, timeline["seconds"])
    for f in timeline["faults"]:
        i = kinds.index(str(f["kind"]))
        stop = f["end"] if f["end"] is not None else end
        ax.axvspan(f["start"], max(stop, f["start"] + 0.3), color=colours(i % 10), alpha=0.15, lw=0)
        gantt.barh(i, max(stop - f["start"], 0.3), left=f["start"], color=colours(i % 10), alpha=0.8)
        gantt.text(f["start"], i, f" {f['target']}", va="center", fontsize=6, clip_on=True)
    for r in timeline["qw_restored"]:
        late = not r.get("ok") or (r.get("seconds") or 0) > 60
        ax.axvline(r["t"], color="red" if late else "black", ls=":", lw=1)
    gantt.set_yticks(range(len(kinds)), kinds or [])
    gantt.set_ylim(-0.7, max(len(kinds), 1) - 0.3)
    gantt.set_xlabel("seconds since start")
    gantt.set_title("faults (dotted lines above: bookie re-replicated to Qw; red when late)", fontsize=9)
    ax.set_ylabel("messages/s")
    verdict = "PASS" if result.ok else "FAIL: " + ", ".join(f"{c} {getattr(result, c)}" for c in CATEGORIES if getattr(result, c))
    ax.set_title(f"Magnetar chaos run, seed {seed}: {verdict}", fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    ax.set_xlim(0, end)
    fig.subplots_adjust(left=0.08, right=0.98, top=0.95, bottom=0.08, hspace=0.25)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def replay_command(seed: int, duration: float | None = None) -> str:
    d = f"{duration:g}" if duration is not None else "<seconds>"
    return f"make chaos SEED={seed} DURATION={d}"


def summary(result: CheckResult, seed: int, *, duration: float | None = None) -> str:
    """A few lines for the end of a run: verdict, counts, first problems, replay command."""
    verdict = "PASS" if result.ok else "FAIL"
    lines = [
        f"chaos seed {seed}: {verdict}",
        f"  sent {result.sent}, acknowledged {result.acked}, send failed {result.send_failed} "
        f"({result.indeterminate_delivered} of those delivered anyway), deliveries {result.delivered} "
        f"({result.redelivered} flagged redeliveries), failed on purpose {result.failed_on_purpose}, "
        f"dead-lettered {result.dead_lettered}, faults {result.faults}, Qw restores {result.qw_restores}",
        "  " + ", ".join(f"{c} {getattr(result, c)}" for c in CATEGORIES),
    ]
    lines += [f"  {p}" for p in result.problems[:10]]
    if len(result.problems) > 10:
        lines.append(f"  ... {sum(getattr(result, c) for c in CATEGORIES) - 10} more problems (see the JSON report)")
    lines.append(f"  replay: {replay_command(seed, duration)}")
    return "\n".join(lines)
