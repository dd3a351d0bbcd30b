"""What PersistentTopic itself does, over a real ManagedLedger on in-memory twins of the
ledger client and metadata store (the ``persistent_topic`` fixture)."""

from __future__ import annotations

import asyncio

import pytest
from test_dispatch import Sink

from magnetar.proto.v1 import broker_pb2 as pb

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("ending", ["close", "close_and_delete"])
async def test_a_reader_closing_in_the_background_ends_before_the_managed_ledger_does(persistent_topic, ending):
    # The last consumer of a non-durable subscription leaving closes it in the background;
    # closing or deleting the topic waits for that before closing/deleting the ledger.
    sub = await persistent_topic.subscribe("reader", pb.EXCLUSIVE, pb.EARLIEST, durable=False)
    reader = Sink(sub, "r", sub_type=pb.EXCLUSIVE)
    order: list[str] = []
    close_sub, ml_end = sub.close, getattr(persistent_topic.ml, "delete" if ending == "close_and_delete" else "close")

    async def slow_sub_close() -> None:
        await asyncio.sleep(0.05)
        await close_sub()
        order.append("reader closed")

    async def ml_ends() -> None:
        order.append("ledger ends")
        await ml_end()

    sub.close = slow_sub_close
    setattr(persistent_topic.ml, "delete" if ending == "close_and_delete" else "close", ml_ends)
    reader.leave()
    await getattr(persistent_topic, ending)()
    assert order == ["reader closed", "ledger ends"]
    assert "reader" not in persistent_topic.subscriptions and "reader" not in persistent_topic.ml.cursors
