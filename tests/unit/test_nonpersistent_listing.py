"""The rule of a namespace's topic list across domains (broker/nonpersistent/listing.py):
every owner of the namespace's bundles is asked for its non-persistent topics, declared
partitions are listed whether loaded or not."""

from __future__ import annotations

import pytest

from magnetar.broker.nonpersistent.listing import TopicsMode, fold_partitions, non_persistent_topics
from magnetar.common.errors import NotConnected


class FakePeers:
    def __init__(self, served: dict[str, list[str]]) -> None:
        self.served = served
        self.asked: list[tuple[str, str]] = []

    async def non_persistent_topics(self, broker_id: str, namespace: str) -> list[str]:
        self.asked.append((broker_id, namespace))
        if broker_id not in self.served:
            raise NotConnected(f"broker {broker_id} is down")
        return self.served[broker_id]

    async def close(self) -> None:
        pass


async def test_every_owner_is_asked_once_and_one_down_is_left_out() -> None:
    peers = FakePeers({"b2:1": ["non-persistent://t/ns/b"], "b3:1": ["non-persistent://t/ns/c"]})
    found = await non_persistent_topics(
        "t/ns", ["me:1", "b2:1", "", "b2:1", "b3:1", "down:1"], "me:1",
        lambda ns: [f"non-persistent://{ns}/a"], peers,
    )
    assert found == {"non-persistent://t/ns/a", "non-persistent://t/ns/b", "non-persistent://t/ns/c"}
    assert sorted(peers.asked) == [("b2:1", "t/ns"), ("b3:1", "t/ns"), ("down:1", "t/ns")]  # never itself, nor ""


async def test_without_peers_only_this_brokers_topics() -> None:
    found = await non_persistent_topics("t/ns", ["me:1", "b2:1"], "me:1", lambda ns: [f"non-persistent://{ns}/a"], None)
    assert found == {"non-persistent://t/ns/a"}


def test_declared_partitions_are_listed_loaded_or_not() -> None:
    loaded = ["non-persistent://t/ns/p-partition-1", "non-persistent://t/ns/plain", "non-persistent://t/ns/x-partition-7"]
    declared = {"non-persistent://t/ns/p": 2}
    assert fold_partitions(loaded, declared, as_partitions=True) == {
        "non-persistent://t/ns/p-partition-0", "non-persistent://t/ns/p-partition-1",
        "non-persistent://t/ns/plain", "non-persistent://t/ns/x-partition-7",  # no topic x: a topic of its own
    }
    assert fold_partitions(loaded, declared, as_partitions=False) == {
        "non-persistent://t/ns/p", "non-persistent://t/ns/plain", "non-persistent://t/ns/x-partition-7",
    }


@pytest.mark.parametrize(("mode", "domains"), [
    (0, ("persistent",)), (1, ("non-persistent",)), (2, ("persistent", "non-persistent")),
])
def test_modes_are_pulsars(mode: int, domains: tuple[str, ...]) -> None:
    assert TopicsMode(mode).domains == domains
