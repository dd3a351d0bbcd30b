"""The broker health check's round trip (magnetar.gateway.healthcheck) over fake handles:
the namespace is made when missing, and a message read back that is not the one written
fails the check."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.common.errors import AlreadyExists, MagnetarError, NamespaceNotFound, Timeout
from magnetar.common.message_id import MessageId
from magnetar.gateway.healthcheck import health_check_topic, run_health_check


class FakeMessage:
    def __init__(self, mid: MessageId, data: bytes) -> None:
        self._mid, self._data = mid, data

    def message_id(self) -> MessageId:
        return self._mid

    def data(self) -> bytes:
        return self._data


class FakeTopic:
    """One topic's log; ``namespace_exists`` until the admin creates it."""

    def __init__(self, namespace_exists: bool, corrupt: bool = False, stall: bool = False) -> None:
        self.namespace_exists = namespace_exists
        self.corrupt = corrupt
        self.stall = stall
        self.log: list[bytes] = []
        self.created: list[str] = []
        self.closed = 0


class FakeProducer:
    def __init__(self, topic: FakeTopic) -> None:
        self.t = topic

    async def send(self, payload: bytes) -> MessageId:
        self.t.log.append(payload)
        return MessageId(ledger_id=7, entry_id=len(self.t.log) - 1)

    async def close(self) -> None:
        self.t.closed += 1


class FakeReader:
    def __init__(self, topic: FakeTopic, start: MessageId) -> None:
        self.t, self.start = topic, start

    async def read_next(self) -> FakeMessage:
        if self.t.stall:
            await asyncio.sleep(60)
        data = self.t.log[self.start.entry_id()]
        return FakeMessage(self.start, data + b"!" if self.t.corrupt else data)

    async def close(self) -> None:
        self.t.closed += 1


class FakeClient:
    def __init__(self, topic: FakeTopic) -> None:
        self.t = topic
        self.topics: list[str] = []

    async def create_producer(self, topic: str, batching_enabled: bool) -> FakeProducer:
        self.topics.append(topic)
        if not self.t.namespace_exists:
            raise NamespaceNotFound("namespace pulsar/c1 does not exist")
        return FakeProducer(self.t)

    async def create_reader(self, topic: str, start: MessageId, start_message_id_inclusive: bool) -> FakeReader:
        assert start_message_id_inclusive
        return FakeReader(self.t, start)


class FakeAdmin:
    def __init__(self, topic: FakeTopic) -> None:
        self.t = topic

    async def create_tenant(self, tenant: str, info: object) -> None:
        self.t.created.append(tenant)
        raise AlreadyExists("tenant pulsar exists")  # made by another gateway meanwhile

    async def create_namespace(self, namespace: str) -> None:
        self.t.created.append(namespace)
        self.t.namespace_exists = True


async def test_a_missing_namespace_is_created_then_the_message_goes_round() -> None:
    topic = FakeTopic(namespace_exists=False)
    client = FakeClient(topic)
    await run_health_check(FakeAdmin(topic), client, "c1", 5)  # type: ignore[arg-type]
    assert topic.created == ["pulsar", "pulsar/c1"]
    assert client.topics == [health_check_topic("c1")] * 2 == ["persistent://pulsar/c1/healthcheck"] * 2
    assert len(topic.log) == 1 and topic.log[0].startswith(b"healthcheck-") and topic.closed == 2
    await run_health_check(FakeAdmin(topic), client, "c1", 5)  # type: ignore[arg-type]
    assert topic.created == ["pulsar", "pulsar/c1"] and len(set(topic.log)) == 2  # no setup again; a new message


async def test_a_message_read_back_changed_fails_the_check() -> None:
    topic = FakeTopic(namespace_exists=True, corrupt=True)
    with pytest.raises(MagnetarError, match="health check on persistent://pulsar/c1/healthcheck"):
        await run_health_check(FakeAdmin(topic), FakeClient(topic), "c1", 5)  # type: ignore[arg-type]
    assert topic.closed == 2


async def test_a_check_that_hangs_times_out() -> None:
    topic = FakeTopic(namespace_exists=True, stall=True)
    with pytest.raises(Timeout, match="longer than 0.05 s"):
        await run_health_check(FakeAdmin(topic), FakeClient(topic), "c1", 0.05)  # type: ignore[arg-type]
    assert topic.closed == 2  # the producer and the reader closed all the same
