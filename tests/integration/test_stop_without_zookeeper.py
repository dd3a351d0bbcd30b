"""A stop (SIGTERM) is prompt whatever else is down: with ZooKeeper SIGKILLed first, the
bookie, the broker and the auditor each exit cleanly within 5 s, and the data is intact."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

import magnetar.asyncio as mg
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.testing.processes import AuditorProcess, BookieProcess, BrokerProcess, ServiceFactory

pytestmark = pytest.mark.integration

STOP_BOUND_S = 5.0
TOPIC = "persistent://public/default/stop-without-zk"


async def produce_and_consume_one(address: str, count: int) -> None:
    async with mg.Client(address) as client:
        consumer = await client.subscribe(TOPIC, "sub", initial_position=mg.InitialPosition.Earliest)
        producer = await client.create_producer(TOPIC)
        for i in range(count):
            await producer.send(b"%04d" % i)
        # an acknowledgement leaves a cursor write behind: the stop must not wait for it
        await consumer.acknowledge(await consumer.receive(timeout_millis=10_000))


async def read_all(address: str) -> list[bytes]:
    async with mg.Client(address) as client:
        reader = await client.subscribe(TOPIC, "check", initial_position=mg.InitialPosition.Earliest)
        out = []
        while True:
            try:
                out.append((await reader.receive(timeout_millis=2000)).data())
            except mg.Timeout:
                return out


async def test_services_stop_promptly_with_zookeeper_gone(tmp_path: Path) -> None:
    # A ZooKeeper of its own: this test kills it.
    zk = ZooKeeperServer(tmp_path / "zk", force_sync=False, tick_time_ms=500)
    zk.start()
    made: list = []

    def factory(kind):
        f = ServiceFactory(kind, zk.connect_string, "/stop-test", tmp_path / kind.module)
        made.append(f)
        return f

    try:
        # The bookie's session outlives the stop bound (a stop that waited for it would fail)
        # but is shorter than the default 10 s: its restart below waits the dead one out.
        bookie = factory(BookieProcess).create(zk_session_timeout_s=STOP_BOUND_S + 1)
        broker = factory(BrokerProcess).create(ensemble_size=1, write_quorum=1, ack_quorum=1)
        auditor = factory(AuditorProcess).create()
        for process in (bookie, broker, auditor):  # started together: their starts overlap
            process.launch()
        for process in (bookie, broker, auditor):
            await asyncio.to_thread(process.wait_serving)
        await produce_and_consume_one(broker.address, 50)
        zk.kill()
        for process in (broker, auditor, bookie):
            started = time.monotonic()
            code = await asyncio.to_thread(process.stop, 30.0)
            took = time.monotonic() - started
            assert code == 0, f"{process.name} exited with {code}:\n{process.log_tail()}"
            assert took <= STOP_BOUND_S, f"{process.name} took {took:.1f} s to stop:\n{process.log_tail()}"

        zk.start()
        bookie.start()
        broker.start()
        assert await read_all(broker.address) == [b"%04d" % i for i in range(50)]
    finally:
        for f in made:
            f.kill_all()
        zk.kill()
