"""Fuzzing tier (issue 20): property tests of the decoders and hostile requests to every RPC.

``make test`` runs the bounded version (``MAGNETAR_FUZZ_EXAMPLES`` inputs per target, 100 by
default, derandomized so CI is reproducible); ``make fuzz`` runs 100,000 inputs per target
with a fresh random seed each run (hypothesis prints the example that failed; the RPC fuzzer
and the fast decoder driver print their seed, replay with ``MAGNETAR_FUZZ_SEED``).

The 100,000 inputs per decoder of a long run come from the fast driver (``fastfuzz.py``,
``test_decoders_fast.py``: thousands of inputs/s per decoder); hypothesis runs its decoder
properties at 35-1,300 inputs/s, so in a long run they are capped at
``HYPOTHESIS_EXAMPLES`` (2,000) each and add what the fast driver does not: structured
inputs built strategy by strategy, and shrinking of a failure to a minimal example.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("MAGNETAR_FUZZ_EXAMPLES", "100"))
LONG = EXAMPLES > 1000
"""A ``make fuzz`` run: random seeds instead of the fixed ones of the bounded run."""

HYPOTHESIS_EXAMPLES = EXAMPLES if not LONG else min(EXAMPLES, 2000)
"""Examples per hypothesis property: ``EXAMPLES``, at most 2,000 in a long run (see above)."""

FUZZ = settings(
    max_examples=HYPOTHESIS_EXAMPLES,
    deadline=None,
    derandomize=not LONG,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
"""Decorate each property test with ``@FUZZ`` (``from fuzzsettings import FUZZ``); a module,
not a conftest profile, so the other tiers' hypothesis settings are left alone."""


RESULTS = os.environ.get("MAGNETAR_FUZZ_RESULTS", "build/fuzz/results.jsonl")
"""Where a long run appends one JSON line per target that passed (``record_result``)."""


def record_result(tier: str, target: str, *, inputs: int, seconds: float, seed: object, **extra: object) -> None:
    """In a long run, append what a target went through without a failure: the tier
    (``decoder``, ``rpc``, ``websocket``), the target, the inputs, the seconds and the
    seed. A long run may be split over several invocations (``make fuzz PYTEST_ARGS='-k
    …'``); the lines add up per target, each with its own seed, so distinct inputs."""
    if not LONG:
        return
    path = Path(RESULTS)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = {
        "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "tier": tier, "target": target, "inputs": inputs, "seconds": round(seconds, 1),
        "per_s": round(inputs / max(seconds, 1e-9), 1), "seed": seed, **extra,
    }  # fmt: skip
    with path.open("a") as f:
        f.write(json.dumps(line) + "\n")
