"""Concurrent lookups of one bundle share one conversation with ZooKeeper (a burst of
thousands of dead-letter moves to a new topic once sent ~4 ZooKeeper requests each, held
the broker's event loop and lost its lease, in CI). BrokerService's own lookup, over a
stand-in ownership store that counts the requests it was asked for."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from magnetar.broker.config import BrokerConfig
from magnetar.broker.service import BrokerService
from magnetar.common.errors import NotOwner


class SlowOwnership:
    """Bundle ownership as ZooKeeper keeps it, each request taking a moment."""

    def __init__(self, owners: dict[tuple[str, str, str], str] | None = None, previous_session: bool = False) -> None:
        self.owners = dict(owners or {})
        self.requests: Counter[str] = Counter()
        self.previous_session = previous_session

    async def owner(self, tenant: str, namespace: str, bundle: str) -> str | None:
        self.requests["owner"] += 1
        await asyncio.sleep(0.01)
        return self.owners.get((tenant, namespace, bundle))

    async def try_acquire(self, tenant: str, namespace: str, bundle: str, broker_id: str) -> str:
        self.requests["try_acquire"] += 1
        await asyncio.sleep(0.01)
        return self.owners.setdefault((tenant, namespace, bundle), broker_id)

    async def still_owns(self, tenant: str, namespace: str, bundle: str, broker_id: str) -> bool:
        self.requests["still_owns"] += 1
        await asyncio.sleep(0.01)
        return not self.previous_session and self.owners.get((tenant, namespace, bundle)) == broker_id


class Namespaces:
    """Namespaces' policies documents, none storing bundles (bundles_per_namespace applies)."""

    def __init__(self) -> None:
        self.reads = 0

    async def watch_policies(self, tenant: str, namespace: str, changed: object) -> dict[str, object]:
        self.reads += 1
        return {}


def service(ownership: SlowOwnership) -> BrokerService:
    svc = BrokerService(
        BrokerConfig(bundles_per_namespace=1), "me:1", None,  # type: ignore[arg-type]
        ledgers=None, ml_store=None, tenants=Namespaces(), ownership=ownership,  # type: ignore[arg-type]
    )
    svc.lease.renewed(svc.lease.clock() + 3600)  # serving: ZooKeeper "answered"
    svc._lapsed = False
    return svc


TOPICS = [f"persistent://public/default/t{i}" for i in range(500)]


def test_five_hundred_lookups_of_an_unowned_bundle_take_it_with_one_conversation() -> None:
    ownership = SlowOwnership()

    async def main() -> list[str]:
        svc = service(ownership)
        answers = await asyncio.gather(*(svc.lookup(t) for t in TOPICS))
        again = await svc.lookup(TOPICS[0])  # owned now: no request at all
        await svc._lookups.close()
        return [*answers, again]

    assert set(asyncio.run(main())) == {"me:1"}
    assert ownership.requests == Counter(owner=1, try_acquire=1, still_owns=1)


def test_lookups_of_a_bundle_another_broker_owns_share_one_read_and_each_gets_its_answer() -> None:
    ownership = SlowOwnership({("public", "default", "0x00000000_0xffffffff"): "other:2"})

    async def main() -> list[str]:
        svc = service(ownership)
        first = await asyncio.gather(*(svc.lookup(t) for t in TOPICS))
        second = await asyncio.gather(*(svc.lookup(t) for t in TOPICS))  # not cached: asks again, once
        await svc._lookups.close()
        return first + second

    assert set(asyncio.run(main())) == {"other:2"}
    assert ownership.requests == Counter(owner=2)


def test_a_refusal_reaches_every_caller_of_the_shared_lookup() -> None:
    ownership = SlowOwnership(previous_session=True)

    async def main() -> list[object]:
        svc = service(ownership)
        out = await asyncio.gather(*(svc.lookup(t) for t in TOPICS[:50]), return_exceptions=True)
        await svc._lookups.close()
        return out

    results = asyncio.run(main())
    assert all(isinstance(r, NotOwner) and "previous session" in r.message for r in results)
    assert ownership.requests["still_owns"] == 1


@pytest.mark.parametrize("cancelled", [1, 10])
def test_a_caller_that_gives_up_does_not_cancel_the_others(cancelled: int) -> None:
    ownership = SlowOwnership()

    async def main() -> list[str]:
        svc = service(ownership)
        leaving = [asyncio.ensure_future(svc.lookup(t)) for t in TOPICS[:cancelled]]
        staying = [asyncio.ensure_future(svc.lookup(t)) for t in TOPICS[cancelled:20]]
        await asyncio.sleep(0.005)
        for f in leaving:
            f.cancel()
        answers = await asyncio.gather(*staying)
        await svc._lookups.close()
        return answers

    assert asyncio.run(main()) == ["me:1"] * (20 - cancelled)
