"""Exactly once across failures: the replay job's driver SIGKILLed in the middle of a
run, then run again with a task that fails once after publishing part of its slice
(Spark retries it): every DLQ message is on its target exactly once, the DLQ is empty."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from magnetar_spark.testing import Cluster, read_all, wait_for_backlog

import magnetar.asyncio as mg
from magnetar.client.rest_admin import RestAdmin
from magnetar.common.message_id import MessageId

pytestmark = [pytest.mark.integration, pytest.mark.slow]

JOB = Path(__file__).resolve().parents[2] / "spark-jobs" / "dlq_replay.py"
PER_TARGET = 3000


async def fill(c: Cluster, dlq: str, targets: list[str]) -> list[str]:
    """A 2-partition DLQ over several ledgers, as the broker fills one (unbatched entries
    carrying REAL_TOPIC and ORIGIN_MESSAGE_ID); returns the ORIGIN_MESSAGE_IDs."""
    origins = []
    async with mg.Client(c.service_url) as client, RestAdmin(c.admin_url) as admin:
        for t in targets:
            await admin.create_topic(t)
        await admin.create_topic(dlq, 2)
        await admin.create_subscription(dlq, "s-DLQ-sub", MessageId.earliest)
        for part in range(3):  # three ledgers per partition
            producer = await client.create_producer(dlq, batching_enabled=False, max_pending_messages=20_000)
            sends = []
            for i in range(part * PER_TARGET // 3, (part + 1) * PER_TARGET // 3):
                for t in targets:
                    origin = f"{t.rsplit('/', 1)[1]}:{i}"
                    origins.append(origin)
                    props = {"REAL_TOPIC": t, "ORIGIN_MESSAGE_ID": origin, "RECONSUMETIMES": "2"}
                    sends.append(producer.send(f"{origin}".encode(), properties=props))
            await asyncio.gather(*sends)
            await producer.close()
            await admin.unload_topic(dlq)
    return origins


async def stored(c: Cluster, topics: list[str]) -> int:
    async with RestAdmin(c.admin_url) as admin:
        return sum([(await admin.topic_stats(t)).msg_in_counter for t in topics])


def launch(c: Cluster, dlq: str, logs: Path, **env: str) -> subprocess.Popen[bytes]:
    """The job as a CronJob runs it, its output in ``logs``.out/.err."""
    with open(logs.with_suffix(".out"), "wb") as out, open(logs.with_suffix(".err"), "wb") as err:
        return subprocess.Popen(
            [sys.executable, str(JOB), "--service-url", c.service_url, "--admin-url", c.admin_url, "--dlq-topic", dlq,
             "--master", "local[2,4]", "--json"],  # local[2,4]: a failed task is tried up to 4 times
            stdout=out, stderr=err, start_new_session=True, env={**os.environ, **env},
        )


def test_a_killed_run_and_a_failed_task_then_a_rerun_move_each_message_once(mcluster: Cluster, tmp_path: Path) -> None:
    ns = "persistent://public/default"
    targets = [f"{ns}/crash-a-{uuid.uuid4().hex[:6]}", f"{ns}/crash-b-{uuid.uuid4().hex[:6]}"]
    dlq = f"{ns}/crash-{uuid.uuid4().hex[:6]}-s-DLQ"
    origins = asyncio.run(fill(mcluster, dlq, targets))
    total = len(origins)

    first = launch(mcluster, dlq, tmp_path / "first")
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and first.poll() is None:
        if asyncio.run(stored(mcluster, targets)) > 0:
            break
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)  # the driver and its JVM and Python workers
    first.wait(30)
    before = asyncio.run(stored(mcluster, targets))
    assert 0 < before < total, f"the kill came too late or too early: {before} of {total} stored"

    marker = tmp_path / "failed-once"
    second = launch(mcluster, dlq, tmp_path / "second", DLQ_REPLAY_FAIL_TASK_AFTER="300",
                    DLQ_REPLAY_FAIL_MARKER=str(marker))
    second.wait(300)
    assert second.returncode == 0, (tmp_path / "second.err").read_text()[-3000:]
    assert marker.exists()  # a task did fail once, and its retry finished the job
    assert "injected task failure" in (tmp_path / "second.err").read_text()
    summary = json.loads((tmp_path / "second.out").read_text().strip().splitlines()[-1])
    assert summary["failed"] == 0 and summary["already_there"] > 0

    copies = [m for t in targets for m in asyncio.run(read_all(mcluster.service_url, t))]
    counted = Counter(m.properties()["ORIGIN_MESSAGE_ID"] for m in copies)
    assert counted == Counter(origins)  # every message, each exactly once
    for i in range(2):
        assert asyncio.run(wait_for_backlog(mcluster.admin_url, f"{dlq}-partition-{i}", "s-DLQ-sub", 0)) == 0
