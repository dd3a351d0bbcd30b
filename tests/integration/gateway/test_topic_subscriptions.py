"""The gateway's subscription routes against a real broker, with Pulsar's paths, bodies,
status codes and reasons: list, create at a position, delete, skip, clear the backlog,
reset the cursor by time and by id, expire, peek. Messages are produced with the SDK."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest
from gateway_support import GatewayCluster, eventually, unique

import magnetar.asyncio as mg
from magnetar.common.message_id import MessageId
from magnetar.proto.pulsar import pulsar_api_pb2 as wire
from magnetar.testing.pulsarwire import RawPulsarConnection

# A test restarts the broker: it serves its topics again once its previous ZooKeeper
# session is gone (2 s here; the default is 5 s).
OWN_BROKER_SETTINGS = {"zk_session_timeout_s": 2.0}


@pytest.fixture(scope="module")
def gateway_cluster(own_gateway_cluster: GatewayCluster) -> GatewayCluster:
    """A cluster of this module's own: a test SIGKILLs and restarts its broker."""
    return own_gateway_cluster

P = "/admin/v2/persistent"


def reason(r: httpx.Response) -> str:
    return r.json()["reason"]


async def backlog(http: httpx.AsyncClient, topic: str, sub: str) -> int:
    r = await http.get(f"{P}/{topic}/stats")
    assert r.status_code == 200, r.text
    return int(r.json()["subscriptions"][sub]["msgBacklog"])


async def produce(url: str, topic: str, count: int, **send: Any) -> list[MessageId]:
    async with mg.Client(url) as client:
        producer = await client.create_producer(topic, batching_enabled=False)
        return [await producer.send(b"m%d" % i, **send) for i in range(count)]


@pytest.fixture
async def topic(http: httpx.AsyncClient) -> str:
    name = f"public/default/{unique('subs')}"
    assert (await http.put(f"{P}/{name}")).status_code == 204
    return name


async def test_create_at_positions_list_and_delete(http: httpx.AsyncClient, gateway_cluster: GatewayCluster, topic: str):
    ids = await produce(gateway_cluster.service_url, topic, 5)
    third = {"ledgerId": ids[2].ledger_id(), "entryId": ids[2].entry_id()}
    cases = [("at-latest", None, 0), ("at-latest-str", "latest", 0), ("at-earliest", "earliest", 5),
             ("at-third", third, 3), ("after-third", third | {"isExcluded": True}, 2),
             ("batch-ignored", third | {"batchIndex": 4, "partitionIndex": -1}, 3)]
    for sub, body, expected in cases:
        r = await http.put(f"{P}/{topic}/subscription/{sub}", json=body)
        assert r.status_code == 204, (sub, r.text)
        assert await backlog(http, topic, sub) == expected, sub
    assert (await http.get(f"{P}/{topic}/subscriptions")).json() == sorted(s for s, _, _ in cases)
    r = await http.put(f"{P}/{topic}/subscription/at-third", json="earliest")
    assert (r.status_code, reason(r)) == (409, "Subscription already exists for topic")
    assert await backlog(http, topic, "at-third") == 3  # refused: unchanged
    for body in ("middle", {"entryId": 1}, {"ledgerId": -5, "entryId": 1}):
        assert (await http.put(f"{P}/{topic}/subscription/bad", json=body)).status_code == 400, body
    assert "bad" not in (await http.get(f"{P}/{topic}/subscriptions")).json()

    assert (await http.delete(f"{P}/{topic}/subscription/at-latest")).status_code == 204
    r = await http.delete(f"{P}/{topic}/subscription/at-latest")
    assert (r.status_code, reason(r)) == (404, f"Subscription at-latest not found for topic persistent://{topic}")
    missing = f"public/default/{unique('none')}"
    for r in (await http.get(f"{P}/{missing}/subscriptions"), await http.put(f"{P}/{missing}/subscription/s")):
        assert (r.status_code, reason(r)) == (404, f"Topic persistent://{missing} not found")

    # A partitioned topic: earliest and latest on every partition; an entry's id names one.
    parts = f"public/default/{unique('psubs')}"
    await http.put(f"{P}/{parts}/partitions", json=2)
    assert (await http.put(f"{P}/{parts}/subscription/all", json="earliest")).status_code == 204
    for i in range(2):
        assert (await http.get(f"{P}/{parts}-partition-{i}/subscriptions")).json() == ["all"]
    assert (await http.put(f"{P}/{parts}/subscription/one", json=third)).status_code == 400
    assert (await http.delete(f"{P}/{parts}/subscription/all")).status_code == 204
    assert (await http.get(f"{P}/{parts}/subscriptions")).json() == []


async def test_delete_with_consumers_needs_force(http: httpx.AsyncClient, gateway_cluster: GatewayCluster, topic: str):
    async with mg.Client(gateway_cluster.service_url) as client:
        consumer = await client.subscribe(topic, "attached")
        r = await http.delete(f"{P}/{topic}/subscription/attached")
        assert (r.status_code, reason(r)) == (412, "Subscription has active connected consumers")
        assert (await http.get(f"{P}/{topic}/subscriptions")).json() == ["attached"]
        r = await http.delete(f"{P}/{topic}/subscription/attached", params={"force": "true"})
        assert r.status_code == 204
        assert (await http.get(f"{P}/{topic}/subscriptions")).json() == []
        with pytest.raises(mg.MagnetarError):
            await consumer.receive(2000)
        await consumer.close()


async def test_skip_and_clear_the_backlog(http: httpx.AsyncClient, gateway_cluster: GatewayCluster, topic: str):
    await http.put(f"{P}/{topic}/subscription/s", json="earliest")
    await produce(gateway_cluster.service_url, topic, 10)
    assert (await http.post(f"{P}/{topic}/subscription/s/skip/3")).status_code == 204
    assert await backlog(http, topic, "s") == 7
    assert (await http.post(f"{P}/{topic}/subscription/s/skip/0")).status_code == 400
    assert (await http.post(f"{P}/{topic}/subscription/s/skip/many")).status_code == 400
    assert await backlog(http, topic, "s") == 7
    assert (await http.post(f"{P}/{topic}/subscription/s/skip_all")).status_code == 204
    assert await backlog(http, topic, "s") == 0
    for path in ("skip/1", "skip_all"):
        r = await http.post(f"{P}/{topic}/subscription/nope/{path}")
        assert (r.status_code, reason(r)) == (404, f"Subscription nope not found for topic persistent://{topic}")

    # A partitioned topic: skipping n is refused (as Pulsar), clearing the backlog is not.
    parts = f"public/default/{unique('pskip')}"
    await http.put(f"{P}/{parts}/partitions", json=2)
    await http.put(f"{P}/{parts}/subscription/s", json="earliest")
    await produce(gateway_cluster.service_url, parts, 4)
    r = await http.post(f"{P}/{parts}/subscription/s/skip/1")
    assert (r.status_code, reason(r)) == (405, "Skipping messages on a partitioned topic is not allowed")
    assert (await http.post(f"{P}/{parts}-partition-0/subscription/s/skip/1")).status_code == 204
    assert (await http.get(f"{P}/{parts}/partitioned-stats")).json()["subscriptions"]["s"]["msgBacklog"] == 3
    assert (await http.post(f"{P}/{parts}/subscription/s/skip_all")).status_code == 204
    assert (await http.get(f"{P}/{parts}/partitioned-stats")).json()["subscriptions"]["s"]["msgBacklog"] == 0


async def test_reset_cursor_by_time_and_by_id(http: httpx.AsyncClient, gateway_cluster: GatewayCluster, topic: str):
    await http.put(f"{P}/{topic}/subscription/s")
    before = int(time.time() * 1000) - 1000
    ids = await produce(gateway_cluster.service_url, topic, 6)
    assert (await http.post(f"{P}/{topic}/subscription/s/resetcursor/{before}")).status_code == 204
    assert await backlog(http, topic, "s") == 6
    future = int(time.time() * 1000) + 3_600_000
    assert (await http.post(f"{P}/{topic}/subscription/s/resetcursor/{future}")).status_code == 204
    assert await backlog(http, topic, "s") == 0
    body = {"ledgerId": ids[4].ledger_id(), "entryId": ids[4].entry_id()}
    assert (await http.post(f"{P}/{topic}/subscription/s/resetcursor", json=body)).status_code == 204
    assert await backlog(http, topic, "s") == 2
    assert (await http.post(f"{P}/{topic}/subscription/s/resetcursor", json=body | {"excluded": True})).status_code == 204
    assert await backlog(http, topic, "s") == 1
    assert (await http.post(f"{P}/{topic}/subscription/s/resetcursor/-5")).status_code == 400
    assert (await http.post(f"{P}/{topic}/subscription/s/resetcursor", json={"entryId": 1})).status_code == 400
    assert await backlog(http, topic, "s") == 1
    r = await http.post(f"{P}/{topic}/subscription/nope/resetcursor", json=body)
    assert r.status_code == 404

    parts = f"public/default/{unique('preset')}"
    await http.put(f"{P}/{parts}/partitions", json=2)
    await http.put(f"{P}/{parts}/subscription/s")
    r = await http.post(f"{P}/{parts}/subscription/s/resetcursor", json=body)
    assert (r.status_code, reason(r)) == (405, "Reset-cursor at position is not allowed for partitioned-topic")
    assert (await http.post(f"{P}/{parts}/subscription/s/resetcursor/{before}")).status_code == 204


async def test_expire_acknowledges_only_older_messages(http: httpx.AsyncClient, gateway_cluster: GatewayCluster, topic: str):
    await http.put(f"{P}/{topic}/subscription/s", json="earliest")
    await produce(gateway_cluster.service_url, topic, 3)
    await asyncio.sleep(1.2)
    await produce(gateway_cluster.service_url, topic, 2)
    assert (await http.post(f"{P}/{topic}/subscription/s/expireMessages/60")).status_code == 204
    assert await backlog(http, topic, "s") == 5  # nothing is a minute old
    assert (await http.post(f"{P}/{topic}/subscription/s/expireMessages/1")).status_code == 204
    assert await backlog(http, topic, "s") == 2
    assert (await http.post(f"{P}/{topic}/subscription/s/expireMessages/-1")).status_code == 400
    r = await http.post(f"{P}/{topic}/subscription/nope/expireMessages/1")
    assert (r.status_code, reason(r)) == (404, f"Subscription nope not found for topic persistent://{topic}")
    assert (await http.post(f"{P}/{topic}/subscription/s/expireMessages/0")).status_code == 204
    assert await backlog(http, topic, "s") == 0


async def test_peek_reads_unacknowledged_messages_without_changing_anything(
    http: httpx.AsyncClient, gateway_cluster: GatewayCluster, topic: str,
):
    await http.put(f"{P}/{topic}/subscription/s", json="earliest")
    async with mg.Client(gateway_cluster.service_url) as client:
        batched = await client.create_producer(topic, producer_name="batcher", batching_max_publish_delay_ms=200)
        sent = await asyncio.gather(*(batched.send(b"b%d" % i, properties={"i": str(i)}) for i in range(3)))
        single = await client.create_producer(topic, producer_name="single", batching_enabled=False)
        last = await single.send(b"alone", partition_key="k\u00e9y", event_timestamp=1_700_000_000_000)
        assert {m.batch_index() for m in sent} == {0, 1, 2} and len({(m.ledger_id(), m.entry_id()) for m in sent}) == 1
        first = min(sent)

        r = await http.get(f"{P}/{topic}/subscription/s/position/1")
        assert r.status_code == 200 and r.content == b"b0"
        assert r.headers["content-type"] == "application/octet-stream"
        assert MessageId.parse(r.headers["X-Pulsar-Message-ID"]) == first
        assert json.loads(r.headers["X-Pulsar-PROPERTY"]) == {"i": "0"} and r.headers["X-Pulsar-producer-name"] == "batcher"
        r = await http.get(f"{P}/{topic}/subscription/s/position/4")
        assert r.content == b"alone" and r.headers["X-Pulsar-Message-ID"] == f"{last.ledger_id()}:{last.entry_id()}"
        assert r.headers["X-Pulsar-partition-key-b64-encoded"] == "true"  # not ASCII: base64
        assert r.headers["X-Pulsar-partition-key"] == "a8OpeQ==" and "X-Pulsar-PROPERTY" not in r.headers
        assert r.headers["X-Pulsar-event-time"] == "2023-11-14T22:13:20.000Z"
        r = await http.get(f"{P}/{topic}/subscription/s/position/5")
        assert (r.status_code, reason(r)) == (404, "Message not found")
        assert await backlog(http, topic, "s") == 2  # two entries: peeking changed nothing

        # A single message of the batch acknowledged: peek leaves it out.
        consumer = await client.subscribe(topic, "s")
        got = [await consumer.receive(5000) for _ in range(4)]
        await consumer.acknowledge(next(m for m in got if m.data() == b"b1"))

        async def skipped() -> bytes | None:
            r = await http.get(f"{P}/{topic}/subscription/s/position/2")
            return r.content if r.content == b"b2" else None

        assert await eventually(skipped) == b"b2"
        await consumer.close()

    assert (await http.get(f"{P}/{topic}/subscription/s/position/0")).status_code == 400
    r = await http.get(f"{P}/{topic}/subscription/nope/position/1")
    assert (r.status_code, reason(r)) == (404, f"Subscription nope not found for topic persistent://{topic}")
    parts = f"public/default/{unique('ppeek')}"
    await http.put(f"{P}/{parts}/partitions", json=2)
    await http.put(f"{P}/{parts}/subscription/s")
    r = await http.get(f"{P}/{parts}/subscription/s/position/1")
    assert (r.status_code, reason(r)) == (405, "Peek messages on a partitioned topic is not allowed")
    r = await http.get(f"{P}/{parts}-partition-1/subscription/s/position/1")
    assert (r.status_code, reason(r)) == (404, "Message not found")


async def test_peek_shows_a_chunked_message_as_its_stored_chunks(
    http: httpx.AsyncClient, gateway_cluster: GatewayCluster, topic: str,
):
    """Peek shows stored entries, as Pulsar's: each chunk of a chunked message is its own
    message with its part of the payload and Pulsar's chunk headers."""
    await http.put(f"{P}/{topic}/subscription/s", json="earliest")
    payload = bytes(range(256)) * 500  # 128,000 bytes: 2 chunks of 64 KiB
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(
            topic, producer_name="chunker", batching_enabled=False, chunking_enabled=True, max_message_size=64 * 1024
        )
        sent = await producer.send(payload)
        seq = producer.last_sequence_id()
    parts, ids = [], []
    for position in (1, 2):
        r = await http.get(f"{P}/{topic}/subscription/s/position/{position}")
        assert r.status_code == 200
        parts.append(r.content)
        ids.append(MessageId.parse(r.headers["X-Pulsar-Message-ID"]))
        assert r.headers["X-Pulsar-uuid"] == f"chunker-{seq}"
        assert (r.headers["X-Pulsar-chunk-id"], r.headers["X-Pulsar-num-chunks-from-msg"]) == (str(position - 1), "2")
        assert r.headers["X-Pulsar-total-chunk-msg-size"] == str(len(payload))
    assert b"".join(parts) == payload
    assert ids == [sent.first_chunk_message_id(), sent.last_chunk_message_id()]


async def test_subscription_properties_from_subscribe_admin_and_cli_survive_a_broker_kill(
    http: httpx.AsyncClient, gateway_cluster: GatewayCluster, topic: str,
):
    from magnetar.testing.shell import cli_fails, cli_ok, magnetar

    props_path = f"{P}/{topic}/subscription/s/properties"

    async def stats_props() -> dict[str, str]:
        r = await http.get(f"{P}/{topic}/stats")
        assert r.status_code == 200, r.text
        return r.json()["subscriptions"]["s"]["subscriptionProperties"]

    async with mg.Client(gateway_cluster.service_url) as client:
        consumer = await client.subscribe(topic, "s", subscription_properties={"team": "a", "env": "prod"})
        assert await stats_props() == {"team": "a", "env": "prod"}
        assert (await http.get(props_path)).json() == {"team": "a", "env": "prod"}
        await consumer.close()
        # Given again at subscribe: the existing subscription keeps its own (as Pulsar's).
        await (await client.subscribe(topic, "s", subscription_properties={"team": "b"})).close()
    assert (await http.get(props_path)).json() == {"team": "a", "env": "prod"}

    def admin(*args: str, rest: bool = False):
        where = ("--admin-url", gateway_cluster.url) if rest else ("--url", gateway_cluster.broker.address)
        return magnetar("admin", *where, "topics", *args)

    # REST replaces them all; magnetar admin over either door reads and replaces them.
    assert (await http.put(props_path, json={"owner": "x"})).status_code == 204
    for rest in (False, True):
        shown = cli_ok(await asyncio.to_thread(admin, "get-subscription-properties", f"persistent://{topic}", "-s", "s", rest=rest))
        assert json.loads(shown) == {"owner": "x"}
    cli_ok(await asyncio.to_thread(
        admin, "update-subscription-properties", f"persistent://{topic}", "-s", "s", "-p", "k1=v1", "-p", "k2=a=b"))
    assert await stats_props() == {"k1": "v1", "k2": "a=b"}

    # Bad input: a 4xx or one CLI line, nothing changed.
    assert (await http.put(props_path, json={"k": 1})).status_code == 400
    assert (await http.put(props_path, json=["k"])).status_code == 400
    r = await http.put(f"{P}/{topic}/subscription/nope/properties", json={"a": "b"})
    assert r.status_code == 404, r.text
    assert "nope" in reason(r)
    line = cli_fails(await asyncio.to_thread(
        admin, "update-subscription-properties", f"persistent://{topic}", "-s", "s", "-p", "novalue"))
    assert "key=value" in line, line
    line = cli_fails(await asyncio.to_thread(
        admin, "update-subscription-properties", f"persistent://{topic}", "-s", "nope", "-p", "a=b", rest=True))
    assert "nope" in line, line
    assert (await http.get(props_path)).json() == {"k1": "v1", "k2": "a=b"}

    # The Pulsar door: CommandSubscribe's subscription_properties, on a new subscription.
    host, port = gateway_cluster.broker.pulsar_url.removeprefix("pulsar://").rsplit(":", 1)
    T = wire.BaseCommand
    async with await RawPulsarConnection.open(host, int(port)) as conn:
        await conn.handshake()
        await conn.send(T(type=T.SUBSCRIBE, subscribe=wire.CommandSubscribe(
            topic=f"persistent://{topic}", subscription="w", subType=wire.CommandSubscribe.Shared, consumer_id=1,
            request_id=1, subscription_properties=[wire.KeyValue(key="via", value="pulsar")])))
        assert (await conn.receive()).command.type == T.SUCCESS
    assert (await http.get(f"{P}/{topic}/subscription/w/properties")).json() == {"via": "pulsar"}

    # Stored with the cursor: a SIGKILLed broker's successor shows them.
    gateway_cluster.broker.restart(hard=True)

    async def after_restart() -> dict[str, str] | None:
        r = await http.get(props_path)
        return r.json() if r.status_code == 200 else None
    assert await eventually(after_restart, timeout=30) == {"k1": "v1", "k2": "a=b"}
    cli_ok(await asyncio.to_thread(admin, "update-subscription-properties", f"persistent://{topic}", "-s", "s", "--clear"))
    assert (await http.get(props_path)).json() == {}
