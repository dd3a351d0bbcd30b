"""``magnetar admin`` does everything the gateway does: each operation of the gateway's
OpenAPI has a verb declaring it (``operations=`` on the verb's parser,
:mod:`magnetar.tools.admin_parser`) or an exemption with its reason beside them."""

from __future__ import annotations

from unittest.mock import MagicMock

import pytest

from magnetar.gateway.app import create_app
from magnetar.tools.admin import build_parser
from magnetar.tools.admin_parser import EXEMPT, verb_operations


@pytest.fixture(scope="module")
def gateway_operations() -> set[str]:
    spec = create_app(MagicMock()).openapi()
    return {op["operationId"] for ops in spec["paths"].values() for op in ops.values() if "operationId" in op}


@pytest.fixture(scope="module")
def declared() -> dict[str, tuple[str, ...]]:
    return verb_operations(build_parser())


def test_every_gateway_operation_has_a_verb(gateway_operations: set[str], declared: dict[str, tuple[str, ...]]):
    missing = sorted(gateway_operations - declared.keys() - EXEMPT.keys())
    assert not missing, f"gateway operations without a `magnetar admin` verb (add operations=... to one): {missing}"


def test_every_declared_operation_is_the_gateways(gateway_operations: set[str], declared: dict[str, tuple[str, ...]]):
    unknown = {op: " ".join(verb) for op, verb in declared.items() if op not in gateway_operations}
    assert not unknown, f"verbs naming operations the gateway does not have: {unknown}"
    assert not EXEMPT.keys() - gateway_operations, "exemptions of operations the gateway does not have"
    assert not EXEMPT.keys() & declared.keys(), "an exempt operation has a verb: drop the exemption"


def test_the_tree_is_read_where_verbs_are_declared(declared: dict[str, tuple[str, ...]]):
    """Verbs made from the policy catalogue and nested groups are found too."""
    assert declared["PersistentTopics_getStats"] == ("topics", "stats")
    assert declared["Namespaces_setNamespaceMessageTTL"] == ("namespaces", "set-message-ttl")
    assert declared["Magnetar_getAuditorStatus"] == ("auditor", "status")
