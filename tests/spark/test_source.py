"""The ``magnetar`` data source against a real cluster (bookie, broker and gateway
processes): batch reads split by partition and ledger, positions, writes with
deduplicating producers, and a streaming read that resumes from its checkpoint."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from magnetar_spark import positions
from magnetar_spark.testing import Cluster, read_all

import magnetar.asyncio as mg
from magnetar.client.rest_admin import RestAdmin

pytestmark = pytest.mark.integration


def unique(prefix: str) -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:8]}"


def reader(spark, c: Cluster, topic: str, **options: str):
    r = spark.read.format("magnetar").option("service.url", c.service_url).option("admin.url", c.admin_url)
    r = r.option("topic", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


async def produce(c: Cluster, topic: str, n: int, *, start: int = 0, unload_every: int = 0) -> list[str]:
    """``n`` messages (``m<i>``, key ``key-<i>``, property i, event time i+1); the topic is
    unloaded every ``unload_every`` messages so its messages span several ledgers."""
    ids = []
    async with mg.Client(c.service_url) as client, RestAdmin(c.admin_url) as admin:
        producer = await client.create_producer(topic, batching_enabled=False)
        for i in range(start, start + n):
            mid = await producer.send(f"m{i}".encode(), properties={"i": str(i)}, partition_key=f"key-{i}",
                                      event_timestamp=1_700_000_000_000 + i)
            ids.append(str(mid))
            if unload_every and (i + 1 - start) % unload_every == 0 and i + 1 < start + n:
                await producer.close()
                await admin.unload_topic(topic)
                producer = await client.create_producer(topic, batching_enabled=False)
        await producer.close()
    return ids


def test_batch_read_splits_by_partition_and_ledger_with_every_column(spark, mcluster: Cluster) -> None:
    topic = unique("parts")
    asyncio.run(_create_partitioned(mcluster, topic, 2))
    ids = asyncio.run(produce(mcluster, topic, 40, unload_every=15))  # ledgers roll over
    df = reader(spark, mcluster, topic)
    rows = df.collect()
    assert sorted(r["message_id"] for r in rows) == sorted(ids)
    by_id = {r["message_id"]: r for r in rows}
    first = by_id[ids[0]]
    assert first["topic"] == topic and first["partition"] in (0, 1)
    assert first["message_id"].split(":")[2] == str(first["partition"])
    assert first["value"] == b"m0" and first["key"] == "key-0" and first["properties"] == {"i": "0"}
    assert int(first["event_time"].timestamp() * 1000) == 1_700_000_000_000
    assert first["publish_time"] is not None and first["redelivery_count"] == 0
    assert (first["ordering_key"], first["schema_version"]) == (None, None)  # the SDK sent none
    assert df.columns[-2:] == ["ordering_key", "schema_version"]
    # one input partition per (topic partition, ledger) holding messages, named by what it reads
    ledgers = {(r["partition"], int(r["message_id"].split(":")[0])) for r in rows}
    assert df.rdd.getNumPartitions() == len(ledgers) >= 4
    again = reader(spark, mcluster, topic)
    assert again.rdd.getNumPartitions() == df.rdd.getNumPartitions()


async def _create_partitioned(c: Cluster, topic: str, n: int) -> None:
    async with RestAdmin(c.admin_url) as admin:
        await admin.create_topic(topic, n)


def test_a_read_is_a_snapshot_between_positions(spark, mcluster: Cluster) -> None:
    topic = unique("snap")
    ids = asyncio.run(produce(mcluster, topic, 30, unload_every=10))
    df = reader(spark, mcluster, topic)  # planned now: later messages are not in it
    asyncio.run(produce(mcluster, topic, 5, start=30))
    assert df.count() == 30
    part = reader(spark, mcluster, topic, startingOffsets=ids[5], endingOffsets=ids[25])
    assert [r["message_id"] for r in part.orderBy("publish_time").collect()] == ids[5:25]
    assert reader(spark, mcluster, topic, startingOffsets="latest").count() == 0
    per_topic = reader(spark, mcluster, topic, startingOffsets=f'{{"{topic}": "{ids[28]}"}}')
    assert per_topic.count() == 35 - 28
    # a slice's reader reopened every 4 messages (as every 40,000 by default): nothing lost or repeated
    reopened = reader(spark, mcluster, topic, readerReopenAfter="4").collect()
    assert sorted(r["message_id"] for r in reopened) == sorted(r["message_id"] for r in reader(spark, mcluster, topic).collect())
    assert len(reopened) == 35


def test_plans_are_the_same_for_the_same_inputs() -> None:
    layout = positions.PartitionLayout("t", "t-partition-1", 1, ((3, 10), (7, 0), (9, 4)), (9, 3))
    plan = positions.plan([layout], "earliest", "latest")
    assert [(s.ledger, s.start, s.end) for s in plan] == [(3, (3, 0, -1), (3, 10, -1)), (9, (9, 0, -1), (9, 4, -1))]
    assert positions.plan([layout], "earliest", "latest") == plan
    with_sub = positions.PartitionLayout("t", "t-partition-1", 1, layout.ledgers, layout.last, mark_delete=(3, 9))
    assert [s.ledger for s in positions.plan([with_sub], "earliest", "latest")] == [9]


def test_missing_options_are_clear_errors(spark, mcluster: Cluster) -> None:
    with pytest.raises(Exception, match="topic"):
        spark.read.format("magnetar").option("service.url", mcluster.service_url) \
            .option("admin.url", mcluster.admin_url).load().collect()
    with pytest.raises(Exception, match="startingOffsets"):
        reader(spark, mcluster, unique("x"), startingOffsets="soon").collect()


def test_write_publishes_with_deduplicating_producers(spark, mcluster: Cluster) -> None:
    a, b = unique("wa"), unique("wb")
    rows = [(f"v{i}".encode(), f"k{i}", {"n": str(i)}, a if i % 2 else b, "writer-test", i + 1) for i in range(20)]
    df = spark.createDataFrame(
        rows, "value binary, key string, properties map<string,string>, topic string, producer_name string, "
              "sequence_id long").coalesce(1)
    writer = df.write.format("magnetar").mode("append").option("service.url", mcluster.service_url)
    writer.save()
    writer.save()  # the same rows again: every one a duplicate
    got_a = asyncio.run(read_all(mcluster.service_url, a))
    got_b = asyncio.run(read_all(mcluster.service_url, b))
    assert sorted(m.data() for m in got_a) == sorted(f"v{i}".encode() for i in range(1, 20, 2))
    assert sorted(m.data() for m in got_b) == sorted(f"v{i}".encode() for i in range(0, 20, 2))
    assert {m.partition_key() for m in got_a} == {f"k{i}" for i in range(1, 20, 2)}
    assert {m.properties()["n"] for m in got_b} == {str(i) for i in range(0, 20, 2)}
    assert {m.producer_name() for m in got_a + got_b} == {"writer-test"}


def test_streaming_read_resumes_from_its_checkpoint(spark, mcluster: Cluster, tmp_path: Path) -> None:
    topic = unique("stream")
    asyncio.run(produce(mcluster, topic, 25, unload_every=10))
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"

    def drain() -> None:
        stream = (spark.readStream.format("magnetar").option("service.url", mcluster.service_url)
                  .option("admin.url", mcluster.admin_url).option("topic", topic)
                  .option("maxEntriesPerTrigger", "7").load())
        query = (stream.select("message_id", "value").writeStream.format("parquet")
                 .option("checkpointLocation", str(checkpoint)).option("path", str(out))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None

    drain()
    first = spark.read.parquet(str(out)).collect()
    assert sorted(r["value"] for r in first) == sorted(f"m{i}".encode() for i in range(25))
    asyncio.run(produce(mcluster, topic, 12, start=25))
    drain()  # a new run: from the checkpoint on
    rows = spark.read.parquet(str(out)).collect()
    values = [r["value"] for r in rows]
    assert len(values) == len(set(values)) == 37  # nothing lost, nothing twice
    assert set(values) == {f"m{i}".encode() for i in range(37)}


@pytest.mark.parametrize("codec", ["NONE", "LZ4", "ZLib", "ZSTD", "SNAPPY"])
def test_a_topic_written_by_pulsar_client_reads_with_its_ids_and_messages(spark, mcluster: Cluster, codec: str) -> None:
    """pulsar-client (through the broker's Pulsar door, batching on, with a schema, each
    codec) writes; the source reads the same message ids (batch indexes too), payloads,
    keys, properties and event times, decompressed, and the ordering keys and schema
    version pulsar-client's reader sees."""
    import pulsar

    from magnetar.common.message_id import MessageId
    from magnetar.testing.pulsarclient import pulsar_client

    topic = unique("pulsar")
    client = pulsar_client(mcluster.pulsar_url, operation_timeout_seconds=15)
    try:
        producer = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=50,
                                          schema=pulsar.schema.StringSchema(),
                                          compression_type=getattr(pulsar.CompressionType, codec))  # fmt: skip
        receipts: dict[int, tuple[pulsar.Result, pulsar.MessageId]] = {}
        for i in range(12):
            producer.send_async(f"p{i}", lambda res, mid, i=i: receipts.__setitem__(i, (res, mid)),
                                properties={"i": str(i)}, partition_key=f"key-{i}", event_timestamp=1_700_000_000_000 + i,
                                ordering_key=f"lane-{i % 3}")  # fmt: skip
        producer.flush()
        producer.close()
        pulsar_reader = client.create_reader(topic, pulsar.MessageId.earliest)
        seen = {}  # pulsar-client's own view: ordering key and schema version (str of the same bytes)
        for _ in range(12):
            m = pulsar_reader.read_next(timeout_millis=10_000)
            mid = m.message_id()
            seen[(mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index())] = (
                m.ordering_key().encode(), m.schema_version().encode("latin-1"),
            )
    finally:
        client.close()
    assert all(receipts[i][0] == pulsar.Result.Ok for i in range(12))
    sent = {(mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index()): i for i, (_, mid) in receipts.items()}
    assert any(key[3] > 0 for key in sent), "the client sent no batch of more than one message"
    assert {key: seen[key][0] for key in sent} == {key: b"lane-%d" % (i % 3) for key, i in sent.items()}
    assert all(len(version) == 8 for _, version in seen.values())  # the producer's schema has a version
    rows = reader(spark, mcluster, topic).collect()
    got = {}
    for r in rows:
        mid = MessageId.parse(r["message_id"])
        got[(mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index())] = (
            r["value"], r["key"], r["properties"], int(r["event_time"].timestamp() * 1000),
            r["ordering_key"], r["schema_version"],
        )
    assert got == {
        key: (f"p{i}".encode(), f"key-{i}", {"i": str(i)}, 1_700_000_000_000 + i, *seen[key]) for key, i in sent.items()
    }


async def _chunked_across_ledgers(c: Cluster, topic: str, payloads: list[bytes]) -> list[str]:
    """Chunked messages (chunks of 16 KiB); the second's first chunk is stored before the
    topic is unloaded, its other chunks after (in the next ledger)."""
    async with mg.Client(c.service_url) as client, RestAdmin(c.admin_url) as admin:
        producer = await client.create_producer(
            topic, batching_enabled=False, chunking_enabled=True, max_message_size=16 * 1024, send_timeout_millis=30_000
        )
        part = producer.partitions[0]
        enqueue, held = part._enqueue, []

        def hold_back(op):  # type: ignore[no-untyped-def]
            if (op.send.lowest_sequence_id, op.send.chunk_id) >= (1, 1):
                held.append(op)
            else:
                enqueue(op)

        part._enqueue = hold_back  # type: ignore[method-assign]
        first = await producer.send(payloads[0])
        rest = [producer.send_async(p, None) for p in payloads[1:]]
        while part._pending:  # the second's first chunk is stored
            await asyncio.sleep(0.01)
        await admin.unload_topic(topic)
        part._enqueue = enqueue
        for op in held:
            enqueue(op)
        ids = [first, *await asyncio.gather(*rest)]
        await producer.close()
    return [str(i) for i in ids]


def test_a_chunked_message_across_two_ledgers_is_read_once_whole(spark, mcluster: Cluster) -> None:
    """A chunked message belongs to the slice (ledger) of its first chunk: the slice
    reads on past its end until it is whole, and the next slice leaves it out."""
    import os

    topic = unique("chunks")
    payloads = [os.urandom(40 * 1024) for _ in range(3)]
    ids = asyncio.run(_chunked_across_ledgers(mcluster, topic, payloads))
    ledgers = {i.split(";")[0].split(":")[0] for i in ids} | {i.split(";")[1].split(":")[0] for i in ids}
    assert len(ledgers) == 2  # the second message spans both
    df = reader(spark, mcluster, topic)
    assert df.rdd.getNumPartitions() == 2
    rows = sorted(df.collect(), key=lambda r: r["message_id"])
    assert [r["value"] for r in rows] == payloads
    assert [r["message_id"] for r in rows] == ids  # first chunk;last chunk, as the SDK prints them
