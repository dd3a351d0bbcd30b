"""The chaos workload against a real cluster without faults: the checker must pass.

Three bookies (E=3, Qw=2, Qa=2) and two brokers, so topics spread over both and the
DLQ / retry copies sometimes go to a topic the other broker serves. The SDK's producers
and consumers go through the brokers' gRPC door, pulsar-client's through their Pulsar
protocol door (the lookups redirect it to each topic's owner). About 10 s of
producing at a low rate (the machine is small and shared), then a drain. Everything
acknowledged must be delivered on every subscription, in order where required, with
no unflagged duplicate, no early delayed message and exact DLQ accounting.

Delayed messages wait 1–3 s here (the chaos run's 1–10 s would keep the drain waiting
up to 10 s for the last one), on brokers with 1 s delay buckets instead of 5 s, so that
most of them still go through the spill files (due past the next bucket) and back.

``data/history-sample.jsonl`` (test_checker.py's recorded history) comes from this test:
``CHAOS_SAVE_SAMPLE=tests/chaos/data/history-sample.jsonl CHAOS_WORKLOAD_TEST_RATE=100
CHAOS_WORKLOAD_TEST_S=10 .venv/bin/python -m pytest tests/chaos/test_workload.py``.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil

import pytest
from checker import check
from history import History
from report import summary, write_report
from workload import Workload

from magnetar.testing.processes import start_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUORUM = dict(ensemble_size=3, write_quorum=2, ack_quorum=2)
DELAY_RANGE_S = (1.0, 3.0)
DELAYED_BUCKET_S = 1.0
PRODUCE_S = float(os.environ.get("CHAOS_WORKLOAD_TEST_S", "10"))
RATE = float(os.environ.get("CHAOS_WORKLOAD_TEST_RATE", "200"))


@pytest.mark.timeout(240)
async def test_the_workload_passes_the_checker_without_faults(bookie_factory, broker_factory, tmp_path):
    brokers = [broker_factory.create(delayed_bucket_s=DELAYED_BUCKET_S, **QUORUM) for _ in range(2)]
    start_all([bookie_factory.create() for _ in range(3)] + brokers)  # brokers see bookies as they come
    url = ",".join(b.address for b in brokers)
    pulsar_url = "pulsar://" + ",".join(b.pulsar_url.removeprefix("pulsar://") for b in brokers)
    seed = random.randrange(1 << 31)
    path = tmp_path / "history.jsonl"
    with History(path) as history:
        workload = Workload(url, history, pulsar_url=pulsar_url, rate=RATE, seed=seed,
                            topic_prefix=f"chaos-test-{seed}", delay_range_s=DELAY_RANGE_S)
        try:
            await workload.start()
            await asyncio.sleep(PRODUCE_S)
            await workload.stop_producing()
            await workload.drain(timeout_s=60)
            counters = workload.counters()
            missing = workload.missing()
        finally:
            await workload.close()
    if os.environ.get("CHAOS_SAVE_SAMPLE"):  # how data/history-sample.jsonl was recorded
        shutil.copy(path, os.environ["CHAOS_SAVE_SAMPLE"])
    events = History.load(path)
    result = check(events)
    json_path, png_path = write_report(events, result, tmp_path, seed=seed,
                                       settings={"rate": RATE, "duration": PRODUCE_S, "delay_range_s": DELAY_RANGE_S})
    print(summary(result, seed, duration=PRODUCE_S))
    assert missing == {}, missing
    assert result.problems == [], "\n".join(result.problems[:50])
    assert result.ok
    # The workload did what it claims: every part ran, and the checker saw it.
    assert result.sent >= 0.8 * RATE * PRODUCE_S and result.send_failed == 0, counters
    assert result.acked == result.sent
    assert result.failed_on_purpose > 0 and result.dead_lettered > 0
    kinds = {e["kind"] for e in events if e["type"] == "subscription"}
    assert kinds == {"failover", "key_shared", "shared_retry", "shared_delayed", "reader", "dlq", "shared"}
    delivered_on = {e["sub"] for e in events if e["type"] == "deliver"}
    assert delivered_on == {"fo-failover", "fo-reader", "ks-keyshared", "ks-failover", "sh-retry", "dl-delayed",
                            "pf-failover", "pf-sdk-failover", "ps-shared", "fo-pulsar-shared"}
    # pulsar-client's part: its producers' sends acknowledged through the Pulsar door,
    # its consumers fed by both doors' producers.
    pulsar_subs = {e["sub"] for e in events if e["type"] == "subscription" and e.get("door") == "pulsar"}
    assert pulsar_subs == {"pf-failover", "ps-shared", "fo-pulsar-shared"}
    sent_on = {e["topic"].rsplit("-", 1)[1] for e in events if e["type"] == "send_ok"}
    assert sent_on == {"fo", "ks", "sh", "dl", "pf", "ps"}
    assert any(e["type"] == "deliver" and e.get("retry") for e in events)  # retry letter copies
    assert any(e["type"] == "deliver" and e["sub"] == "sh-retry" and e["rc"] > 0 for e in events)  # nack path
    assert json_path.exists() and png_path.stat().st_size > 1000
