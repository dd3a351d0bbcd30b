"""Finding and expiring a topic's messages through REST and ``magnetar admin`` (over
gRPC and over the gateway), checked on real producers and consumers: ``GET
.../messageid/{timestamp}`` (``topics get-message-id``), ``GET
.../ledger/{l}/entry/{e}`` (``topics get-message-by-id``), ``POST
.../all_subscription/expireMessages/{s}`` (``topics
expire-messages-all-subscriptions``); bad input answered with Pulsar's status and reason
(REST) or one line on stderr (CLI), changing nothing."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import httpx
import pytest
from gateway_support import GatewayCluster, eventually, unique

import magnetar.asyncio as mg
from magnetar.testing.shell import cli_fails as fails
from magnetar.testing.shell import cli_ok as ok
from magnetar.testing.shell import warm_magnetar as magnetar

pytestmark = [pytest.mark.integration]

P = "/admin/v2/persistent"


async def _sent(cluster: GatewayCluster, topic: str, count: int) -> list[mg.Message]:
    """``count`` messages m0.. (one entry each, a property and a key each), as a consumer
    received them (their ids and publish times are the broker's)."""
    async with mg.Client(cluster.service_url) as client:
        consumer = await client.subscribe(topic, unique("probe"), initial_position=mg.InitialPosition.Earliest)
        producer = await client.create_producer(topic, batching_enabled=False)
        for i in range(count):
            await producer.send(b"m%d" % i, properties={"i": str(i)}, partition_key=f"k{i}")
            await asyncio.sleep(0.01)  # publish times 10 ms apart at least
        got = [await consumer.receive(10_000) for _ in range(count)]
        await consumer.unsubscribe()
    return got


async def test_message_id_by_time_and_message_by_id(http: httpx.AsyncClient, gateway_cluster: GatewayCluster) -> None:
    topic = f"persistent://public/default/{unique('find')}"
    local = topic.removeprefix("persistent://")
    got = await _sent(gateway_cluster, topic, 3)
    ids = [(m.message_id().ledger_id(), m.message_id().entry_id()) for m in got]
    times = [m.publish_timestamp() for m in got]

    def admin(*args: str, rest: bool = False):
        where = ("--admin-url", gateway_cluster.url) if rest else ("--url", gateway_cluster.broker.address)
        return magnetar("admin", *where, "topics", *args)

    for i in range(3):  # the exact time, and the ms after the one before
        for at in (times[i], times[i - 1] + 1 if i else 0):
            r = await http.get(f"{P}/{local}/messageid/{at}")
            assert r.status_code == 200 and r.json() == {"ledgerId": ids[i][0], "entryId": ids[i][1], "partitionIndex": -1}
    r = await http.get(f"{P}/{local}/messageid/{times[-1] + 1}")
    assert r.status_code == 404 and r.json()["reason"] == "Message ID not found"
    iso = datetime.fromtimestamp(times[1] / 1000, UTC).isoformat(timespec="milliseconds")
    for rest in (False, True):
        assert ok(await asyncio.to_thread(admin, "get-message-id", topic, "-d", str(times[1]), rest=rest)) == f"{ids[1][0]}:{ids[1][1]}:-1\n"
        assert ok(await asyncio.to_thread(admin, "get-message-id", topic, "--datetime", iso, rest=rest)) == f"{ids[1][0]}:{ids[1][1]}:-1\n"
        assert "not found" in fails(await asyncio.to_thread(admin, "get-message-id", topic, "-d", str(times[-1] + 1), rest=rest))
        assert "--datetime" in fails(await asyncio.to_thread(admin, "get-message-id", topic, "-d", "yesterday", rest=rest))

    r = await http.get(f"{P}/{local}/ledger/{ids[1][0]}/entry/{ids[1][1]}")
    assert r.status_code == 200 and r.content == b"m1"
    assert r.headers["X-Pulsar-Message-ID"] == f"{ids[1][0]}:{ids[1][1]}"
    assert json.loads(r.headers["X-Pulsar-PROPERTY"]) == {"i": "1"} and r.headers["X-Pulsar-partition-key"] == "k1"
    printed = [json.loads(ok(await asyncio.to_thread(admin, "get-message-by-id", topic, "-l", str(ids[1][0]),
                                                     "-e", str(ids[1][1]), rest=rest))) for rest in (False, True)]  # fmt: skip
    assert printed[0] == printed[1]
    assert printed[0]["messageId"] == f"{ids[1][0]}:{ids[1][1]}:-1:-1"
    assert (printed[0]["payload"], printed[0]["properties"], printed[0]["key"]) == ("m1", {"i": "1"}, "k1")
    assert printed[0]["publishTime"] == datetime.fromtimestamp(times[1] / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    # Bad input: Pulsar's status and reason, one CLI line.
    r = await http.get(f"{P}/{local}/ledger/{ids[-1][0]}/entry/{ids[-1][1] + 1}")
    assert r.status_code == 404 and r.json()["reason"] == f"Message id not found: {ids[-1][0]}:{ids[-1][1] + 1}"
    for path in (f"{P}/{local}/ledger/-1/entry/0", f"{P}/{local}/messageid/-5", f"{P}/{local}/ledger/x/entry/0"):
        r = await http.get(path)
        assert r.status_code == 400 and r.json()["reason"].startswith("Invalid request"), path
    missing = f"public/default/{unique('never')}"
    for path in (f"{P}/{missing}/messageid/0", f"{P}/{missing}/ledger/1/entry/0"):
        r = await http.get(path)
        assert r.status_code == 404 and r.json()["reason"] == f"Topic persistent://{missing} not found", path
    parts = f"public/default/{unique('parts')}"
    assert (await http.put(f"{P}/{parts}/partitions", json=2)).status_code == 204
    r = await http.get(f"{P}/{parts}/messageid/0")
    assert r.status_code == 405 and "partitioned topic" in r.json()["reason"]
    for rest in (False, True):
        line = fails(await asyncio.to_thread(admin, "get-message-by-id", topic, "-l", str(ids[-1][0]),
                                             "-e", str(ids[-1][1] + 1), rest=rest))  # fmt: skip
        assert "not found" in line or "no such entry" in line, line
        assert "--ledger-id" in fails(await asyncio.to_thread(admin, "get-message-by-id", topic, "-l", "-1", "-e", "0", rest=rest))
    assert (await http.get(f"{P}/{missing}/stats")).status_code == 404  # nothing was created


async def test_expire_messages_on_every_subscription(http: httpx.AsyncClient, gateway_cluster: GatewayCluster) -> None:
    topic = f"persistent://public/default/{unique('expire')}"
    local = topic.removeprefix("persistent://")
    assert (await http.put(f"{P}/{local}")).status_code == 204
    for sub in ("a", "b", "c"):
        assert (await http.put(f"{P}/{local}/subscription/{sub}", json="earliest")).status_code == 204
    await _sent(gateway_cluster, topic, 3)

    async def backlogs() -> dict[str, int]:
        stats = (await http.get(f"{P}/{local}/stats")).json()["subscriptions"]
        return {name: s["msgBacklog"] for name, s in sorted(stats.items())}

    assert await eventually(lambda: _equal(backlogs(), {"a": 3, "b": 3, "c": 3}))
    r = await http.post(f"{P}/{local}/all_subscription/expireMessages/3600")  # nothing is that old
    assert r.status_code == 204 and await backlogs() == {"a": 3, "b": 3, "c": 3}
    r = await http.post(f"{P}/{local}/all_subscription/expireMessages/-1")
    assert r.status_code == 400 and r.json()["reason"].startswith("Invalid request")
    missing = f"public/default/{unique('never')}"
    r = await http.post(f"{P}/{missing}/all_subscription/expireMessages/0")
    assert r.status_code == 404 and r.json()["reason"] == f"Topic persistent://{missing} not found"
    assert await backlogs() == {"a": 3, "b": 3, "c": 3}  # the refusals changed nothing

    assert (await http.post(f"{P}/{local}/all_subscription/expireMessages/0")).status_code == 204
    assert await backlogs() == {"a": 0, "b": 0, "c": 0}
    async with mg.Client(gateway_cluster.service_url) as client:
        consumer = await client.subscribe(topic, "a")
        producer = await client.create_producer(topic)
        await producer.send(b"after")
        assert (await consumer.receive(10_000)).data() == b"after"  # the expired ones are gone
        await consumer.close()
        assert await eventually(lambda: _equal(backlogs(), {"a": 1, "b": 1, "c": 1}))

        def admin(*args: str, rest: bool = False):
            where = ("--admin-url", gateway_cluster.url) if rest else ("--url", gateway_cluster.broker.address)
            return magnetar("admin", *where, "topics", *args)

        for rest, spelled in ((False, "0"), (True, "0s")):
            assert "--expireTime" in fails(await asyncio.to_thread(
                admin, "expire-messages-all-subscriptions", topic, "-t", "soon", rest=rest))
            line = fails(await asyncio.to_thread(
                admin, "expire-messages-all-subscriptions", f"persistent://{missing}", "-t", "0", rest=rest))
            assert missing in line, line
            assert await backlogs() == {"a": 1, "b": 1, "c": 1}
            ok(await asyncio.to_thread(admin, "expire-messages-all-subscriptions", topic, "-t", spelled, rest=rest))
            assert await backlogs() == {"a": 0, "b": 0, "c": 0}
            await producer.send(b"more")
            assert await eventually(lambda: _equal(backlogs(), {"a": 1, "b": 1, "c": 1}))


async def _equal(value, expected) -> bool:
    return await value == expected
