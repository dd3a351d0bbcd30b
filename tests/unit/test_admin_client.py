"""The admin client's routing without a network: a call that must run on the owner is
looked up first and looked up again when the topic moves; partitioned calls fan out."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from magnetar.client.admin import AdminClient
from magnetar.common.errors import NotOwner, TopicNotFound


class Pool:
    """Brokers by address; each answers with ``handler(address)``. Lookups follow ``owners``."""

    def __init__(self, owners: list[str], partitions: int = 0) -> None:
        self.owners = owners
        self.n_partitions = partitions
        self.lookups = 0
        self.calls: list[str] = []

    async def lookup(self, topic: str) -> str:
        owner = self.owners[min(self.lookups, len(self.owners) - 1)]
        self.lookups += 1
        return owner

    async def partitions(self, topic: str) -> int:
        return self.n_partitions

    async def unary(self, address: str, call: Callable[[Any], Awaitable[Any]]) -> Any:
        self.calls.append(address)
        return await call(address)

    async def on_service_hosts(self, what: str, call: Callable[[Any, str], Awaitable[Any]]) -> Any:
        self.calls.append("any")
        return await call("any", "any")

    async def close(self) -> None:
        pass


def admin_with(pool: Pool) -> AdminClient:
    admin = AdminClient("127.0.0.1:6650", 5)
    admin.pool = pool  # type: ignore[assignment]
    return admin


def answer_on(owner: str) -> Callable[[Any], Awaitable[str]]:
    async def fn(stub: Any) -> str:
        if stub != owner:
            raise NotOwner(f"{stub} does not own it")
        return f"done on {stub}"

    return fn


async def test_a_topic_that_moved_after_the_lookup_is_looked_up_again():
    pool = Pool(owners=["b1", "b2"])
    assert await admin_with(pool).on_owner("t", answer_on("b2")) == "done on b2"
    assert pool.calls == ["b1", "b2"] and pool.lookups == 2


async def test_the_owner_retry_gives_up_with_the_owners_not_owner():
    pool = Pool(owners=["b1"])
    with pytest.raises(NotOwner, match="b1 does not own it"):
        await admin_with(pool).on_owner("t", answer_on("elsewhere"))
    assert pool.lookups == 3  # OWNER_RETRY's tries


async def test_without_lookup_first_a_service_host_that_owns_it_answers_without_a_lookup():
    pool = Pool(owners=["b1"])
    assert await admin_with(pool).on_owner("t", answer_on("any"), lookup_first=False) == "done on any"
    assert pool.lookups == 0
    assert await admin_with(pool).on_owner("t", answer_on("b1"), lookup_first=False) == "done on b1"
    assert pool.calls == ["any", "any", "b1"] and pool.lookups == 1


async def test_a_partitioned_call_goes_to_each_partition_and_an_unknown_partition_is_refused():
    pool = Pool(owners=["b1"], partitions=3)
    seen: list[str] = []

    async def fn(stub: Any, target: str) -> str:
        seen.append(target)
        return stub

    admin = admin_with(pool)
    assert await admin.on_partitions("persistent://public/default/p", fn) == ["b1", "b1", "b1"]
    assert seen == [f"persistent://public/default/p-partition-{i}" for i in range(3)]
    with pytest.raises(TopicNotFound, match="has 3 partitions"):
        await admin.on_partitions("persistent://public/default/p-partition-5", fn)
