"""Namespace policies: Pulsar's rules for setting them, their stored document, the
admin over a document store twin, and the backlog arithmetic quotas and expiry use."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from magnetar.broker.backlog import backlog_bytes, eviction_point, last_entry_before, slowest
from magnetar.broker.deadletter import DeadLetterDefaults
from magnetar.broker.namespace_policies import (
    QUOTA_ABOVE_RETENTION,
    RETENTION_BELOW_QUOTA,
    SINGLE_ZERO_LIMIT,
    AutoTopicCreation,
    BacklogQuota,
    DelayedDelivery,
    DispatchRate,
    NamespacePolicies,
    NamespacePolicyAdmin,
    PersistencePolicies,
    PolicyKind,
    PublishRate,
    QuotaPolicy,
    QuotaType,
    auto_topic_creation,
    checked,
    from_document,
    managed_ledger_config,
    merged,
    to_document,
    with_policy,
    without_policy,
)
from magnetar.broker.retention import RetentionPolicy
from magnetar.common.errors import (
    AlreadyExists,
    InvalidArgument,
    NamespaceNotFound,
    PreconditionFailed,
)
from magnetar.managedledger.config import ManagedLedgerConfig
from magnetar.managedledger.layout import LedgerInfo, LedgerList
from magnetar.managedledger.position import Position
from magnetar.metadata.errors import CorruptMetadata

MB = 1024 * 1024
EMPTY = NamespacePolicies()
STORAGE, AGE = QuotaType.DESTINATION_STORAGE, QuotaType.MESSAGE_AGE


def _refused(kind: PolicyKind, value: object, base: NamespacePolicies = EMPTY, quota_type: QuotaType = STORAGE) -> Exception:
    with pytest.raises((InvalidArgument, PreconditionFailed)) as info:
        with_policy(base, kind, value, quota_type)
    return info.value


# -- Pulsar's rules ------------------------------------------------------------------
@pytest.mark.parametrize(("time", "size", "reason"), [
    (60, -2, "Invalid retention policy: size limit must be >= -1"),
    (-2, 10, "Invalid retention policy: time limit must be >= -1"),
    (0, 10, SINGLE_ZERO_LIMIT),
    (10, 0, SINGLE_ZERO_LIMIT),
    (True, 10, "Invalid retention policy: time limit must be >= -1"),
])
def test_retention_rules_are_pulsars(time: Any, size: Any, reason: str) -> None:
    error = _refused(PolicyKind.RETENTION, RetentionPolicy(time, size))
    assert type(error) is InvalidArgument and error.message == reason


@pytest.mark.parametrize(("time", "size"), [(0, 0), (-1, -1), (60, -1), (-1, 100), (2**31 - 1, 2**62)])
def test_valid_retentions_are_set(time: int, size: int) -> None:
    assert with_policy(EMPTY, PolicyKind.RETENTION, RetentionPolicy(time, size)).retention == RetentionPolicy(time, size)


@pytest.mark.parametrize("ttl", [-1, 2**31, "60", 1.5])
def test_a_bad_message_ttl_is_a_precondition_failure(ttl: object) -> None:
    error = _refused(PolicyKind.MESSAGE_TTL, ttl)
    assert type(error) is PreconditionFailed and error.message == "Invalid value for message TTL, message TTL must >= 0"


def test_message_ttl_zero_and_positive_are_set() -> None:
    assert with_policy(EMPTY, PolicyKind.MESSAGE_TTL, 0).message_ttl_s == 0
    assert with_policy(EMPTY, PolicyKind.MESSAGE_TTL, 3600).message_ttl_s == 3600


def test_a_quota_over_a_positive_retention_is_refused_both_ways() -> None:
    five_mb = with_policy(EMPTY, PolicyKind.RETENTION, RetentionPolicy(-1, 5))
    error = _refused(PolicyKind.BACKLOG_QUOTA, BacklogQuota(limit_size=5 * MB), five_mb)
    assert type(error) is PreconditionFailed and error.message == QUOTA_ABOVE_RETENTION
    fits = with_policy(five_mb, PolicyKind.BACKLOG_QUOTA, BacklogQuota(limit_size=5 * MB - 1))
    assert fits.quota(STORAGE) == BacklogQuota(limit_size=5 * MB - 1)
    # Setting retention below the quota set already is refused too.
    error = _refused(PolicyKind.RETENTION, RetentionPolicy(-1, 4), fits)
    assert type(error) is PreconditionFailed and error.message == RETENTION_BELOW_QUOTA
    # Time: the quota's seconds against the retention's minutes.
    one_minute = with_policy(EMPTY, PolicyKind.RETENTION, RetentionPolicy(1, -1))
    assert _refused(PolicyKind.BACKLOG_QUOTA, BacklogQuota(limit_time=60), one_minute).message == QUOTA_ABOVE_RETENTION
    assert with_policy(one_minute, PolicyKind.BACKLOG_QUOTA, BacklogQuota(limit_time=59)).quota(STORAGE) is not None
    # Only destination_storage quotas are checked; unlimited and zero retention check nothing.
    assert with_policy(one_minute, PolicyKind.BACKLOG_QUOTA, BacklogQuota(limit_time=600), AGE).quota(AGE) is not None
    for retention in (RetentionPolicy(-1, -1), RetentionPolicy(0, 0)):
        base = with_policy(EMPTY, PolicyKind.RETENTION, retention)
        assert with_policy(base, PolicyKind.BACKLOG_QUOTA, BacklogQuota(limit_size=10**12)).quota(STORAGE) is not None


@pytest.mark.parametrize("quota", [BacklogQuota(limit_size=-2), BacklogQuota(limit_time=-5), BacklogQuota(policy="drop")])  # type: ignore[arg-type]
def test_bad_backlog_quotas_are_invalid(quota: BacklogQuota) -> None:
    assert type(_refused(PolicyKind.BACKLOG_QUOTA, quota)) is InvalidArgument


def test_delayed_delivery_deduplication_and_dead_letter_values_are_checked() -> None:
    assert type(_refused(PolicyKind.DELAYED_DELIVERY, DelayedDelivery(tick_time_ms=-1))) is InvalidArgument
    assert type(_refused(PolicyKind.DELAYED_DELIVERY, DelayedDelivery(max_delivery_delay_ms=-1))) is InvalidArgument
    assert type(_refused(PolicyKind.DEDUPLICATION, 1)) is InvalidArgument
    assert type(_refused(PolicyKind.DEAD_LETTER, DeadLetterDefaults(max_redeliver_count=0))) is InvalidArgument
    assert type(_refused(PolicyKind.RETENTION, 5)) is InvalidArgument  # not a RetentionPolicy
    # The fuzzer's: a 1 MB initial subscription made a policies document ZooKeeper refused,
    # dropping the broker's session; a name over the subscription limit, or one holding '/',
    # is refused here.
    for initial in ("}" * 1_048_000, "x" * 1025, "{subscription}" + "y" * 1022, "a/b"):
        refused = _refused(PolicyKind.DEAD_LETTER, DeadLetterDefaults(initial_subscription_name=initial))
        assert type(refused) is InvalidArgument and "initial subscription" in refused.message, refused
    dl = DeadLetterDefaults(initial_subscription_name="{subscription}-" + "z" * 1000)
    assert with_policy(EMPTY, PolicyKind.DEAD_LETTER, dl).dead_letter == dl
    # Dead-letter defaults with nothing set are no policy at all.
    with_dl = with_policy(EMPTY, PolicyKind.DEAD_LETTER, DeadLetterDefaults(dead_letter_topic="dlq"))
    assert with_dl.dead_letter == DeadLetterDefaults(dead_letter_topic="dlq")
    assert with_policy(with_dl, PolicyKind.DEAD_LETTER, DeadLetterDefaults()).dead_letter is None


@pytest.mark.parametrize(("kind", "value", "reason"), [
    (PolicyKind.PUBLISH_RATE, PublishRate(-2, -1), "publishThrottlingRateInMsg must be -1 (no limit) or a 32-bit count >= 0"),
    (PolicyKind.PUBLISH_RATE, PublishRate(2**31, -1), "publishThrottlingRateInMsg"),
    (PolicyKind.PUBLISH_RATE, PublishRate(10, -5), "publishThrottlingRateInByte must be -1 (no limit) or >= 0, got -5"),
    (PolicyKind.DISPATCH_RATE, DispatchRate(-3), "dispatchThrottlingRateInMsg must be -1"),
    (PolicyKind.DISPATCH_RATE, DispatchRate(10, -9), "dispatchThrottlingRateInByte must be -1"),
    (PolicyKind.DISPATCH_RATE, DispatchRate(10, -1, False, 0), "ratePeriodInSecond must be at least 1, got 0"),
    (PolicyKind.DISPATCH_RATE, DispatchRate(10, -1, "yes", 1), "relativeToPublishRate is a boolean"),  # type: ignore[arg-type]
    (PolicyKind.DISPATCH_RATE, PublishRate(10, -1), "the dispatchRate policy is a DispatchRate"),
])
def test_bad_rates_are_refused_with_a_clear_reason(kind: PolicyKind, value: object, reason: str) -> None:
    error = _refused(kind, value)
    assert isinstance(error, InvalidArgument) and reason in error.message


def test_rates_are_set_and_removed() -> None:
    policies = with_policy(EMPTY, PolicyKind.PUBLISH_RATE, PublishRate(1000, 1 << 40))
    policies = with_policy(policies, PolicyKind.DISPATCH_RATE, DispatchRate(0, -1))  # 0 is no limit, as -1
    assert policies.publish_rate == PublishRate(1000, 1 << 40) and policies.dispatch_rate == DispatchRate(0, -1)
    assert without_policy(policies, PolicyKind.PUBLISH_RATE).publish_rate is None
    assert without_policy(policies, PolicyKind.DISPATCH_RATE) == NamespacePolicies(publish_rate=PublishRate(1000, 1 << 40))


def test_without_policy_removes_one_kind_and_one_quota_type() -> None:
    p = checked(NamespacePolicies(
        retention=RetentionPolicy(60, -1), message_ttl_s=30, deduplication=False,
        backlog_quotas={STORAGE: BacklogQuota(limit_size=10), AGE: BacklogQuota(limit_time=5)},
        delayed_delivery=DelayedDelivery(active=False), dead_letter=DeadLetterDefaults(max_redeliver_count=3),
    ))
    assert without_policy(p, PolicyKind.BACKLOG_QUOTA, AGE).backlog_quotas == {STORAGE: BacklogQuota(limit_size=10)}
    assert without_policy(p, PolicyKind.MESSAGE_TTL).message_ttl_s is None
    assert without_policy(p, PolicyKind.DEDUPLICATION).deduplication is None
    assert without_policy(p, PolicyKind.DELAYED_DELIVERY).delayed_delivery_active
    cleared = p
    for kind in PolicyKind:
        cleared = without_policy(cleared, kind, STORAGE)
    cleared = without_policy(cleared, PolicyKind.BACKLOG_QUOTA, AGE)
    assert cleared == EMPTY


def test_checked_applies_the_cross_rules_to_a_whole_set() -> None:
    with pytest.raises(PreconditionFailed, match="Backlog Quota exceeds"):
        checked(NamespacePolicies(retention=RetentionPolicy(-1, 1), backlog_quotas={STORAGE: BacklogQuota(limit_size=MB)}))
    with pytest.raises(PreconditionFailed):
        checked(NamespacePolicies(message_ttl_s=-1))


# -- the stored document -------------------------------------------------------------
FULL = NamespacePolicies(
    retention=RetentionPolicy(60, 100), message_ttl_s=30, deduplication=False,
    backlog_quotas={STORAGE: BacklogQuota(10, -1, QuotaPolicy.PRODUCER_EXCEPTION), AGE: BacklogQuota(-1, 5)},
    delayed_delivery=DelayedDelivery(False, 250, 9000), dead_letter=DeadLetterDefaults(max_redeliver_count=3),
    publish_rate=PublishRate(1000, -1), dispatch_rate=DispatchRate(500, 10_000, True, 2),
)


def test_the_document_round_trips_and_keeps_other_keys() -> None:
    doc = merged({"someone_elses": 1}, FULL)
    assert doc["someone_elses"] == 1
    assert doc["backlog_quotas"]["destination_storage"] == {"limit_size": 10, "limit_time": -1, "policy": "producer_exception"}
    assert doc["retention"] == {"retention_time_minutes": 60, "retention_size_mb": 100}
    assert from_document(doc) == FULL
    assert merged(doc, EMPTY) == {"someone_elses": 1}
    assert set(to_document(EMPTY).values()) == {None}


def test_values_older_code_stored_are_read_as_they_are() -> None:
    # The retention RPC of before accepted one limit 0 and the other not.
    assert from_document({"retention": {"retention_time_minutes": 0, "retention_size_mb": -1}}).retention == RetentionPolicy(0, -1)


@pytest.mark.parametrize("doc", [
    {"retention": {"retention_time_minutes": -5, "retention_size_mb": 0}},
    {"message_ttl_seconds": "x"},
    {"backlog_quotas": {"destination_storage": {"limit_size": 1, "limit_time": 1, "policy": "nope"}}},
    {"backlog_quotas": {"elsewhere": {"limit_size": 1, "limit_time": 1, "policy": "producer_exception"}}},
    {"deduplication": "yes"},
    {"delayed_delivery": {"active": True, "unknown": 1}},
    {"dead_letter_policy": {"max_redeliver_count": 0}},
    {"publish_rate": {"msg_rate": -7, "byte_rate": -1}},
    {"dispatch_rate": {"msg_rate": 1, "byte_rate": 1, "relative_to_publish_rate": False, "period_s": 0}},
])
def test_corrupt_documents_are_reported(doc: dict[str, Any]) -> None:
    with pytest.raises(CorruptMetadata, match="t/ns"):
        from_document(doc, "t/ns")


# -- the admin over a document store ------------------------------------------------
class Documents:
    """A twin of ZkTenantStore's namespace documents (update: a private copy, all or nothing)."""

    def __init__(self) -> None:
        self.docs: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes = 0

    async def get_policies(self, tenant: str, namespace: str) -> dict[str, Any]:
        if (tenant, namespace) not in self.docs:
            raise NamespaceNotFound(f"namespace {tenant}/{namespace} does not exist")
        return copy.deepcopy(self.docs[tenant, namespace])

    async def update_policies(self, tenant: str, namespace: str, fn: Any) -> dict[str, Any]:
        new = dict(fn(await self.get_policies(tenant, namespace)))
        self.docs[tenant, namespace] = new
        self.writes += 1
        return new

    async def create_namespace(self, tenant: str, namespace: str, policies: dict[str, Any] | None = None) -> None:
        if (tenant, namespace) in self.docs:
            raise AlreadyExists(f"namespace {tenant}/{namespace} already exists")
        self.docs[tenant, namespace] = dict(policies or {})


async def test_the_admin_sets_removes_and_tells_of_each_change() -> None:
    docs = Documents()
    changes: list[tuple[str, NamespacePolicies]] = []
    admin = NamespacePolicyAdmin(docs, on_change=lambda ns, p: changes.append((ns, p)))
    await admin.create_namespace("t/ns", NamespacePolicies(retention=RetentionPolicy(-1, 5)))
    assert (await admin.get("t/ns")).retention == RetentionPolicy(-1, 5)
    await admin.set("t/ns", PolicyKind.MESSAGE_TTL, 10)
    await admin.set("t/ns", PolicyKind.BACKLOG_QUOTA, BacklogQuota(limit_size=MB), STORAGE)
    assert changes[-1][0] == "t/ns" and changes[-1][1].quota(STORAGE) == BacklogQuota(limit_size=MB)
    before, writes = copy.deepcopy(docs.docs), docs.writes
    with pytest.raises(PreconditionFailed):
        await admin.set("t/ns", PolicyKind.RETENTION, RetentionPolicy(-1, 1))
    assert docs.docs == before and docs.writes == writes and len(changes) == 2  # nothing written or told
    await admin.remove("t/ns", PolicyKind.MESSAGE_TTL)
    assert (await admin.get("t/ns")).message_ttl_s is None
    with pytest.raises(NamespaceNotFound):
        await admin.set("t/other", PolicyKind.DEDUPLICATION, True)
    with pytest.raises(InvalidArgument):
        await admin.get("no-slash")


async def test_a_namespace_created_with_refused_policies_is_not_created() -> None:
    docs = Documents()
    admin = NamespacePolicyAdmin(docs)
    with pytest.raises(InvalidArgument, match="single time or size limit"):
        await admin.create_namespace("t/ns", NamespacePolicies(retention=RetentionPolicy(0, 5)))
    assert docs.docs == {}
    await admin.create_namespace("t/ns", NamespacePolicies())
    with pytest.raises(AlreadyExists):
        await admin.create_namespace("t/ns", NamespacePolicies(message_ttl_s=5))


# -- backlog arithmetic --------------------------------------------------------------
LEDGERS = LedgerList([LedgerInfo(1, 10, 1000, 0), LedgerInfo(2, 0, 0, 0), LedgerInfo(3, 4, 400, 0)], open_ledger_id=3)


def test_backlog_bytes_counts_what_follows_the_slowest_mark_delete() -> None:
    assert slowest([]) is None and backlog_bytes(LEDGERS, None) == 0
    assert slowest([Position(3, 1), Position(1, 4)]) == Position(1, 4)
    assert backlog_bytes(LEDGERS, Position(1, -1)) == 1400
    assert backlog_bytes(LEDGERS, Position(1, 4)) == 500 + 400
    assert backlog_bytes(LEDGERS, Position(1, 9)) == 400
    assert backlog_bytes(LEDGERS, Position(3, 3)) == 0


def test_last_entry_before_skips_empty_ledgers() -> None:
    assert last_entry_before(LEDGERS, Position(3, 0)) == Position(1, 9)
    assert last_entry_before(LEDGERS, Position(3, 2)) == Position(3, 1)
    assert last_entry_before(LEDGERS, Position(3, 99)) == Position(3, 3)
    assert last_entry_before(LEDGERS, Position(1, 0)) is None


def test_eviction_point_leaves_at_most_the_limit_behind() -> None:
    assert eviction_point(LEDGERS, 1400) is None
    assert eviction_point(LEDGERS, 400) == Position(1, 9)  # ledger 3 alone fits
    assert eviction_point(LEDGERS, 650) == Position(1, 7)  # 400 + two 100-byte entries of ledger 1
    assert eviction_point(LEDGERS, 250) == Position(3, 1)
    assert eviction_point(LEDGERS, 0) == Position(3, 3)
    for limit in (0, 250, 650, 1399):
        point = eviction_point(LEDGERS, limit)
        assert point is not None and backlog_bytes(LEDGERS, point) <= limit


def test_schema_policies_take_pulsars_names_refuse_bad_values_and_round_trip() -> None:
    from magnetar.broker.schema.compatibility import SchemaCompatibilityStrategy

    p = with_policy(NamespacePolicies(), PolicyKind.SCHEMA_COMPATIBILITY_STRATEGY, "backward_transitive")
    assert p.schema_compatibility_strategy is SchemaCompatibilityStrategy.BACKWARD_TRANSITIVE
    p = with_policy(p, PolicyKind.IS_ALLOW_AUTO_UPDATE_SCHEMA, False)
    p = with_policy(p, PolicyKind.SCHEMA_VALIDATION_ENFORCED, True)
    assert (p.allow_auto_update_schema, p.validation_enforced) == (False, True)
    assert (NamespacePolicies().allow_auto_update_schema, NamespacePolicies().validation_enforced) == (True, False)
    with pytest.raises(InvalidArgument, match="unknown schemaCompatibilityStrategy 'SIDEWAYS'"):
        with_policy(p, PolicyKind.SCHEMA_COMPATIBILITY_STRATEGY, "SIDEWAYS")
    with pytest.raises(InvalidArgument, match="isAllowAutoUpdateSchema"):
        with_policy(p, PolicyKind.IS_ALLOW_AUTO_UPDATE_SCHEMA, "yes")
    doc = merged({"other": 1}, p)
    assert doc["schema_compatibility_strategy"] == "BACKWARD_TRANSITIVE" and doc["other"] == 1
    assert from_document(doc) == p
    cleared = without_policy(without_policy(p, PolicyKind.SCHEMA_VALIDATION_ENFORCED), PolicyKind.IS_ALLOW_AUTO_UPDATE_SCHEMA)
    cleared = without_policy(cleared, PolicyKind.SCHEMA_COMPATIBILITY_STRATEGY)
    assert merged({"other": 1}, cleared) == {"other": 1}
    assert checked(p) == p


@pytest.mark.parametrize("e, w, a, rate", [
    (1, 2, 1, 0.0), (2, 2, 3, 0.0), (0, 0, 0, 0.0), (2, 2, -1, 0.0), (2, 2, 2, -1.0), (2, 2, 2, float("nan")),
    (True, 1, 1, 0.0),
])
def test_persistence_is_refused_unless_ensemble_write_ack_descend_to_one(e: Any, w: int, a: int, rate: float) -> None:
    with pytest.raises(InvalidArgument) as err:
        with_policy(NamespacePolicies(), PolicyKind.PERSISTENCE, PersistencePolicies(e, w, a, rate))
    assert "Ensemble" in err.value.message or "MarkDeleteRate" in err.value.message


def test_persistence_sets_the_quorums_and_persist_interval_of_new_ledgers() -> None:
    base = ManagedLedgerConfig(ensemble_size=3, write_quorum=3, ack_quorum=2, cursor_persist_interval_s=1.0)
    policies = with_policy(NamespacePolicies(), PolicyKind.PERSISTENCE, PersistencePolicies(1, 1, 1, 4))
    assert policies.persistence == PersistencePolicies(1, 1, 1, 4.0)
    config = managed_ledger_config(base, policies)
    assert (config.ensemble_size, config.write_quorum, config.ack_quorum) == (1, 1, 1)
    assert config.cursor_persist_interval_s == 0.25  # 4 mark-deletes a second at most
    assert config.max_entries_per_ledger == base.max_entries_per_ledger
    unlimited = with_policy(NamespacePolicies(), PolicyKind.PERSISTENCE, PersistencePolicies(2, 2, 1))
    assert managed_ledger_config(base, unlimited).cursor_persist_interval_s == 1.0
    assert managed_ledger_config(base, without_policy(policies, PolicyKind.PERSISTENCE)) == base
    assert from_document(to_document(policies)) == policies


@pytest.mark.parametrize("threshold", [-1, 1.5, True, "10M", 2**63])
def test_a_bad_compaction_threshold_is_a_precondition_failure(threshold: object) -> None:
    with pytest.raises(PreconditionFailed, match="compactionThreshold must be 0 or more"):
        with_policy(NamespacePolicies(), PolicyKind.COMPACTION_THRESHOLD, threshold)


def test_a_compaction_threshold_is_set_stored_and_removed() -> None:
    policies = with_policy(NamespacePolicies(), PolicyKind.COMPACTION_THRESHOLD, 10 * 1024 * 1024)
    assert policies.compaction_threshold == 10 * 1024 * 1024
    assert from_document(to_document(policies)) == policies
    assert without_policy(policies, PolicyKind.COMPACTION_THRESHOLD).compaction_threshold is None


@pytest.mark.parametrize("policy, reason", [
    (AutoTopicCreation(True, "partitioned"), "cannot be null when the type is partitioned"),
    (AutoTopicCreation(True, "partitioned", 0), "cannot be less than 1 for partition type"),
    (AutoTopicCreation(True, "non-partitioned", 2), "is not allowed to be set when the type is non-partition"),
    (AutoTopicCreation(True, "sharded"), "Unknown topic type"),
    (AutoTopicCreation(True, ""), "Unknown topic type"),
])
def test_auto_topic_creation_is_checked_by_pulsars_rules(policy: AutoTopicCreation, reason: str) -> None:
    with pytest.raises(InvalidArgument, match="Invalid configuration for autoTopicCreationOverride") as err:
        with_policy(NamespacePolicies(), PolicyKind.AUTO_TOPIC_CREATION, policy)
    assert reason in err.value.message


def test_auto_topic_creation_overrides_the_brokers_settings() -> None:
    broker = auto_topic_creation(NamespacePolicies(), True, "partitioned", 4)
    assert broker == AutoTopicCreation(True, "partitioned", 4) and broker.partitioned
    assert auto_topic_creation(NamespacePolicies(), True, "non-partitioned", 4) == AutoTopicCreation(True)
    forbidden = with_policy(NamespacePolicies(), PolicyKind.AUTO_TOPIC_CREATION, AutoTopicCreation(False, ""))
    assert auto_topic_creation(forbidden, True, "partitioned", 4) == AutoTopicCreation(False, "")
    assert not auto_topic_creation(forbidden, True, "partitioned", 4).partitioned
    assert from_document(to_document(forbidden)) == forbidden
