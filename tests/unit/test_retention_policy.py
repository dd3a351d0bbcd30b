"""Retention policies (conversions, validation, lookup with defaults) and the broker's
periodic retention task, against fake topics: no network."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from magnetar.broker.config import BrokerConfig
from magnetar.broker.retention import RetentionPolicy, RetentionTask
from magnetar.common.errors import (
    InvalidArgument,
    MetadataError,
    NamespaceNotFound,
    ServiceClosed,
)
from magnetar.metadata.tenants import NamespaceRetention, validate_retention


def test_policy_converts_minutes_and_megabytes_and_unlimited():
    assert RetentionPolicy(0, 0).time_s == 0 and RetentionPolicy(0, 0).size_bytes == 0
    policy = RetentionPolicy(90, 3)
    assert policy.time_s == 5400.0
    assert policy.size_bytes == 3 * 1024 * 1024
    unlimited = RetentionPolicy(-1, -1)
    assert unlimited.time_s is None and unlimited.size_bytes is None
    assert RetentionPolicy(-1, 10).time_s is None and RetentionPolicy(-1, 10).size_bytes == 10 * 1024 * 1024


@pytest.mark.parametrize(("minutes", "mb"), [(-1, -1), (0, 0), (60, -1), (-1, 1024), (10**9, 10**9)])
def test_validate_retention_accepts_integers_from_minus_one(minutes, mb):
    assert validate_retention(minutes, mb) == NamespaceRetention(minutes, mb)


@pytest.mark.parametrize(
    ("minutes", "mb", "field"),
    [(-2, 0, "retention_time_minutes"), (0, -5, "retention_size_mb"), (1.5, 0, "retention_time_minutes"),
     (0, "1", "retention_size_mb"), (True, 0, "retention_time_minutes"), (None, 0, "retention_time_minutes")],
)
def test_validate_retention_refuses_other_values(minutes, mb, field):
    with pytest.raises(InvalidArgument, match=field):
        validate_retention(minutes, mb)


# -- the task, with fakes ---------------------------------------------------------------
@dataclass
class FakeLedger:
    deleted: list[int] = field(default_factory=lambda: [7])
    error: BaseException | None = None
    calls: list[tuple[float | None, int | None]] = field(default_factory=list)

    async def trim_consumed(self, retention_time_s, retention_size_bytes):
        self.calls.append((retention_time_s, retention_size_bytes))
        if self.error is not None:
            raise self.error
        return self.deleted


@dataclass
class FakeTopic:
    ml: FakeLedger


class FakeStore:
    def __init__(self, policies: dict[str, NamespaceRetention | None | BaseException]) -> None:
        self.policies = policies
        self.reads: list[str] = []
        self.written: dict[str, NamespaceRetention] = {}

    async def get_retention(self, tenant, namespace):
        key = f"{tenant}/{namespace}"
        self.reads.append(key)
        value = self.policies.get(key, NamespaceNotFound(f"namespace {key} does not exist"))
        if isinstance(value, BaseException):
            raise value
        return value

    async def set_retention(self, tenant, namespace, retention):
        validate_retention(*retention)
        self.written[f"{tenant}/{namespace}"] = retention


def config(**overrides) -> BrokerConfig:
    return BrokerConfig(zookeeper="127.0.0.1:1", **overrides)


async def test_lookup_uses_the_namespace_policy_else_the_broker_defaults():
    store = FakeStore({"a/kept": NamespaceRetention(-1, 20), "a/unset": None})
    task = RetentionTask({}, store, config(default_retention_time_minutes=5, default_retention_size_mb=-1))
    assert await task.retention_policies("a/kept") == RetentionPolicy(-1, 20)
    assert await task.retention_policies("a/unset") == RetentionPolicy(5, -1)
    with pytest.raises(NamespaceNotFound):
        await task.retention_policies("a/missing")
    with pytest.raises(InvalidArgument):
        await task.retention_policies("no-slash")


async def test_set_retention_validates_and_stores():
    store = FakeStore({})
    task = RetentionTask({}, store, config())
    await task.set_retention("a/ns", RetentionPolicy(60, -1))
    assert store.written == {"a/ns": NamespaceRetention(60, -1)}
    with pytest.raises(InvalidArgument, match="retention_size_mb"):
        await task.set_retention("a/ns", RetentionPolicy(0, -2))
    with pytest.raises(InvalidArgument):
        await task.set_retention("bad name", RetentionPolicy(0, 0))
    assert store.written == {"a/ns": NamespaceRetention(60, -1)}


async def test_a_round_trims_every_topic_with_its_namespace_limits():
    topics = {
        "persistent://a/zero/t1": FakeTopic(FakeLedger([3, 4])),
        "persistent://a/zero/t2-partition-0": FakeTopic(FakeLedger([])),
        "persistent://a/forever/t3": FakeTopic(FakeLedger([])),
        "persistent://a/default/t4": FakeTopic(FakeLedger([9])),
    }
    store = FakeStore({"a/zero": NamespaceRetention(0, 0), "a/forever": NamespaceRetention(-1, -1), "a/default": None})
    task = RetentionTask(topics, store, config(default_retention_time_minutes=2, default_retention_size_mb=1))
    trimmed = await task.run_once()
    assert trimmed == {"persistent://a/zero/t1": [3, 4], "persistent://a/default/t4": [9]}
    assert topics["persistent://a/zero/t1"].ml.calls == [(0.0, 0)]
    assert topics["persistent://a/zero/t2-partition-0"].ml.calls == [(0.0, 0)]
    assert topics["persistent://a/forever/t3"].ml.calls == [(None, None)]
    assert topics["persistent://a/default/t4"].ml.calls == [(120.0, 1024 * 1024)]
    assert sorted(store.reads) == ["a/default", "a/forever", "a/zero"]  # once per namespace per round


async def test_a_round_survives_failing_topics_and_namespaces(caplog):
    topics = {
        "persistent://a/ok/closed": FakeTopic(FakeLedger(error=ServiceClosed("closing"))),
        "persistent://a/ok/zk": FakeTopic(FakeLedger(error=MetadataError("zk trouble"))),
        "persistent://a/ok/bug": FakeTopic(FakeLedger(error=RuntimeError("boom"))),
        "persistent://a/gone/t": FakeTopic(FakeLedger([1])),
        "persistent://a/flaky/t": FakeTopic(FakeLedger([1])),
        "persistent://a/ok/fine": FakeTopic(FakeLedger([5])),
    }
    store = FakeStore({"a/ok": NamespaceRetention(0, 0), "a/flaky": MetadataError("connection loss")})
    task = RetentionTask(topics, store, config())
    assert await task.run_once() == {"persistent://a/ok/fine": [5]}
    assert topics["persistent://a/gone/t"].ml.calls == [] and topics["persistent://a/flaky/t"].ml.calls == []
    text = caplog.text
    assert "zk trouble" in text and "boom" in text and "connection loss" in text
    assert "closing" not in text  # an unloaded topic is not worth a warning


async def test_the_task_runs_every_interval_until_closed():
    ledger = FakeLedger([])
    topics: dict[str, FakeTopic] = {"persistent://a/ns/t": FakeTopic(ledger)}
    task = RetentionTask(topics, FakeStore({"a/ns": None}), config(retention_check_interval_s=0.02))
    task.start()
    task.start()  # idempotent
    try:
        for _ in range(200):
            if len(ledger.calls) >= 3:
                break
            await asyncio.sleep(0.01)
        assert len(ledger.calls) >= 3
        topics["persistent://a/ns/new"] = FakeTopic(FakeLedger([]))  # topics are read anew each round
        for _ in range(200):
            if topics["persistent://a/ns/new"].ml.calls:
                break
            await asyncio.sleep(0.01)
        assert topics["persistent://a/ns/new"].ml.calls
    finally:
        await task.close()
    calls = len(ledger.calls)
    await asyncio.sleep(0.1)
    assert len(ledger.calls) == calls  # stopped
    await task.close()  # twice is fine


async def test_a_crashing_round_does_not_end_the_task(monkeypatch):
    ledger = FakeLedger([])
    task = RetentionTask({"persistent://a/ns/t": FakeTopic(ledger)}, FakeStore({"a/ns": None}), config(retention_check_interval_s=0.01))
    original = task.run_once
    rounds = 0

    async def flaky() -> dict[str, list[int]]:
        nonlocal rounds
        rounds += 1
        if rounds == 1:
            raise RuntimeError("first round crashed")
        return await original()

    monkeypatch.setattr(task, "run_once", flaky)
    task.start()
    try:
        for _ in range(200):
            if ledger.calls:
                break
            await asyncio.sleep(0.01)
        assert ledger.calls and rounds >= 2
    finally:
        await task.close()


async def test_a_topics_own_retention_overrides_its_namespaces_and_falls_back_when_removed():
    topics = {"persistent://a/zero/kept-partition-1": FakeTopic(FakeLedger([])),
              "persistent://a/zero/other": FakeTopic(FakeLedger([5]))}
    levels = {"persistent://a/zero/kept-partition-1": RetentionPolicy(-1, -1)}
    task = RetentionTask(topics, FakeStore({"a/zero": NamespaceRetention(0, 0)}), config(), topic_level=levels.get)
    assert await task.run_once() == {"persistent://a/zero/other": [5]}
    assert topics["persistent://a/zero/kept-partition-1"].ml.calls == [(None, None)]  # the topic's: keep all
    levels.clear()  # removed: the namespace's 0/0 again
    await task.run_once()
    assert topics["persistent://a/zero/kept-partition-1"].ml.calls == [(None, None), (0.0, 0)]
