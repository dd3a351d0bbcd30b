"""Topic patterns of pattern subscriptions (client/pattern.py) and their options: pure."""

from __future__ import annotations

import re

import pulsar
import pytest

import magnetar
from magnetar.client.options import (
    RegexSubscriptionMode,
    check_discovery_period,
    check_regex_subscription_mode,
)
from magnetar.client.pattern import is_pattern, parse_pattern

PERSISTENT_ONLY = RegexSubscriptionMode.PersistentOnly
NAMES = [
    "persistent://t/ns/orders",
    "persistent://t/ns/orders-1",
    "persistent://t/ns/orders-2",
    "persistent://t/ns/my-orders-3",
    "non-persistent://t/ns/orders-4",
]


@pytest.mark.parametrize(
    ("pattern", "namespace", "expression"),
    [
        (re.compile("persistent://t/ns/orders-.*"), "t/ns", "t/ns/orders-.*"),
        ("t/ns/orders-.*", "t/ns", "t/ns/orders-.*"),
        ("orders-.*", "public/default", "public/default/orders-.*"),
        ("non-persistent://t/ns/o.*", "t/ns", "t/ns/o.*"),
    ],
)
def test_a_pattern_names_one_namespace_and_an_expression_without_the_domain(pattern, namespace, expression):
    parsed = parse_pattern(pattern, PERSISTENT_ONLY)
    assert str(parsed.namespace) == namespace
    assert parsed.regex.pattern == expression
    assert parsed.text == (pattern.pattern if isinstance(pattern, re.Pattern) else pattern)


def test_the_expression_matches_whole_names_of_the_mode_s_domain():
    parsed = parse_pattern(re.compile("persistent://t/ns/orders-.*"), PERSISTENT_ONLY)
    assert parsed.matching(NAMES) == ["persistent://t/ns/orders-1", "persistent://t/ns/orders-2"]
    # the pattern's domain is ignored (as pulsar-client); the mode decides
    every = parse_pattern("non-persistent://t/ns/orders-.*", RegexSubscriptionMode.AllTopics)
    assert every.matching(NAMES) == [
        "persistent://t/ns/orders-1", "persistent://t/ns/orders-2", "non-persistent://t/ns/orders-4",
    ]
    assert parse_pattern("t/ns/orders", PERSISTENT_ONLY).matching(NAMES) == ["persistent://t/ns/orders"]


def test_a_compiled_pattern_keeps_its_flags():
    parsed = parse_pattern(re.compile("t/ns/ORDERS-1", re.IGNORECASE), PERSISTENT_ONLY)
    assert parsed.matching(NAMES) == ["persistent://t/ns/orders-1"]


@pytest.mark.parametrize(
    ("pattern", "error", "problem"),
    [
        ("persistent://t/.*/orders", magnetar.InvalidTopicName, "one namespace"),
        ("t/(a|b)/orders", magnetar.InvalidTopicName, "one namespace"),
        (".*/ns/orders", magnetar.InvalidTopicName, "one namespace"),
        ("t/ns", magnetar.InvalidTopicName, "is not persistent://"),
        ("t/ns/", magnetar.InvalidTopicName, "is not persistent://"),
        ("kafka://t/ns/x", magnetar.InvalidTopicName, "unknown domain"),
        ("t/ns/orders-[", magnetar.InvalidArgument, "not a regular expression"),
        (re.compile(b"t/ns/x"), magnetar.InvalidArgument, "a str expression"),
        (42, magnetar.InvalidArgument, "a str or a compiled expression"),
    ],
)
def test_bad_patterns_are_refused(pattern, error, problem):
    with pytest.raises(error, match=problem):
        parse_pattern(pattern, PERSISTENT_ONLY)


def test_non_persistent_only_is_refused():
    with pytest.raises(magnetar.OperationNotSupported, match="no non-persistent topics"):
        parse_pattern("t/ns/x.*", RegexSubscriptionMode.NonPersistentOnly)


def test_what_is_a_pattern():
    assert is_pattern(re.compile("x"), False)
    assert is_pattern("x.*", True)
    assert not is_pattern("x", False) and not is_pattern(["x"], False)
    with pytest.raises(magnetar.InvalidArgument, match="a list of topics does not support"):
        is_pattern(["x"], True)


def test_the_mode_takes_pulsar_client_s_members_and_refuses_others():
    assert check_regex_subscription_mode(pulsar.RegexSubscriptionMode.AllTopics) is RegexSubscriptionMode.AllTopics
    assert check_regex_subscription_mode(RegexSubscriptionMode.PersistentOnly) is RegexSubscriptionMode.PersistentOnly
    for bad in (0, "Everything", None):
        with pytest.raises(magnetar.InvalidConfiguration, match="regex_subscription_mode"):
            check_regex_subscription_mode(bad)


def test_the_discovery_period_is_a_number_of_seconds():
    assert check_discovery_period(60) == 60.0 and check_discovery_period(0.5) == 0.5 and check_discovery_period(0) == 0
    for bad in ("60", True, None, float("nan")):
        with pytest.raises(magnetar.InvalidConfiguration, match="pattern_auto_discovery_period"):
            check_discovery_period(bad)
