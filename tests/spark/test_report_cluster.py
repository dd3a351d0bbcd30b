"""The DLQ report end to end: a real bookie, broker and gateway (the Spark tests' shared
cluster, in a namespace of its own); DLQ messages made by real
consumers (negative acks past max_redeliver_count=1, and reconsume_later past it); the
report read through the ``magnetar`` data source on the shared local[2] session, its
counts checked against what the test made."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dlq_report as dr
import pytest
from magnetar_spark.testing import STALL_S, Cluster

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NACKED = {"orders": 150, "payments": 60}
RECONSUMED = {"payments": 40}
SUB = "workers"


async def make_dead_letters(address: str, admin_url: str, ns: str, expected: dict[str, int]) -> None:
    """Each message received once and given up on: the broker moves it to <topic>-workers-DLQ
    (a negatively acknowledged one when it is about to be redelivered: the consumers stay
    until the DLQs hold them all)."""
    async with AdminClient(address) as admin:
        await admin.create_namespace(ns)
    async with mg.Client(address) as client:
        policy = mg.ConsumerDeadLetterPolicy(max_redeliver_count=1)
        consumers = []
        for name in NACKED:
            topic = f"persistent://{ns}/{name}"
            consumer = await client.subscribe(
                topic, SUB, consumer_type=mg.ConsumerType.Shared, negative_ack_redelivery_delay_ms=100,
                dead_letter_policy=policy, enable_retry=True, retry_delay_levels="1s",
            )
            consumers.append(consumer)
            producer = await client.create_producer(topic, batching_enabled=False)
            nacks, retries = NACKED[name], RECONSUMED.get(name, 0)
            await asyncio.gather(*(producer.send(f"{name}-{i}".encode(), properties={"i": str(i)})
                                   for i in range(nacks + retries)))
            for i in range(nacks + retries):
                msg = await consumer.receive(10_000)
                if i < nacks:
                    await consumer.negative_acknowledge(msg)  # count 1 = max: to the DLQ
                else:
                    await consumer.reconsume_later(msg, timedelta(seconds=1))  # to the retry topic
            for _ in range(retries):  # back from the retry topic: the 2nd retry exceeds the max
                await consumer.reconsume_later(await consumer.receive(10_000), timedelta(seconds=1))
            await producer.close()
        await wait_for_backlogs(admin_url, ns, expected)
        for consumer in consumers:
            await consumer.close()


async def handle(address: str, dlq: str, count: int) -> None:
    """Acknowledge the first ``count`` messages of ``dlq`` on its subscription, in order."""
    async with mg.Client(address) as client:
        consumer = await client.subscribe(dlq, f"{SUB}-DLQ-sub", consumer_type=mg.ConsumerType.Exclusive)
        msgs = [await consumer.receive(10_000) for _ in range(count)]
        await consumer.acknowledge_cumulative(msgs[-1])
        await consumer.close()  # the cursor is stored on close


async def wait_for_backlogs(admin_url: str, ns: str, expected: dict[str, int]) -> None:
    from magnetar.client.rest_admin import RestAdmin

    async with RestAdmin(admin_url) as admin:
        got: dict[str, int] = {}
        changed = time.monotonic()
        while True:  # until the backlogs stop changing (a loaded machine is slow, not stuck)
            listed = await admin.request("GET", f"/admin/v2/dlq/{ns}")
            now = {d["topic"]: d["backlog"] for d in listed}
            if now != got:
                got, changed = now, time.monotonic()
            if got == expected or time.monotonic() - changed > STALL_S:
                assert got == expected
                return
            await asyncio.sleep(0.2)


def test_the_report_counts_what_real_consumers_gave_up_on(mcluster: Cluster, spark, tmp_path: Path, capsys):
    ns = f"public/report-{uuid.uuid4().hex[:6]}"
    dlq = {name: f"persistent://{ns}/{name}-{SUB}-DLQ" for name in NACKED}
    expected = {dlq[n]: NACKED[n] + RECONSUMED.get(n, 0) for n in NACKED}
    asyncio.run(make_dead_letters(mcluster.service_url, mcluster.admin_url, ns, expected))

    lines: list[str] = []
    cfg = dr.ReportConfig(namespace=ns, service_url=mcluster.service_url, admin_url=mcluster.admin_url,
                          json_path=tmp_path / "r.json", csv_path=tmp_path / "r.csv", png_path=tmp_path / "r.png")
    assert dr.run(cfg, spark_factory=lambda: spark, out=lines.append) == dr.EXIT_OK
    doc = json.loads((tmp_path / "r.json").read_text())
    orders, payments = f"persistent://{ns}/orders", f"persistent://{ns}/payments"
    assert doc["failedDlqs"] == {} and sorted(doc["dlqs"]) == sorted(dlq.values())
    assert doc["subscriptions"] == {d: f"{SUB}-DLQ-sub" for d in dlq.values()}
    assert doc["messages"] == 250 and doc["byDlq"] == expected
    assert doc["byRealTopic"] == {orders: 150, payments: 100}
    assert doc["byReason"] == {"max redeliveries": 210, "retries exhausted": 40}
    assert doc["byAgeBucket"] == {"<1h": 250, "1-6h": 0, "6-24h": 0, "1-7d": 0, ">7d": 0}
    got = {(r["realTopic"], r["reason"]): r["messages"] for r in doc["rows"]}
    assert got == {(orders, "max redeliveries"): 150, (payments, "max redeliveries"): 60,
                   (payments, "retries exhausted"): 40}
    assert lines[-1].startswith("summary: 250 messages in 2 DLQ(s) read, 0 failed")
    assert (tmp_path / "r.csv").read_text().count("\n") == 1 + 3
    assert (tmp_path / "r.png").stat().st_size > 10_000

    # Three hours later, one DLQ by name: the same messages, older.
    later = dr.ReportConfig(dlq_topics=(dlq["payments"],), service_url=cfg.service_url, admin_url=mcluster.admin_url,
                            now=datetime.now(UTC) + timedelta(hours=3), json_path=tmp_path / "later.json")
    assert dr.run(later, spark_factory=lambda: spark, out=lines.append) == dr.EXIT_OK
    doc = json.loads((tmp_path / "later.json").read_text())
    assert doc["byAgeBucket"]["1-6h"] == 100 and doc["messages"] == 100

    # 30 of orders' dead letters handled on the DLQ's subscription: the report counts the
    # rest, unless asked for every retained message.
    asyncio.run(handle(mcluster.service_url, dlq["orders"], 30))
    after = dr.ReportConfig(dlq_topics=(dlq["orders"],), service_url=cfg.service_url, admin_url=mcluster.admin_url,
                            json_path=tmp_path / "after.json")
    assert dr.run(after, spark_factory=lambda: spark, out=lines.append) == dr.EXIT_OK
    assert json.loads((tmp_path / "after.json").read_text())["messages"] == 120
    retained = dr.ReportConfig(dlq_topics=(dlq["orders"],), service_url=cfg.service_url, admin_url=mcluster.admin_url,
                               all_retained=True, json_path=tmp_path / "all.json")
    assert dr.run(retained, spark_factory=lambda: spark, out=lines.append) == dr.EXIT_OK
    doc = json.loads((tmp_path / "all.json").read_text())
    assert doc["messages"] == 150 and doc["subscriptions"] == {dlq["orders"]: None}

    # A DLQ or namespace that does not exist: exit 2 and one line, before Spark starts.
    capsys.readouterr()
    urls = ["--service-url", cfg.service_url, "--admin-url", mcluster.admin_url]
    assert dr.main(["--dlq-topic", f"persistent://{ns}/nosuch-{SUB}-DLQ", *urls]) == dr.EXIT_USAGE
    err = capsys.readouterr().err
    assert err == f"dlq_report: error: the DLQ persistent://{ns}/nosuch-{SUB}-DLQ does not exist\n"
    assert dr.main(["--namespace", "public/nosuch-ns", *urls]) == dr.EXIT_USAGE
    assert capsys.readouterr().err == "dlq_report: error: the namespace public/nosuch-ns does not exist\n"
