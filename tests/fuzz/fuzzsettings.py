"""Fuzzing tier (issue 20): property tests of the decoders and hostile requests to every RPC.

``make test`` runs the bounded version (``MAGNETAR_FUZZ_EXAMPLES`` inputs per target, 200 by
default, derandomized so CI is reproducible); ``make fuzz`` runs 100,000 inputs per target
with a fresh random seed each run (hypothesis prints the example that failed; the RPC fuzzer
prints its seed, replay with ``MAGNETAR_FUZZ_SEED``).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("MAGNETAR_FUZZ_EXAMPLES", "200"))
LONG = EXAMPLES > 1000
"""A ``make fuzz`` run: random seeds instead of the fixed ones of the bounded run."""

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not LONG,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
"""Decorate each property test with ``@FUZZ`` (``from fuzzsettings import FUZZ``); a module,
not a conftest profile, so the other tiers' hypothesis settings are left alone."""
