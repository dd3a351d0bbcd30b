"""The policy catalogue (magnetar.common.policies): every entry has its REST routes, its
gRPC carrier and kind, the broker core's rule, and its ``magnetar admin namespaces``
verbs -- so a policy cannot be half-added -- and nothing is served that the catalogue
does not describe."""

from __future__ import annotations

import argparse
from unittest.mock import MagicMock

import pytest

from magnetar.broker.namespace_policies import RULES, NamespacePolicies, PolicyKind
from magnetar.broker.rpc.namespaces import CARRIED
from magnetar.broker.topic_policies import TOPIC_KINDS
from magnetar.common.policies import BY_TOPIC_VERB, BY_VERB, CATALOGUE, TOPIC_CATALOGUE, effective
from magnetar.gateway.app import create_app
from magnetar.gateway.policy_routes import BINDINGS
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.tools.admin import build_parser
from magnetar.tools.admin_policies import OPTIONS

PREFIX = "/admin/v2/namespaces"


@pytest.fixture(scope="module")
def operations() -> dict[str, tuple[str, str]]:
    """operationId → (method, path) of the gateway's OpenAPI document."""
    doc = create_app(MagicMock()).openapi()
    return {op["operationId"]: (method.upper(), path)
            for path, methods in doc["paths"].items() for method, op in methods.items()}


def carriers() -> set[str]:
    """The fields of SetNamespacePolicyRequest's ``policy`` oneof."""
    return {f.name for f in pb.SetNamespacePolicyRequest.DESCRIPTOR.oneofs_by_name["policy"].fields}


def namespace_verbs() -> set[str]:
    parser = build_parser()
    groups = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    namespaces = groups.choices["namespaces"]
    sub = next(a for a in namespaces._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


@pytest.mark.parametrize("spec", CATALOGUE, ids=lambda s: s.name)
def test_every_entry_has_its_routes(spec, operations):
    get_id, set_id, remove_id = spec.operation_ids
    base = f"{PREFIX}/{{{spec.tenant_param}}}/{{namespace}}"
    assert operations[get_id] == ("GET", f"{base}/{spec.get_segment}")
    assert operations[set_id] == (spec.set_method, f"{base}/{spec.name}")
    if spec.removable:
        assert operations[remove_id] == ("DELETE", f"{base}/{spec.name}")
    else:
        assert remove_id is None


@pytest.mark.parametrize("spec", CATALOGUE, ids=lambda s: s.name)
def test_every_entry_has_its_broker_carrier_kind_and_rule(spec):
    assert spec.carrier in carriers()
    assert spec.name in CARRIED
    assert spec.carrier in pb.NamespacePolicies.DESCRIPTOR.fields_by_name or spec.quota_typed
    kind = PolicyKind[spec.kind]
    assert kind.value == spec.name
    assert pb.NamespacePolicyKind.Value(f"POLICY_{spec.kind}") > 0
    assert RULES[kind].attr in NamespacePolicies.__dataclass_fields__
    assert spec.name in BINDINGS and spec.name in OPTIONS


@pytest.mark.parametrize("spec", CATALOGUE, ids=lambda s: s.name)
def test_every_entry_has_its_cli_verbs(spec):
    verbs = namespace_verbs()
    for verb in spec.verbs:
        assert verb in verbs
        assert BY_VERB[verb][0] is spec


def test_nothing_is_served_that_the_catalogue_does_not_describe():
    names = {spec.name for spec in CATALOGUE}
    assert {kind.value for kind in PolicyKind} == names
    assert set(RULES) == set(PolicyKind)
    assert set(BINDINGS) == names == set(OPTIONS) == set(CARRIED)
    kinds = {v.name for v in pb.NamespacePolicyKind.DESCRIPTOR.values} - {"POLICY_UNSPECIFIED"}
    assert kinds == {f"POLICY_{spec.kind}" for spec in CATALOGUE}
    assert carriers() == {spec.carrier for spec in CATALOGUE}
    policy_verbs = {v for v in namespace_verbs() if v.split("-", 1)[0] in ("get", "set", "remove")}
    assert policy_verbs == set(BY_VERB)


def test_the_most_specific_level_that_sets_a_policy_wins():
    assert effective(5, 10, default=0) == 5  # topic over namespace
    assert effective(None, 10, default=0) == 10  # namespace over the broker's default
    assert effective(None, None, default=7) == 7
    assert effective(0, 10, default=7) == 0  # 0 is a setting, not "not set"


# -- the topic level ---------------------------------------------------------------------
TOPIC_BASE = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"


def topic_verbs() -> set[str]:
    parser = build_parser()
    groups = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub = next(a for a in groups.choices["topics"]._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


TOPIC_LEVEL = [spec for spec in CATALOGUE if spec.topic is not None]


def test_pulsars_topic_policies_have_a_topic_level():
    assert {spec.name for spec in TOPIC_LEVEL} >= {
        "retention", "messageTTL", "backlogQuota", "deduplication", "delayedDelivery", "publishRate", "dispatchRate",
        "maxProducersPerTopic", "maxConsumersPerTopic"}
    assert TOPIC_CATALOGUE == tuple(TOPIC_LEVEL)


@pytest.mark.parametrize("spec", TOPIC_LEVEL, ids=lambda s: s.name)
def test_every_topic_level_has_pulsars_routes(spec, operations):
    level = spec.topic
    get_segment = spec.get_segment if spec.quota_typed else level.name
    want = dict(zip(level.operation_ids, (("GET", f"{TOPIC_BASE}/{get_segment}"), ("POST", f"{TOPIC_BASE}/{level.name}"),
                                          ("DELETE", f"{TOPIC_BASE}/{level.name}")), strict=True))
    for operation_id, route in want.items():
        assert operations[operation_id] == route


@pytest.mark.parametrize("spec", TOPIC_LEVEL, ids=lambda s: s.name)
def test_every_topic_level_has_its_cli_verbs_and_core_kind(spec):
    verbs = topic_verbs()
    for verb in spec.topic_verbs:
        assert verb in verbs
        assert BY_TOPIC_VERB[verb][0] is spec
    assert PolicyKind[spec.kind] in TOPIC_KINDS


def test_no_topic_route_or_verb_the_catalogue_does_not_describe(operations):
    served = {op for op in operations if op.startswith("PersistentTopics_") and any(
        op.endswith(s) for s in ("Retention", "MessageTTL", "BacklogQuota", "BacklogQuotaMap", "Deduplication",
                                 "DelayedDeliveryPolicies", "PublishRate", "DispatchRate", "MaxProducers",
                                 "MaxConsumers"))}
    assert served == {op for spec in TOPIC_LEVEL for op in spec.topic.operation_ids}
    policy_verbs = {v for v in topic_verbs() if v.split("-", 1)[0] in ("get", "set", "remove")}
    not_policies = {  # verbs of messages, properties and partitions, named get-/update-/remove- by pulsar-admin
        "get-message-id", "get-message-by-id", "get-properties", "remove-properties", "get-subscription-properties",
        "get-partitioned-topic-metadata",
    }
    assert policy_verbs - not_policies == set(BY_TOPIC_VERB)
    assert TOPIC_KINDS == {PolicyKind[spec.kind] for spec in TOPIC_LEVEL}
