"""The gateway's persistent-topic routes against a real broker, with Pulsar's paths,
bodies, status codes and reasons: list, create, grow, delete; stats, partitioned stats,
internal stats, last message id, examine. Messages are produced with the SDK."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from gateway_support import GatewayCluster, eventually, unique

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.common.bundles import bundle_ranges

P = "/admin/v2/persistent"


def reason(r: httpx.Response) -> str:
    return r.json()["reason"]


@pytest.fixture
async def namespace(gateway_cluster: GatewayCluster) -> str:
    ns = f"public/{unique('ns')}"
    async with AdminClient(gateway_cluster.service_url) as admin:
        await admin.create_namespace(ns)
    return ns


async def test_create_list_grow_and_delete_with_pulsar_codes(http: httpx.AsyncClient, namespace: str):
    full = f"persistent://{namespace}"
    r = await http.put(f"{P}/{namespace}/plain")
    assert r.status_code == 204 and r.content == b""
    r = await http.put(f"{P}/{namespace}/plain", json={"owner": "ops"})
    assert (r.status_code, reason(r)) == (409, "This topic already exists")
    assert (await http.put(f"{P}/{namespace}/parts/partitions", json=3)).status_code == 204
    for path, body in ((f"{namespace}/parts/partitions", 3), (f"{namespace}/plain/partitions", 2), (f"{namespace}/parts", None)):
        r = await http.put(f"{P}/{path}", json=body)
        assert (r.status_code, reason(r)) == (409, "This topic already exists"), path
    for bad in (0, -2):
        r = await http.put(f"{P}/{namespace}/other/partitions", json=bad)
        assert (r.status_code, reason(r)) == (406, "Number of partitions should be more than 0")
    r = await http.put(f"{P}/{namespace}/other/partitions", json=100_000)
    assert r.status_code == 406 and "10000" in reason(r)
    r = await http.put(f"{P}/{namespace}/other/partitions", json="many")
    assert r.status_code == 400 and reason(r).startswith("Invalid request")
    assert (await http.put(f"{P}/public/nosuchns/t")).status_code == 404
    assert (await http.put(f"{P}/{namespace}/%20bad")).status_code == 412
    assert (await http.put(f"{P}/public/b%20ad/t")).status_code == 412

    partitions = [f"{full}/parts-partition-{i}" for i in range(3)]
    assert (await http.get(f"{P}/{namespace}")).json() == [*partitions, f"{full}/plain"]
    assert (await http.get(f"{P}/{namespace}/partitioned")).json() == [f"{full}/parts"]
    by_bundle = [(await http.get(f"{P}/{namespace}", params={"bundle": b})).json() for b in bundle_ranges(4)]
    assert sorted(t for ts in by_bundle for t in ts) == sorted([*partitions, f"{full}/plain"])
    assert (await http.get(f"{P}/{namespace}", params={"bundle": "0x0_0x1"})).status_code == 400
    for path in ("public/nosuchns", "public/nosuchns/partitioned"):
        assert (await http.get(f"{P}/{path}")).status_code == 404
    assert (await http.get(f"{P}/public/b%20ad")).status_code == 412

    assert (await http.get(f"{P}/{namespace}/parts/partitions")).json() == {"partitions": 3, "properties": None}
    assert (await http.get(f"{P}/{namespace}/plain/partitions")).json()["partitions"] == 0
    assert (await http.get(f"{P}/{namespace}/never/partitions")).json()["partitions"] == 0

    # Grow only; the same count is a no-op; not partitioned: 409.
    assert (await http.post(f"{P}/{namespace}/parts/partitions", json=5)).status_code == 204
    assert (await http.post(f"{P}/{namespace}/parts/partitions", json=5)).status_code == 204
    assert (await http.get(f"{P}/{namespace}/parts/partitions")).json()["partitions"] == 5
    assert len((await http.get(f"{P}/{namespace}")).json()) == 6
    r = await http.post(f"{P}/{namespace}/parts/partitions", json=2)
    assert (r.status_code, reason(r)) == (422, "Expect partitions 2 can't less than current partitions 5.")
    r = await http.post(f"{P}/{namespace}/parts/partitions", json=20_000)
    assert r.status_code == 422 and (await http.get(f"{P}/{namespace}/parts/partitions")).json()["partitions"] == 5
    r = await http.post(f"{P}/{namespace}/plain/partitions", json=4)
    assert (r.status_code, reason(r)) == (409, f"Topic {full}/plain is not the partitioned topic.")

    r = await http.delete(f"{P}/{namespace}/parts")
    assert (r.status_code, reason(r)) == (
        409, f"{full}/parts is a partitioned topic, instead of calling delete topic, please call delete-partitioned-topic.",
    )
    r = await http.delete(f"{P}/{namespace}/plain/partitions")
    assert (r.status_code, reason(r)) == (404, f"Partitioned Topic {full}/plain not found")
    assert (await http.delete(f"{P}/{namespace}/parts/partitions")).status_code == 204
    assert (await http.get(f"{P}/{namespace}/parts/partitions")).json()["partitions"] == 0
    assert (await http.delete(f"{P}/{namespace}/plain")).status_code == 204
    r = await http.delete(f"{P}/{namespace}/plain")
    assert (r.status_code, reason(r)) == (404, f"Topic {full}/plain not found")
    assert (await http.get(f"{P}/{namespace}")).json() == []
    assert (await http.get(f"{P}/{namespace}/partitioned")).json() == []


async def test_a_topic_named_like_a_partition_is_listed_as_itself(http: httpx.AsyncClient, namespace: str, gateway_cluster: GatewayCluster):
    """``x-partition-3`` with no partitioned topic ``x`` (auto-created) is a topic of its
    own: listed with the partitions of the partitioned topics, not among them."""
    full = f"persistent://{namespace}"
    assert (await http.put(f"{P}/{namespace}/parts/partitions", json=2)).status_code == 204
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(f"{full}/x-partition-3")
        await producer.send(b"x")
        await producer.close()
    listed = [f"{full}/parts-partition-0", f"{full}/parts-partition-1", f"{full}/x-partition-3"]
    assert (await http.get(f"{P}/{namespace}")).json() == listed
    assert (await http.get(f"/admin/v2/namespaces/{namespace}/topics")).json() == listed
    assert (await http.get(f"{P}/{namespace}/partitioned")).json() == [f"{full}/parts"]


async def test_delete_refuses_connected_clients_unless_forced(
    http: httpx.AsyncClient, gateway_cluster: GatewayCluster, namespace: str,
):
    await http.put(f"{P}/{namespace}/busy")
    await http.put(f"{P}/{namespace}/busyparts/partitions", json=2)
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(f"{namespace}/busy")
        await producer.send(b"x")
        consumer = await client.subscribe(f"{namespace}/busyparts", "s")
        r = await http.delete(f"{P}/{namespace}/busy")
        assert r.status_code == 412 and "connected producers or consumers" in reason(r)
        r = await http.delete(f"{P}/{namespace}/busyparts/partitions")
        assert r.status_code == 412 and "connected producers or consumers" in reason(r)
        # Refused: nothing changed.
        assert (await http.get(f"{P}/{namespace}/busy/stats")).json()["msgInCounter"] == 1
        assert (await http.get(f"{P}/{namespace}/busyparts/partitions")).json()["partitions"] == 2
        assert (await http.delete(f"{P}/{namespace}/busy", params={"force": "true"})).status_code == 204
        assert (await http.delete(f"{P}/{namespace}/busyparts/partitions", params={"force": True})).status_code == 204
        with pytest.raises(mg.MagnetarError):
            await producer.send(b"after")
        await consumer.close()
    assert (await http.get(f"{P}/{namespace}")).json() == []


async def test_growing_creates_subscriptions_on_the_new_partitions(
    http: httpx.AsyncClient, gateway_cluster: GatewayCluster, namespace: str,
):
    topic = f"{namespace}/grow"
    await http.put(f"{P}/{topic}/partitions", json=2)
    await http.put(f"{P}/{topic}/subscription/orders")
    assert (await http.post(f"{P}/{topic}/partitions", json=4)).status_code == 204
    for i in (2, 3):
        assert (await http.get(f"{P}/{topic}-partition-{i}/subscriptions")).json() == ["orders"]
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(topic, batching_enabled=False)  # sees 4 partitions
        for i in range(8):
            await producer.send(b"m%d" % i)
    stats = (await http.get(f"{P}/{topic}/partitioned-stats")).json()
    assert stats["metadata"]["partitions"] == 4
    assert [s["subscriptions"]["orders"]["msgBacklog"] for s in stats["partitions"].values()] == [2, 2, 2, 2]


async def test_stats_with_traffic_and_rates(http: httpx.AsyncClient, gateway_cluster: GatewayCluster, namespace: str):
    topic = f"{namespace}/busy-stats"
    await http.put(f"{P}/{topic}")
    async with mg.Client(gateway_cluster.service_url) as client:
        consumer = await client.subscribe(topic, "reader", consumer_type=mg.ConsumerType.Shared, consumer_name="c1")
        producer = await client.create_producer(topic, producer_name="p1", batching_enabled=False)
        for i in range(10):
            await producer.send(b"0123456789", properties={"i": str(i)})

        async def rated() -> dict[str, Any] | None:
            s = (await http.get(f"{P}/{topic}/stats")).json()
            return s if s["msgRateIn"] > 0 else None

        # Rates are those of the broker's last stats interval (0.5 s here).
        rates = await eventually(rated, timeout=3)
        assert rates and rates["msgThroughputIn"] > 0 and rates["averageMsgSize"] > 0
        assert rates["publishers"][0]["msgRateIn"] > 0 and rates["subscriptions"]["reader"]["msgRateOut"] > 0
        for _ in range(4):
            await consumer.acknowledge(await consumer.receive(5000))

        async def acked() -> dict[str, Any] | None:
            s = (await http.get(f"{P}/{topic}/stats")).json()
            return s if s["subscriptions"]["reader"]["msgBacklog"] == 6 else None

        stats = await eventually(acked)
        assert stats, "the grouped acks arrive"
        assert stats["msgInCounter"] == 10 and stats["bytesInCounter"] >= 100
        assert stats["msgOutCounter"] >= 10 and stats["bytesOutCounter"] >= 100  # the receiver queue took them all
        assert stats["storageSize"] == stats["bytesInCounter"] and stats["backlogSize"] > 0
        (pub,) = stats["publishers"]
        assert pub["producerName"] == "p1" and pub["connectedSince"].endswith("Z")
        sub = stats["subscriptions"]["reader"]
        assert sub["type"] == "Shared" and sub["unackedMessages"] == 6 and sub["isDurable"] and sub["durable"]
        assert sub["msgOutCounter"] == 10 and sub["backlogSize"] > 0
        (con,) = sub["consumers"]
        assert con["consumerName"] == "c1" and con["unackedMessages"] == 6 and con["msgOutCounter"] == 10

        # Pulsar's messageAckRate and msgRateRedeliver: acknowledge one message at a time and
        # send the others back until one interval's rates show both.
        for _ in range(30):
            await producer.send(b"more")

        async def acking_and_failing() -> dict[str, Any] | None:
            await consumer.acknowledge(await consumer.receive(5000))
            await consumer.redeliver_unacknowledged_messages()
            s = (await http.get(f"{P}/{topic}/stats")).json()["subscriptions"]["reader"]
            return s if s["messageAckRate"] > 0 and s["msgRateRedeliver"] > 0 else None

        sub = await eventually(acking_and_failing)
        assert sub, "an interval with acknowledgements and redeliveries"
        (con,) = sub["consumers"]
        assert con["messageAckRate"] == sub["messageAckRate"] and con["msgRateRedeliver"] == sub["msgRateRedeliver"]
        await producer.close()
        await consumer.close()
    # A topic of nothing: 404 with Pulsar's reason; a partitioned topic's own name: no topic either.
    r = await http.get(f"{P}/{namespace}/nope/stats")
    assert (r.status_code, reason(r)) == (404, f"Topic persistent://{namespace}/nope not found")
    await http.put(f"{P}/{namespace}/pstats/partitions", json=2)
    assert (await http.get(f"{P}/{namespace}/pstats/stats")).status_code == 404
    assert (await http.get(f"{P}/{namespace}/pstats-partition-1/stats")).json()["msgInCounter"] == 0
    assert (await http.get(f"{P}/{namespace}/pstats-partition-2/stats")).status_code == 404


async def test_partitioned_stats_sum_the_partitions(http: httpx.AsyncClient, gateway_cluster: GatewayCluster, namespace: str):
    topic = f"{namespace}/psum"
    await http.put(f"{P}/{topic}/partitions", json=3)
    await http.put(f"{P}/{topic}/subscription/s", json="earliest")
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(topic, batching_enabled=False)
        for i in range(6):
            await producer.send(b"m%d" % i)
        stats = (await http.get(f"{P}/{topic}/partitioned-stats")).json()
        await producer.close()
    names = [f"persistent://{topic}-partition-{i}" for i in range(3)]
    assert stats["metadata"] == {"partitions": 3, "properties": None} and list(stats["partitions"]) == names
    assert stats["msgInCounter"] == 6 == sum(p["msgInCounter"] for p in stats["partitions"].values())
    assert stats["subscriptions"]["s"]["msgBacklog"] == 6 and len(stats["publishers"]) == 3
    flat = (await http.get(f"{P}/{topic}/partitioned-stats", params={"perPartition": "false"})).json()
    assert flat["partitions"] == {} and flat["msgInCounter"] == 6
    await http.put(f"{P}/{namespace}/flat")
    r = await http.get(f"{P}/{namespace}/flat/partitioned-stats")
    assert (r.status_code, reason(r)) == (404, f"Partitioned Topic persistent://{namespace}/flat not found")


async def test_internal_stats_show_the_managed_ledger(http: httpx.AsyncClient, gateway_cluster: GatewayCluster, namespace: str):
    topic = f"{namespace}/internal"
    await http.put(f"{P}/{topic}")
    async with mg.Client(gateway_cluster.service_url) as client:
        consumer = await client.subscribe(topic, "s", consumer_type=mg.ConsumerType.Shared)
        producer = await client.create_producer(topic, batching_enabled=False)
        ids = [await producer.send(b"%d" % i) for i in range(6)]
        received = {m.message_id(): m for m in [await consumer.receive(5000) for _ in range(6)]}
        for i in (1, 2, 4):
            await consumer.acknowledge(received[ids[i]])

        async def ranged() -> dict[str, Any] | None:
            s = (await http.get(f"{P}/{topic}/internalStats")).json()
            return s if s["cursors"]["s"]["totalNonContiguousDeletedMessagesRange"] == 2 else None

        stats = await eventually(ranged)
        await producer.close()
        await consumer.close()
    assert stats
    ledger = ids[0].ledger_id()
    assert stats["numberOfEntries"] == 6 and stats["entriesAddedCounter"] == 6 and stats["totalSize"] > 6  # stored batches
    assert stats["lastConfirmedEntry"] == f"{ledger}:{ids[5].entry_id()}" and stats["state"] == "LedgerOpened"
    assert stats["currentLedgerEntries"] == 6 and stats["lastLedgerCreatedTimestamp"].endswith("Z")
    assert [(x["ledgerId"], x["entries"], x["size"]) for x in stats["ledgers"]] == [(ledger, 6, stats["totalSize"])]
    cursor = stats["cursors"]["s"]
    e = [i.entry_id() for i in ids]
    assert cursor["markDeletePosition"] == f"{ledger}:{e[0] - 1}"
    assert cursor["individuallyDeletedMessages"] == f"[({ledger}:{e[0]}..{ledger}:{e[2]}], ({ledger}:{e[3]}..{ledger}:{e[4]}]]"
    assert cursor["readPosition"] == f"{ledger}:{e[5] + 1}" and cursor["messagesConsumedCounter"] == 3
    assert cursor["cursorLedger"] == -1 and cursor["state"] == "Open"
    assert (await http.get(f"{P}/{namespace}/nope/internalStats")).status_code == 404
    await http.put(f"{P}/{namespace}/pint/partitions", json=2)
    assert (await http.get(f"{P}/{namespace}/pint/internalStats")).status_code == 404
    assert (await http.get(f"{P}/{namespace}/pint-partition-0/internalStats")).json()["numberOfEntries"] == 0


async def test_last_message_id(http: httpx.AsyncClient, gateway_cluster: GatewayCluster, namespace: str):
    await http.put(f"{P}/{namespace}/last")
    await http.put(f"{P}/{namespace}/plast/partitions", json=2)
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(f"{namespace}/last", batching_enabled=False)
        sent = [await producer.send(b"x") for _ in range(3)]
        on_partition = await client.create_producer(f"{namespace}/plast-partition-1")
        last_on_partition = await on_partition.send(b"y")
    assert (await http.get(f"{P}/{namespace}/last/lastMessageId")).json() == {
        "ledgerId": sent[-1].ledger_id(), "entryId": sent[-1].entry_id(), "partitionIndex": -1,
    }
    got = (await http.get(f"{P}/{namespace}/plast-partition-1/lastMessageId")).json()
    assert (got["ledgerId"], got["entryId"], got["partitionIndex"]) == (last_on_partition.ledger_id(), last_on_partition.entry_id(), 1)
    assert (await http.get(f"{P}/{namespace}/plast/lastMessageId")).status_code == 405
    r = await http.get(f"{P}/{namespace}/nope/lastMessageId")
    assert (r.status_code, reason(r)) == (404, f"Topic persistent://{namespace}/nope not found")


async def test_examine_reads_from_either_end(http: httpx.AsyncClient, gateway_cluster: GatewayCluster, namespace: str):
    topic = f"{namespace}/examine"
    await http.put(f"{P}/{topic}")
    r = await http.get(f"{P}/{topic}/examinemessage")
    assert r.status_code == 412 and "no messages" in reason(r)
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(topic, producer_name="writer", batching_enabled=False)
        first = await producer.send(b"first", properties={"k": "v"}, partition_key="key-1", event_timestamp=1_700_000_000_000)
        for i in range(3):
            await producer.send(b"m%d" % i)
        last = await producer.send(b"last")
    r = await http.get(f"{P}/{topic}/examinemessage", params={"initialPosition": "earliest", "messagePosition": 1})
    assert r.status_code == 200 and r.content == b"first"
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["X-Pulsar-Message-ID"] == f"{first.ledger_id()}:{first.entry_id()}"
    assert json.loads(r.headers["X-Pulsar-PROPERTY"]) == {"k": "v"}
    assert r.headers["X-Pulsar-partition-key"] == "key-1" and r.headers["X-Pulsar-producer-name"] == "writer"
    assert r.headers["X-Pulsar-event-time"] == "2023-11-14T22:13:20.000Z" and r.headers["X-Pulsar-sequence-id"] == "0"
    assert r.headers["X-Pulsar-publish-time"].endswith("Z") and r.headers["X-Pulsar-Is-Encrypted"] == "false"
    r = await http.get(f"{P}/{topic}/examinemessage")  # latest, 1
    assert r.content == b"last" and r.headers["X-Pulsar-Message-ID"] == f"{last.ledger_id()}:{last.entry_id()}"
    assert (await http.get(f"{P}/{topic}/examinemessage", params={"messagePosition": 3})).content == b"m1"
    assert (await http.get(f"{P}/{topic}/examinemessage", params={"messagePosition": 99})).content == b"first"
    for params in ({"messagePosition": 0}, {"initialPosition": "middle"}):
        assert (await http.get(f"{P}/{topic}/examinemessage", params=params)).status_code == 400
    await http.put(f"{P}/{namespace}/pex/partitions", json=2)
    r = await http.get(f"{P}/{namespace}/pex/examinemessage")
    assert r.status_code == 405 and reason(r).startswith("Examine messages on a partitioned topic is not allowed")
    assert (await http.get(f"{P}/{namespace}/nope/examinemessage")).status_code == 404


async def test_topic_properties_through_rest_and_cli_survive_a_hand_over(
    http: httpx.AsyncClient, gateway_cluster: GatewayCluster, namespace: str,
):
    import asyncio

    from magnetar.testing.shell import cli_fails, cli_ok, magnetar

    topic = f"{namespace}/{unique('props')}"
    path = f"{P}/{topic}/properties"

    def admin(*args: str, rest: bool = False):
        where = ("--admin-url", gateway_cluster.url) if rest else ("--url", gateway_cluster.broker.address)
        return magnetar("admin", *where, "topics", *args)

    # Created with properties (Pulsar's createNonPartitionedTopic body); bad ones create nothing.
    assert (await http.put(f"{P}/{topic}-bad", json={"": "v"})).status_code == 400
    assert (await http.put(f"{P}/{topic}-bad", json={"k": 1})).status_code == 400
    assert (await http.get(f"{P}/{topic}-bad/properties")).status_code == 404
    assert (await http.put(f"{P}/{topic}", json={"owner": "billing"})).status_code == 204
    assert (await http.get(path)).json() == {"owner": "billing"}
    # Update merges keys in; remove takes one out.
    assert (await http.put(path, json={"tier": "gold", "owner": "ops"})).status_code == 204
    assert (await http.delete(path, params={"key": "owner"})).status_code == 204
    assert (await http.get(path)).json() == {"tier": "gold"}
    # magnetar admin over gRPC and over the gateway.
    cli_ok(await asyncio.to_thread(admin, "update-properties", f"persistent://{topic}", "-p", "a=1", "-p", "b=2"))
    cli_ok(await asyncio.to_thread(admin, "remove-properties", f"persistent://{topic}", "-k", "tier", rest=True))
    for rest in (False, True):
        shown = cli_ok(await asyncio.to_thread(admin, "get-properties", f"persistent://{topic}", rest=rest))
        assert json.loads(shown) == {"a": "1", "b": "2"}
    # Bad input: a 4xx or one CLI line; nothing changed.
    assert (await http.delete(path)).status_code == 400
    assert (await http.put(path, json={"k": ["v"]})).status_code == 400
    missing = f"{namespace}/{unique('none')}"
    r = await http.get(f"{P}/{missing}/properties")
    assert (r.status_code, reason(r)) == (404, f"Topic persistent://{missing} not found")
    assert "key=value" in cli_fails(await asyncio.to_thread(admin, "update-properties", f"persistent://{topic}", "-p", "x"))
    assert (await http.get(path)).json() == {"a": "1", "b": "2"}
    # Kept in the managed ledger: the topic unloaded and opened again still has them.
    assert (await http.put(f"{P}/{topic}/unload")).status_code == 204
    assert (await http.get(path)).json() == {"a": "1", "b": "2"}

    # A partitioned topic: every partition gets them.
    parts = f"{namespace}/{unique('pprops')}"
    assert (await http.put(f"{P}/{parts}/partitions", json=2)).status_code == 204
    assert (await http.put(f"{P}/{parts}/properties", json={"p": "q"})).status_code == 204
    for i in range(2):
        assert (await http.get(f"{P}/{parts}-partition-{i}/properties")).json() == {"p": "q"}
    assert (await http.get(f"{P}/{parts}/properties")).json() == {"p": "q"}


async def test_many_creates_at_once_each_get_their_answer_and_the_topics_serve(
    http: httpx.AsyncClient, namespace: str, gateway_cluster: GatewayCluster,
) -> None:
    """Creates arriving together go to the broker in one call (docs/gateway.md, "Creating a
    topic"); each still gets its own answer, and a created topic loads on first use."""
    import asyncio

    names = [f"c{i}" for i in range(40)]
    answers = await asyncio.gather(*(http.put(f"{P}/{namespace}/{n}") for n in [*names, "c0", "c0-partition-1"]))
    assert [a.status_code for a in answers[1:40]] == [204] * 39
    # The two creates of c0 race (requests sent together arrive in any order): one creates
    # it, the other is told it exists.
    first, again = sorted((answers[0], answers[40]), key=lambda a: a.status_code)
    assert first.status_code == 204
    assert (again.status_code, reason(again)) == (409, "This topic already exists")
    assert answers[41].status_code == 412  # a partition's name: refused, as one create alone is
    assert (await http.get(f"{P}/{namespace}")).json() == sorted(f"persistent://{namespace}/{n}" for n in names)
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(f"persistent://{namespace}/c7")
        await producer.send(b"first")
    r = await http.get(f"{P}/{namespace}/c7/stats")
    assert r.status_code == 200 and r.json()["msgInCounter"] == 1
