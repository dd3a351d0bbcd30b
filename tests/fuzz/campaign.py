"""Sum a long fuzzing run's results per target: ``python tests/fuzz/campaign.py [FILE]``.

A long run (``make fuzz``) appends one line per target that passed to
``build/fuzz/results.jsonl`` (``fuzzsettings.record_result``); a run split over several
invocations (``make fuzz PYTEST_ARGS="-k Broker"``) adds up here. Prints, per tier and
target, the inputs (each invocation has its own seed, so the inputs are distinct), the
invocations and the slowest rate, and then every gRPC method short of ``--goal`` inputs.
Exit status 0 when every gRPC method and every recorded target reached the goal.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from fuzzsettings import RESULTS


def totals(lines: list[str]) -> dict[tuple[str, str], dict[str, float]]:
    out: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: {"inputs": 0, "runs": 0, "slowest": float("inf")})
    for line in lines:
        if not line.strip():
            continue
        r = json.loads(line)
        t = out[r["tier"], r["target"]]
        t["inputs"] += r["inputs"]
        t["runs"] += 1
        t["slowest"] = min(t["slowest"], r["per_s"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", default=RESULTS)
    parser.add_argument("--goal", type=int, default=100_000)
    args = parser.parse_args(argv)
    path = Path(args.file)
    if not path.exists():
        print(f"no results in {path}: run `make fuzz` first", file=sys.stderr)
        return 2
    got = totals(path.read_text().splitlines())
    print(f"{'tier':<10} {'target':<52} {'inputs':>9} {'runs':>4} {'slowest/s':>10}")
    for (tier, target), t in sorted(got.items()):
        mark = "" if t["inputs"] >= args.goal else "  (short)"
        print(f"{tier:<10} {target:<52} {int(t['inputs']):>9,} {int(t['runs']):>4} {t['slowest']:>10,.1f}{mark}")
    from rpcfuzz import methods  # here: it imports the generated stubs

    rpc_missing = [m.full_name for m in methods() if got.get(("rpc", m.full_name), {}).get("inputs", 0) < args.goal]
    short = [k for k, t in got.items() if t["inputs"] < args.goal]
    print(f"\ngRPC methods short of {args.goal:,} inputs: {len(rpc_missing)} of {len(methods())}")
    for name in rpc_missing:
        print(f"  {name}")
    return 0 if not rpc_missing and not short else 1


if __name__ == "__main__":
    sys.exit(main())
