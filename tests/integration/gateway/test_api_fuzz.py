"""schemathesis against the gateway's /openapi.json: generated requests, valid and invalid
(schemathesis' positive and negative modes), to every operation; no answer is a 5xx, and
every 4xx has a JSON ``reason``.

``make test`` runs a bounded number of examples per operation and mode; ``make fuzz-api``
runs many more (``FUZZ_API_EXAMPLES``). The module has a cluster of its own, so what the
generated calls create or delete touches no other test. (schemathesis' pytest plugin does
not run under pytest 9, so the operations are driven with hypothesis directly.)
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import schemathesis
from gateway_support import GatewayCluster
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.core.control import SkipTest

from magnetar.testing.processes import AuditorProcess, ServiceFactory

EXAMPLES = int(os.environ.get("FUZZ_API_EXAMPLES", "5"))
MODES = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)


@pytest.fixture(scope="module")
def gateway_cluster(own_gateway_cluster: GatewayCluster) -> GatewayCluster:
    """A cluster of this module's own: its fuzzed input may change anything the API
    reaches, and its auditor's leadership outlives the module."""
    return own_gateway_cluster


def check(case: schemathesis.Case) -> None:
    response = case.call(timeout=30)
    where = f"{case.method} {case.formatted_path} {case.query or ''}"
    assert response.status_code < 500, f"{where} -> {response.status_code}: {response.text[:300]}"
    if response.status_code >= 400:
        body = response.json()
        assert isinstance(body, dict) and isinstance(body.get("reason"), str) and body["reason"], f"{where}: {response.text[:300]}"


@pytest.fixture(scope="module")
def auditor(gateway_cluster: GatewayCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuditorProcess]:
    """The auditor routes answer 503 without one: run one, so a 5xx is always a fault."""
    factory = ServiceFactory(AuditorProcess, gateway_cluster.zk_connect, gateway_cluster.zk_root, tmp_path_factory.mktemp("auditor"))
    try:
        yield factory()
    finally:
        factory.kill_all()


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_no_server_errors_and_every_error_has_a_reason(
    gateway_cluster: GatewayCluster, auditor: AuditorProcess, mode: schemathesis.GenerationMode
) -> None:
    schema = schemathesis.openapi.from_url(f"{gateway_cluster.url}/openapi.json")
    # The mode as the schema's only one: then an operation without any invalid request (no
    # body, no typed parameter) ends at its first draw (SkipTest), not after the ~460 draws
    # hypothesis rejects before it says Unsatisfiable (40 operations, 50 s of the run).
    schema.config.generation.update(modes=[mode])
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 10
    unsatisfiable: list[str] = []
    for operation in operations:
        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                  database=None)
        def run(case: schemathesis.Case) -> None:
            check(case)

        try:
            run()
        except (Unsatisfiable, SkipTest):
            # No invalid request exists (no body, no typed parameter: any string is a name).
            assert mode is schemathesis.GenerationMode.NEGATIVE, operation.label
            unsatisfiable.append(operation.label)
    assert len(unsatisfiable) < len(operations), "no operation was fuzzed"
