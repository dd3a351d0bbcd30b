"""The DLQ replay job: the pure transform on its output; 10,000 dead letters made by real
consumers replayed to their 3 topics; filters, a transform, a dry run and bad input."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from collections import Counter

import dlq_replay
import pytest
from magnetar_spark.replay import ReplayConfig, Selection, select, transform
from magnetar_spark.testing import Cluster, dead_letter, read_all, wait_for_backlog

import magnetar.asyncio as mg
from magnetar.client.deadletters import replayed_properties, sequence_id
from magnetar.client.rest_admin import RestAdmin
from magnetar.common.message_id import ChunkMessageId, MessageId
from magnetar.proto.v1 import broker_pb2 as pb

pytestmark = pytest.mark.integration

DLQ_COLUMNS = (
    "message_id STRING, topic STRING, partition INT, key STRING, value BINARY, properties MAP<STRING,STRING>, "
    "publish_time TIMESTAMP, event_time TIMESTAMP, redelivery_count INT, entry_size INT"
)


def unique(prefix: str) -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:8]}"


def args(c: Cluster, *extra: str):
    return dlq_replay.parse_args(["--service-url", c.service_url, "--admin-url", c.admin_url, *extra])


# -- the pure part ---------------------------------------------------------------------------

def dlq_row(mid: str, props: dict[str, str], minutes_ago: int, now: dt.datetime, partition: int = -1):
    published = now - dt.timedelta(minutes=minutes_ago)
    return (mid, "persistent://public/default/orders-s-DLQ", partition, "k", b"payload", props, published, None, 0, 1)


def test_transform_builds_the_copies_as_the_gateway_does(spark) -> None:
    now = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
    rows = [
        dlq_row("5:7:-1:-1", {"REAL_TOPIC": "persistent://public/default/orders", "RECONSUMETIMES": "2",
                              "ORIGIN_MESSAGE_ID": "1:2:-1:-1", "x": "y"}, 90, now),
        dlq_row("5:8:1:3", {"REAL_TOPIC": "persistent://public/default/orders", "REPLAY_COUNT": "2"}, 10, now, 1),
        dlq_row("6:0:-1:-1", {"x": "no real topic"}, 5, now),
    ]
    df = spark.createDataFrame(rows, DLQ_COLUMNS)
    cfg = ReplayConfig(Selection(), now_ms=1_767_268_800_000)
    out = {r["ack_message_id"]: r for r in transform(df, cfg).collect()}
    for mid, props in (("5:7:-1:-1", rows[0][5]), ("5:8:1:3", rows[1][5])):
        assert out[mid]["properties"] == replayed_properties(props, mid, cfg.now_ms)
        assert out[mid]["sequence_id"] == sequence_id(MessageId.parse(mid))
        assert out[mid]["topic"] == "persistent://public/default/orders"
        assert out[mid]["value"] == b"payload" and out[mid]["key"] == "k"
    assert out["5:7:-1:-1"]["properties"]["ORIGIN_MESSAGE_ID"] == "1:2:-1:-1"
    assert out["5:8:1:3"]["properties"]["ORIGIN_MESSAGE_ID"] == "5:8:1:3"
    assert out["5:8:1:3"]["properties"]["REPLAY_COUNT"] == "3"
    assert out["5:8:1:3"]["ack_topic"] == "persistent://public/default/orders-s-DLQ-partition-1"
    digest = Selection().digest()
    assert out["5:7:-1:-1"]["producer_name"] == f"dlq-replay:persistent://public/default/orders-s-DLQ:5:{digest}"
    assert out["6:0:-1:-1"]["topic"] is None
    retargeted = transform(df, ReplayConfig(Selection(target="persistent://public/default/fixed"), 1)).collect()
    assert {r["topic"] for r in retargeted} == {"persistent://public/default/fixed"}
    assert len({r["producer_name"] for r in retargeted} & {r["producer_name"] for r in out.values()}) == 0

    chosen = select(df, Selection(older_than="1h"), int(now.timestamp() * 1000)).collect()
    assert [r["message_id"] for r in chosen] == ["5:7:-1:-1"]
    chosen = select(df, Selection(newer_than="30m", where="properties['x'] IS NULL"), int(now.timestamp() * 1000))
    assert [r["message_id"] for r in chosen.collect()] == ["5:8:1:3"]
    # the first two in DLQ order: partition by partition, then by id
    assert [r["message_id"] for r in select(df, Selection(max_messages=2), 0).collect()] == ["5:7:-1:-1", "6:0:-1:-1"]


# -- against a cluster -------------------------------------------------------------------------

def test_ten_thousand_dead_letters_go_back_to_their_three_topics(spark, mcluster: Cluster) -> None:
    topics = [unique("orders") for _ in range(3)]
    counts = [3334, 3333, 3333]

    async def fill() -> list[list[str]]:
        return await asyncio.gather(*(dead_letter(mcluster.service_url, t, "s", n) for t, n in zip(topics, counts, strict=True)))

    origins = asyncio.run(fill())
    for t, n in zip(topics, counts, strict=True):
        assert asyncio.run(wait_for_backlog(mcluster.admin_url, f"{t}-s-DLQ", "s-DLQ-sub", n)) == n
    summary = dlq_replay.run(args(mcluster, "--namespace", "public/default", "--where",
                                  f"topic IN ({', '.join(repr(t + '-s-DLQ') for t in topics)})"), spark)
    assert summary.exit_code == 0
    assert summary.moved == 10_000 and summary.failed == 0 and summary.already_there == 0
    assert summary.by_target == Counter(dict(zip(topics, counts, strict=True)))
    for t, ids in zip(topics, origins, strict=True):
        copies = [m for m in asyncio.run(read_all(mcluster.service_url, t)) if "REPLAY_COUNT" in m.properties()]
        assert Counter(m.properties()["ORIGIN_MESSAGE_ID"] for m in copies) == Counter(ids)  # each once
        assert all("RECONSUMETIMES" not in m.properties() and m.properties()["REPLAY_COUNT"] == "1" for m in copies)
        assert asyncio.run(wait_for_backlog(mcluster.admin_url, f"{t}-s-DLQ", "s-DLQ-sub", 0)) == 0
    # consumed on the original topics, by their subscription
    asyncio.run(_consume_all(mcluster, topics[0], "s", counts[0]))


async def _consume_all(c: Cluster, topic: str, subscription: str, n: int) -> None:
    async with mg.Client(c.service_url) as client:
        consumer = await client.subscribe(topic, subscription, consumer_type=mg.ConsumerType.Shared)
        got = set()
        while len(got) < n:
            msg = await consumer.receive(timeout_millis=10_000)
            got.add(msg.properties()["ORIGIN_MESSAGE_ID"])
            await consumer.acknowledge(msg)
        await consumer.close()


async def fill_dlq(c: Cluster, dlq: str, rows: list[tuple[bytes, dict[str, str]]]) -> None:
    """A DLQ as the broker fills it (one unbatched entry per message), with its subscription."""
    async with mg.Client(c.service_url) as client, RestAdmin(c.admin_url) as admin:
        await admin.create_topic(dlq)
        await admin.create_subscription(dlq, "s-DLQ-sub", MessageId.earliest)
        producer = await client.create_producer(dlq, batching_enabled=False, max_pending_messages=20_000)
        await asyncio.gather(*(producer.send(v, properties=p) for v, p in rows))
        await producer.close()


def upper_payload(df):
    """A --transform: upper-case every payload."""
    from pyspark.sql import functions as F

    return df.withColumn("value", F.upper(F.col("value").cast("string")).cast("binary"))


def wrong_schema(df):
    return df.drop("properties")


def raises(df):
    raise ValueError("cannot fix these")


def test_filters_transform_dry_run_and_bad_input(spark, mcluster: Cluster, capsys) -> None:
    real, gone = unique("real"), unique("gone")
    dlq = unique("mixed") + "-s-DLQ"
    asyncio.run(_create(mcluster, real))
    rows = [(f"a{i}".encode(), {"REAL_TOPIC": real, "kind": "a", "ORIGIN_MESSAGE_ID": f"1:{i}:-1:-1"}) for i in range(20)]
    rows += [(f"b{i}".encode(), {"REAL_TOPIC": real, "kind": "b"}) for i in range(7)]
    rows += [(b"orphan", {"kind": "a"}), (b"lost", {"REAL_TOPIC": gone, "kind": "a"})]
    asyncio.run(fill_dlq(mcluster, dlq, rows))
    base = ["--dlq-topic", dlq, "--where", "properties['kind'] = 'a'", "--transform", "test_replay:upper_payload"]

    dry = dlq_replay.run(args(mcluster, *base, "--dry-run"), spark)
    assert dry.by_target == Counter({real: 20}) and dry.no_real_topic == 1 and dry.missing_target == Counter({gone: 1})
    assert dry.skipped_by_filter == 7 and dry.exit_code == 1
    assert asyncio.run(read_all(mcluster.service_url, real)) == []
    assert asyncio.run(wait_for_backlog(mcluster.admin_url, dlq, "s-DLQ-sub", 29, stall_s=2)) == 29

    for bad, message in (("test_replay:wrong_schema", "wrong schema"), ("test_replay:raises", "cannot fix these"),
                         ("no_such_module:f", "cannot load")):
        with pytest.raises(dlq_replay.BadArguments, match=message):
            dlq_replay.run(args(mcluster, "--dlq-topic", dlq, "--transform", bad), spark)
    assert asyncio.run(read_all(mcluster.service_url, real)) == []

    summary = dlq_replay.run(args(mcluster, *base), spark)
    assert summary.moved == 20 and summary.by_target == Counter({real: 20})
    assert summary.skipped_by_filter == 7 and summary.no_real_topic == 1 and summary.missing_target == Counter({gone: 1})
    assert summary.exit_code == 1  # partial: two messages could not go anywhere
    copies = asyncio.run(read_all(mcluster.service_url, real))
    assert sorted(m.data() for m in copies) == sorted(f"A{i}".encode() for i in range(20))
    assert {m.properties()["ORIGIN_MESSAGE_ID"] for m in copies} == {f"1:{i}:-1:-1" for i in range(20)}
    # left in the DLQ, unacknowledged: the 7 filtered out, the orphan and the lost one
    assert asyncio.run(wait_for_backlog(mcluster.admin_url, dlq, "s-DLQ-sub", 9)) == 9

    again = dlq_replay.run(args(mcluster, *base), spark)  # nothing new selected
    assert again.moved == 0 and len(asyncio.run(read_all(mcluster.service_url, real))) == 20


async def _create(c: Cluster, topic: str) -> None:
    async with RestAdmin(c.admin_url) as admin:
        await admin.create_topic(topic)


def test_bad_arguments_exit_2_with_one_line(spark, mcluster: Cluster, capsys) -> None:
    missing = unique("never") + "-s-DLQ"
    code = dlq_replay.main(["--service-url", mcluster.service_url, "--admin-url", mcluster.admin_url,
                            "--dlq-topic", missing, "--master", "local[2]"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"dlq_replay.py: error: DLQ {missing} does not exist"]
    for argv in (["--topic", "t"], ["--dlq-topic", "d", "--older-than", "soon"], []):
        with pytest.raises(SystemExit) as exc:
            dlq_replay.parse_args(argv)
        assert exc.value.code == 2


# -- chunked dead letters ------------------------------------------------------------------------

BIG = 6 * 1024 * 1024
"""Over the max message size (5 MB): the replay must send it as chunks."""


def chunked_rows() -> list[tuple[str, bytes]]:
    """(ORIGIN_MESSAGE_ID, payload), in DLQ order: plain, chunked in 1000-byte chunks,
    plain, chunked over the max message size, plain (then ``INTERLEAVED``)."""
    return [("o0", b"p0"), ("o1", bytes(range(256)) * 10), ("o2", b"p2"),
            ("o3", b"x" * BIG + b"end"), ("o4", b"p4")]


INTERLEAVED = {"o6": b"p6", "o5": b"first-second-third"}
"""Then, stored after those: chunk 0 of o5, o6, chunks 1 and 2 of o5."""


async def fill_chunked_dlq(c: Cluster, dlq: str, real: str, subscriptions: list[str]) -> dict[str, MessageId]:
    """A DLQ holding chunked dead letters between plain ones, as the broker's moves leave
    them (each chunk an unbatched entry with the dead-letter properties); the ids by
    ORIGIN_MESSAGE_ID."""
    ids: dict[str, MessageId] = {}
    async with mg.Client(c.service_url) as client, RestAdmin(c.admin_url) as admin:
        await admin.create_topic(dlq)
        for sub in subscriptions:
            await admin.create_subscription(dlq, sub, MessageId.earliest)
        small = await client.create_producer(dlq, batching_enabled=False, chunking_enabled=True, max_message_size=1000)
        large = await client.create_producer(dlq, batching_enabled=False, chunking_enabled=True)
        for origin, payload in chunked_rows():
            producer = large if len(payload) > BIG else small
            ids[origin] = await producer.send(payload, properties={"REAL_TOPIC": real, "ORIGIN_MESSAGE_ID": origin})
            assert (len(payload) > 1000) == (";" in str(ids[origin]))  # chunked iff over the chunk size
        await small.close()
        await large.close()
        # A chunked message around a plain one (chunk 0, plain, chunks 1 and 2), as two
        # moves at once leave them: a reader delivers the plain one first.
        interleaved = await client.create_producer(dlq, producer_name=f"around-{uuid.uuid4().hex[:6]}",
                                                   batching_enabled=False)
        plain = await client.create_producer(dlq, batching_enabled=False)
        props = {"REAL_TOPIC": real, "ORIGIN_MESSAGE_ID": "o5"}
        parts = [b"first-", b"second-", b"third"]
        for i, part in enumerate(parts):
            entry = pb.EntryBatch(
                producer_name=interleaved.producer_name(), sequence_id=7, publish_time_ms=int(time.time() * 1000),
                batched=False, messages=[pb.SingleMessage(payload=part, properties=props)],
                uuid=f"{interleaved.producer_name()}-7", chunk_id=i, num_chunks_from_msg=len(parts),
                total_chunk_msg_size=sum(map(len, parts)),
            )  # fmt: skip
            chunk = await interleaved.partitions[0].send_chunk_entry(entry.SerializeToString(), 7, (i, len(parts)))
            if i == 0:
                first = chunk
                ids["o6"] = await plain.send(b"p6", properties={"REAL_TOPIC": real, "ORIGIN_MESSAGE_ID": "o6"})
        ids["o5"] = ChunkMessageId(first, chunk)
        await interleaved.close()
        await plain.close()
    return ids


async def store_first_copies(c: Cluster, dlq: str, real: str, ids: dict[str, MessageId], origins: list[str]) -> None:
    """What a replay (the fused path, no filters) that died after storing the copies of
    ``origins`` and before any acknowledgement left on ``real``: those copies, under the
    replay's producer name and sequence ids."""
    ledgers = {(i.first_chunk_message_id() if isinstance(i, ChunkMessageId) else i).ledger_id() for i in ids.values()}
    (ledger,) = ledgers  # one DLQ ledger: one producer name
    async with mg.Client(c.service_url) as client:
        producer = await client.create_producer(
            real, producer_name=f"dlq-replay:{dlq}:{ledger}:{Selection().digest()}", batching_enabled=False,
            chunking_enabled=True,
        )
        payloads = dict(chunked_rows()) | INTERLEAVED
        for origin in origins:
            await producer.send(payloads[origin], properties={"REAL_TOPIC": real, "ORIGIN_MESSAGE_ID": origin,
                                                              "REPLAY_COUNT": "1"},
                                sequence_id=sequence_id(ids[origin]))  # fmt: skip
        await producer.close()


def _copies(c: Cluster, topic: str) -> dict[str, bytes]:
    copies = asyncio.run(read_all(c.service_url, topic))
    origins = [m.properties()["ORIGIN_MESSAGE_ID"] for m in copies]
    assert len(origins) == len(set(origins))  # each once
    return {m.properties()["ORIGIN_MESSAGE_ID"]: m.data() for m in copies}


def test_chunked_dead_letters_replay_whole_ack_every_chunk_and_count_once(spark, mcluster: Cluster, tmp_path) -> None:
    import json

    import dlq_report as dr

    real, other = unique("chunked"), unique("chunked-other")
    dlq = unique("chunked") + "-s-DLQ"
    for t in (real, other):
        asyncio.run(_create(mcluster, t))
    subs = ["s-DLQ-sub", "again", "spark", "spark-again"]
    ids = asyncio.run(fill_chunked_dlq(mcluster, dlq, real, subs))
    want = dict(chunked_rows()) | INTERLEAVED

    # The report counts a chunked dead letter once.
    report = dr.ReportConfig(dlq_topics=(dlq,), service_url=mcluster.service_url, admin_url=mcluster.admin_url,
                             dlq_subscription="s-DLQ-sub", json_path=tmp_path / "r.json")
    assert dr.run(report, spark_factory=lambda: spark, out=lambda _line: None) == dr.EXIT_OK
    assert json.loads((tmp_path / "r.json").read_text())["messages"] == len(want)

    def replay(sub: str, *extra: str) -> dlq_replay.Summary:
        return dlq_replay.run(args(mcluster, "--dlq-topic", dlq, "--subscription-name", sub, *extra), spark)

    # The fused path, after a run that stored everything the reader delivers before o5's
    # last chunk (o6 included) and died before acknowledging: those are found stored, the
    # rest (o5) is sent, each is whole on its topic once, every chunk acknowledged.
    stored = ["o0", "o1", "o2", "o3", "o4", "o6"]
    asyncio.run(store_first_copies(mcluster, dlq, real, ids, stored))
    first = replay("s-DLQ-sub")
    assert (first.exit_code, first.moved, first.already_there) == (0, len(want), len(stored))
    assert _copies(mcluster, real) == want
    assert asyncio.run(wait_for_backlog(mcluster.admin_url, dlq, "s-DLQ-sub", 0, stall_s=5)) == 0
    # Stored but not acknowledged (as after a crash between the two: another subscription
    # that acknowledged nothing): found stored, not sent again, acknowledged now.
    again = replay("again")
    assert (again.exit_code, again.moved, again.already_there) == (0, len(want), len(want))
    assert _copies(mcluster, real) == want
    assert asyncio.run(wait_for_backlog(mcluster.admin_url, dlq, "again", 0, stall_s=5)) == 0

    # The Spark SQL path (a --where), to another topic: all sent (the 6 MB one as chunks), once.
    spark_args = ("--where", "properties['ORIGIN_MESSAGE_ID'] IS NOT NULL", "--target", other)
    moved = replay("spark", *spark_args)
    assert (moved.exit_code, moved.moved, moved.already_there) == (0, len(want), 0)
    assert _copies(mcluster, other) == want
    assert asyncio.run(wait_for_backlog(mcluster.admin_url, dlq, "spark", 0, stall_s=5)) == 0
    repeat = replay("spark-again", *spark_args)
    assert (repeat.exit_code, repeat.moved, repeat.already_there) == (0, len(want), len(want))
    assert _copies(mcluster, other) == want
    assert asyncio.run(wait_for_backlog(mcluster.admin_url, dlq, "spark-again", 0, stall_s=5)) == 0
