"""Dead-letter tools through the gateway: replay moves each message to its REAL_TOPIC
exactly once, also when the gateway is SIGKILLed in the middle and the replay run again."""

from __future__ import annotations

import asyncio
import base64
import os
from collections import Counter
from pathlib import Path

import httpx
from gateway_support import GatewayCluster, unique

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.common.message_id import ChunkMessageId, MessageId
from magnetar.testing.processes import GatewayProcess, ServiceFactory


async def fill_dlq(client: mg.Client, dlq: str, real_topics: list[str], per_topic: int) -> None:
    """Messages as the broker moves them to a DLQ: REAL_TOPIC, ORIGIN_MESSAGE_ID, RECONSUMETIMES
    (and an ordering key, which a move keeps)."""
    producer = await client.create_producer(dlq, batching_enabled=False, max_pending_messages=20_000)
    futures = []
    for i in range(per_topic):
        for real in real_topics:
            props = {"REAL_TOPIC": real, "ORIGIN_MESSAGE_ID": f"1:{i}:-1:-1", "RECONSUMETIMES": "3", "k": str(i)}
            futures.append(asyncio.ensure_future(
                producer.send(f"{real}|{i}".encode(), properties=props, ordering_key=f"lane-{i}")
            ))
    await asyncio.gather(*futures)
    await producer.close()


async def read_all(client: mg.Client, topic: str) -> list[mg.Message]:
    reader = await client.create_reader(topic, MessageId.earliest)
    out = []
    try:
        while await reader.has_message_available():
            out.append(await reader.read_next(10_000))
    finally:
        await reader.close()
    return out


async def dlq_backlog(admin: AdminClient, dlq: str, sub: str) -> int:
    stats = await admin.topic_stats(dlq)
    return next(s.backlog for s in stats.subscriptions if s.name == sub)


async def test_replay_moves_each_message_once_with_provenance(http: httpx.AsyncClient, gateway_cluster: GatewayCluster):
    ns = "public/default"
    reals = [f"persistent://{ns}/{unique('real')}" for _ in range(2)]
    dlq = f"persistent://{ns}/{unique('orders')}-sub-DLQ"
    local = dlq.rsplit("/", 1)[1]
    client = mg.Client(gateway_cluster.service_url)
    admin = AdminClient(gateway_cluster.service_url)
    try:
        for real in reals:
            await admin.create_topic(real)
        await admin.create_topic(dlq)
        await admin.create_subscription(dlq, "sub-DLQ-sub", MessageId.earliest)
        await fill_dlq(client, dlq, reals, 5)

        listed = {d["topic"]: d for d in (await http.get("/admin/v2/dlq/public/default")).json()}
        info = listed[dlq]
        assert (info["subscription"], info["backlog"], info["complete"]) == ("sub-DLQ-sub", 10, True)
        assert info["countsByRealTopic"] == {real: 5 for real in reals} and info["oldestAgeSeconds"] >= 0
        peeked = (await http.get(f"/admin/v2/dlq/public/default/{local}/messages", params={"limit": 3})).json()
        assert len(peeked) == 3 and peeked[0]["realTopic"] == reals[0] and peeked[0]["reconsumeTimes"] == 3
        assert base64.b64decode(peeked[0]["payload"]) == f"{reals[0]}|0".encode()
        assert peeked[0]["originMessageId"] == "1:0:-1:-1" and peeked[1]["realTopic"] == reals[1]
        assert (await http.get(f"/admin/v2/dlq/public/default/{local}/messages", params={"limit": 0})).status_code == 400

        first = await http.post(f"/admin/v2/dlq/public/default/{local}/replay", json={"count": 3})
        assert first.status_code == 200, first.text
        assert first.json()["moved"] == 3 and first.json()["subscription"] == "sub-DLQ-sub"
        rest = (await http.post(f"/admin/v2/dlq/public/default/{local}/replay")).json()
        assert (rest["moved"], rest["failed"], rest["skipped"]) == (7, 0, 0)
        assert sum(rest["movedByTarget"].values()) == 7
        assert await dlq_backlog(admin, dlq, "sub-DLQ-sub") == 0

        for real in reals:
            got = await read_all(client, real)
            assert sorted(m.data() for m in got) == sorted(f"{real}|{i}".encode() for i in range(5))
            props = got[0].properties()
            assert "RECONSUMETIMES" not in props and props["REPLAY_COUNT"] == "1" and int(props["REPLAYED_AT"]) > 0
            assert props["ORIGIN_MESSAGE_ID"].startswith("1:") and props["k"]
            assert all(m.ordering_key() == b"lane-%s" % m.properties()["k"].encode() for m in got)  # kept

        listed = {d["topic"]: d for d in (await http.get("/admin/v2/dlq/public/default")).json()}
        assert listed[dlq]["backlog"] == 0 and listed[dlq]["countsByRealTopic"] == {}
        again = (await http.post(f"/admin/v2/dlq/public/default/{local}/replay")).json()
        assert again["moved"] == 0  # nothing left
        purged = await http.post(f"/admin/v2/dlq/public/default/{local}/purge")
        assert purged.status_code == 200 and purged.json() == {"subscription": "sub-DLQ-sub"}
    finally:
        await client.close()
        await admin.close()


async def test_a_chunked_dead_letter_is_replayed_whole_and_every_chunk_acked(
    http: httpx.AsyncClient, gateway_cluster: GatewayCluster
):
    real = f"persistent://public/default/{unique('bigreal')}"
    dlq = f"persistent://public/default/{unique('big')}-sub-DLQ"
    client = mg.Client(gateway_cluster.service_url)
    admin = AdminClient(gateway_cluster.service_url)
    try:
        await admin.create_topic(real)
        await admin.create_topic(dlq)
        await admin.create_subscription(dlq, "sub-DLQ-sub", MessageId.earliest)
        payload = os.urandom(5 * 1024 * 1024 + 4096)  # over the broker's (and SDK's) max message size
        producer = await client.create_producer(dlq, chunking_enabled=True, batching_enabled=False)
        sent = await producer.send(payload, properties={"REAL_TOPIC": real, "ORIGIN_MESSAGE_ID": "1:0:-1:-1;1:1:-1:-1"})
        await producer.close()
        assert isinstance(sent, ChunkMessageId)
        replayed = await http.post(f"/admin/v2/dlq/public/default/{dlq.rsplit('/', 1)[1]}/replay")
        assert replayed.status_code == 200, replayed.text
        assert (replayed.json()["moved"], replayed.json()["failed"]) == (1, 0), replayed.json()
        assert await dlq_backlog(admin, dlq, "sub-DLQ-sub") == 0  # every chunk acknowledged
        (got,) = await read_all(client, real)
        assert got.data() == payload and isinstance(got.message_id(), ChunkMessageId)
        assert got.properties()["REPLAY_COUNT"] == "1" and got.properties()["ORIGIN_MESSAGE_ID"] == "1:0:-1:-1;1:1:-1:-1"
    finally:
        await client.close()
        await admin.close()


async def test_a_chunked_dead_letter_is_one_message_in_the_list_and_the_peek(
    http: httpx.AsyncClient, gateway_cluster: GatewayCluster
):
    reals = [f"persistent://public/default/{unique('real')}" for _ in range(2)]
    dlq = f"persistent://public/default/{unique('chunks')}-sub-DLQ"
    local = dlq.rsplit("/", 1)[1]
    client = mg.Client(gateway_cluster.service_url)
    admin = AdminClient(gateway_cluster.service_url)
    chunked = bytes(range(256)) * 10  # 3 chunks of at most 1000 bytes
    compressible = b"".join(b'{"i": %d, "line": "event %d"}\n' % (i, i * 7919 % 10007) for i in range(400))  # zlib'd, cut
    try:
        await admin.create_topic(dlq)
        await admin.create_subscription(dlq, "sub-DLQ-sub", MessageId.earliest)
        plain = await client.create_producer(dlq, batching_enabled=False)
        chunking = await client.create_producer(dlq, batching_enabled=False, chunking_enabled=True, max_message_size=1000)
        zipped = await client.create_producer(dlq, batching_enabled=False, chunking_enabled=True, max_message_size=300,
                                              compression_type=mg.CompressionType.ZLib)  # fmt: skip
        ids = [
            await plain.send(b"a", properties={"REAL_TOPIC": reals[0], "ORIGIN_MESSAGE_ID": "1:0:-1:-1"}),
            await chunking.send(chunked, properties={"REAL_TOPIC": reals[0], "ORIGIN_MESSAGE_ID": "1:1:-1:-1;1:3:-1:-1"},
                                partition_key="k1"),
            await plain.send(b"b", properties={"REAL_TOPIC": reals[0], "ORIGIN_MESSAGE_ID": "1:4:-1:-1"}),
            await zipped.send(compressible, properties={"REAL_TOPIC": reals[1], "ORIGIN_MESSAGE_ID": "1:5:-1:-1"}),
        ]
        assert [isinstance(i, ChunkMessageId) for i in ids] == [False, True, False, True]
        n_chunks = [len(i.chunk_message_ids()) if isinstance(i, ChunkMessageId) else 1 for i in ids]
        assert n_chunks[1] == 3 and n_chunks[3] > 1

        listed = {d["topic"]: d for d in (await http.get("/admin/v2/dlq/public/default")).json()}
        assert (listed[dlq]["backlog"], listed[dlq]["complete"]) == (4, True)  # one per message, not per chunk
        assert listed[dlq]["countsByRealTopic"] == {reals[0]: 3, reals[1]: 1}
        cut = {d["topic"]: d for d in (await http.get("/admin/v2/dlq/public/default", params={"scanLimit": 2})).json()}
        assert (cut[dlq]["backlog"], cut[dlq]["complete"]) == (2, False)

        peeked = (await http.get(f"/admin/v2/dlq/public/default/{local}/messages", params={"limit": 10})).json()
        assert [p["messageId"] for p in peeked] == [str(i) for i in ids]
        assert [base64.b64decode(p["payload"]) for p in peeked] == [b"a", chunked, b"b", compressible]
        assert [p["chunks"] for p in peeked] == n_chunks
        assert [p["originMessageId"] for p in peeked] == ["1:0:-1:-1", "1:1:-1:-1;1:3:-1:-1", "1:4:-1:-1", "1:5:-1:-1"]
        assert peeked[1]["key"] == "k1" and peeked[3]["realTopic"] == reals[1]
        two = (await http.get(f"/admin/v2/dlq/public/default/{local}/messages", params={"limit": 2})).json()
        assert [p["messageId"] for p in two] == [str(i) for i in ids[:2]]
    finally:
        await client.close()
        await admin.close()


async def test_replay_errors(http: httpx.AsyncClient, gateway_cluster: GatewayCluster):
    missing = unique("nosuch") + "-DLQ"
    r = await http.post(f"/admin/v2/dlq/public/default/{missing}/replay")
    assert r.status_code == 404 and r.json()["reason"]
    dlq = f"persistent://public/default/{unique('x')}-s-DLQ"
    async with AdminClient(gateway_cluster.service_url) as admin:
        await admin.create_topic(dlq)
        await admin.create_subscription(dlq, "a")
        await admin.create_subscription(dlq, "b")
    local = dlq.rsplit("/", 1)[1]
    r = await http.post(f"/admin/v2/dlq/public/default/{local}/replay")
    assert r.status_code == 400 and "several subscriptions" in r.json()["reason"]
    for body in ({"count": 0}, {"messageIds": ["nope"]}, {"count": "x"}):
        r = await http.post(f"/admin/v2/dlq/public/default/{local}/replay?subscription=a", json=body)
        assert r.status_code == 400 and r.json()["reason"], body


async def test_replay_of_10000_survives_a_gateway_sigkill(gateway_cluster: GatewayCluster, tmp_path: Path):
    ns = "public/default"
    reals = [f"persistent://{ns}/{unique('big')}" for _ in range(3)]
    dlq = f"persistent://{ns}/{unique('big')}-sub-DLQ"
    local, sub = dlq.rsplit("/", 1)[1], "sub-DLQ-sub"
    per_topic = 3334  # 10,002 messages
    gateways = ServiceFactory(GatewayProcess, gateway_cluster.zk_connect, gateway_cluster.zk_root, tmp_path)
    client = mg.Client(gateway_cluster.service_url)
    admin = AdminClient(gateway_cluster.service_url)
    try:
        for real in reals:
            await admin.create_topic(real)
        await admin.create_topic(dlq)
        await admin.create_subscription(dlq, sub, MessageId.earliest)
        await fill_dlq(client, dlq, reals, per_topic)
        total = per_topic * len(reals)
        assert await dlq_backlog(admin, dlq, sub) == total

        gateway: GatewayProcess = await asyncio.to_thread(gateways)
        url = f"{gateway.url}/admin/v2/dlq/public/default/{local}/replay"
        async with httpx.AsyncClient(timeout=120) as http:
            running = asyncio.ensure_future(http.post(url))
            while (left := await dlq_backlog(admin, dlq, sub)) > total * 0.7:
                assert not running.done(), running.result().text
                await asyncio.sleep(0.02)
            gateway.kill()  # mid-replay: some published and acked, some published only
            assert left > 0
            try:
                await running
            except httpx.HTTPError:
                pass
            await asyncio.to_thread(gateway.start)
            # Until the broker has seen the killed gateway's stream end, its Exclusive
            # consumer on the DLQ subscription may still hold it: the new replay is then
            # refused (ConsumerBusy: 412), and goes through once the dead one is gone.
            deadline = asyncio.get_running_loop().time() + 15
            while (answer := await http.post(url)).status_code == 412 and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.2)
            result = answer.json()
            assert answer.status_code == 200, result
        assert result["failed"] == 0 and result["moved"] <= left
        assert await dlq_backlog(admin, dlq, sub) == 0
        for real in reals:
            counts = Counter(m.data() for m in await read_all(client, real))
            assert len(counts) == per_topic and set(counts.values()) == {1}, [c for c in counts.items() if c[1] != 1][:5]
    finally:
        gateways.kill_all()
        await client.close()
        await admin.close()


async def test_negatively_acknowledged_messages_go_to_the_dlq_and_replay_brings_them_back(
    http: httpx.AsyncClient, gateway_cluster: GatewayCluster
):
    topic = f"persistent://public/default/{unique('pay')}"
    client = mg.Client(gateway_cluster.service_url)
    try:
        policy = mg.ConsumerDeadLetterPolicy(max_redeliver_count=1)
        consumer = await client.subscribe(topic, "workers", consumer_type=mg.ConsumerType.Shared,
                                          negative_ack_redelivery_delay_ms=100, dead_letter_policy=policy)
        producer = await client.create_producer(topic)
        for i in range(4):
            await producer.send(f"m{i}".encode())
        for _ in range(4):  # a nack brings each to max_redeliver_count: the broker moves it to the DLQ
            await consumer.negative_acknowledge(await consumer.receive(10_000))
        dlq = f"{topic}-workers-DLQ"
        listed: dict = {}
        for _ in range(100):
            listed = {d["topic"]: d for d in (await http.get("/admin/v2/dlq/public/default")).json()}
            if listed.get(dlq, {}).get("backlog") == 4:
                break
            await asyncio.sleep(0.1)
        assert dlq in listed, (dlq, listed)
        assert listed[dlq]["countsByRealTopic"] == {topic: 4}
        peek = (await http.get(f"/admin/v2/dlq/public/default/{dlq.rsplit('/', 1)[1]}/messages")).json()
        assert {p["realTopic"] for p in peek} == {topic} and all(p["reason"] for p in peek)
        result = (await http.post(f"/admin/v2/dlq/public/default/{dlq.rsplit('/', 1)[1]}/replay")).json()
        assert result["moved"] == 4 and result["movedByTarget"] == {topic: 4}
        back = sorted([(await consumer.receive(10_000)).data() for _ in range(4)])
        assert back == [b"m0", b"m1", b"m2", b"m3"]
    finally:
        await client.close()
