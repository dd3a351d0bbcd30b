"""Creates gathered into one broker call: the gateway's TopicCreateBatcher and the
broker's create_topics, over stand-ins that record the calls."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from magnetar.broker.topic_creates import MAX_TOPICS_PER_CALL, create_topics
from magnetar.common.errors import (
    AlreadyExists,
    InvalidArgument,
    MagnetarError,
    NamespaceNotFound,
    NotConnected,
)
from magnetar.gateway.auth import caller_authorization
from magnetar.gateway.topic_creates import TopicCreateBatcher


class Broker:
    """Answers CreateTopics as a broker would: a topic created twice exists."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], str | None]] = []
        self.created: set[str] = set()

    async def send(self, namespace: str, topics: Sequence[str]) -> list[MagnetarError | None]:
        self.calls.append((namespace, list(topics), caller_authorization.get()))
        await asyncio.sleep(0)
        out: list[MagnetarError | None] = []
        for t in topics:
            if "missing" in namespace:
                out.append(NamespaceNotFound(f"namespace {namespace} does not exist"))
            elif t in self.created:
                out.append(AlreadyExists(f"topic {t} already exists"))
            else:
                self.created.add(t)
                out.append(None)
        return out


async def test_creates_arriving_together_are_one_call_per_namespace_and_caller_each_with_its_outcome() -> None:
    broker = Broker()
    batcher = TopicCreateBatcher(broker.send)

    async def as_caller(header: str | None, topic: str) -> None:
        caller_authorization.set(header)
        await batcher.create(topic)

    topics = [f"persistent://acme/prod/t{i}" for i in range(50)]
    outcomes = await asyncio.gather(
        *(as_caller(None, t) for t in topics),
        as_caller(None, "persistent://acme/prod/t0"),  # twice in one batch: the second exists
        as_caller("Bearer other", "persistent://acme/prod/u"),
        as_caller(None, "persistent://acme/missing/t"),
        return_exceptions=True,
    )
    assert outcomes[:50] == [None] * 50
    assert isinstance(outcomes[50], AlreadyExists) and "t0 already exists" in outcomes[50].message
    assert outcomes[51] is None
    assert isinstance(outcomes[52], NamespaceNotFound)
    assert sorted((ns, len(ts), who) for ns, ts, who in broker.calls) == [
        ("acme/missing", 1, None), ("acme/prod", 1, "Bearer other"), ("acme/prod", 51, None)]
    assert broker.created == {*topics, "persistent://acme/prod/u"}


async def test_a_full_batch_goes_at_once_and_a_failed_call_fails_each_of_its_creates() -> None:
    broker = Broker()
    batcher = TopicCreateBatcher(broker.send, max_topics=10)
    await asyncio.gather(*(batcher.create(f"persistent://acme/prod/t{i}") for i in range(25)))
    assert [len(ts) for _, ts, _ in broker.calls] == [10, 10, 5]

    async def unreachable(namespace: str, topics: Sequence[str]) -> list[MagnetarError | None]:
        raise NotConnected("no broker answered")

    failing = TopicCreateBatcher(unreachable)
    outcomes = await asyncio.gather(*(failing.create(f"persistent://acme/prod/x{i}") for i in range(3)),
                                    return_exceptions=True)  # fmt: skip
    assert all(isinstance(o, NotConnected) for o in outcomes)
    assert len({id(o) for o in outcomes}) == 3  # one error each, not one shared


async def test_the_broker_creates_each_topic_of_a_call_and_refuses_a_foreign_one_before_any() -> None:
    made: list[str] = []

    async def create(topic: str) -> None:
        if topic in made:
            raise AlreadyExists(f"topic {topic} already exists")
        made.append(topic)

    errors = await create_topics("acme/prod", ["acme/prod/a", "persistent://acme/prod/b", "acme/prod/a"], create)
    assert errors[:2] == [None, None] and isinstance(errors[2], AlreadyExists)
    assert made == ["persistent://acme/prod/a", "persistent://acme/prod/b"]
    for bad in (["acme/other/c"], ["non-persistent://acme/prod/c"], ["acme/prod/c-partition-0"],
                ["acme/prod/c"] * (MAX_TOPICS_PER_CALL + 1)):  # fmt: skip
        with pytest.raises(InvalidArgument):
            await create_topics("acme/prod", [*bad, "acme/prod/d"], create)
    assert made == ["persistent://acme/prod/a", "persistent://acme/prod/b"]  # nothing of a refused call
