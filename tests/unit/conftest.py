"""Fixtures shared by the unit tests: the in-memory broker twin of test_client_sdk and an
asyncio client connected to it (SDK tests); a topic twin and a PersistentTopic over a
real ManagedLedger on in-memory twins of the ledger client and store (broker tests)."""

from __future__ import annotations

import pytest
from test_client_sdk import Twin
from test_managed_ledger_core import FakeLedgerClient, MemoryStore, open_ml
from topic_twin import TopicTwin

import magnetar.asyncio as ma
from magnetar.broker.config import BrokerConfig
from magnetar.broker.topic import PersistentTopic

TOPIC = "persistent://public/default/t"


def _broker_config() -> BrokerConfig:
    return BrokerConfig(dispatch_max_entries=50, cursor_persist_interval_s=0.01)


@pytest.fixture
async def twin():
    t = Twin()
    await t.start()
    yield t
    await t.stop()


@pytest.fixture
async def client(twin):
    c = ma.Client(f"magnetar://{twin.address}", operation_timeout_seconds=5)
    yield c
    await c.close()


@pytest.fixture
async def topic():
    """Subscriptions and dispatchers with no PersistentTopic behind (see topic_twin)."""
    store = MemoryStore()
    t = TopicTwin(TOPIC, await open_ml(FakeLedgerClient(), store), store, _broker_config())
    yield t
    await t.close()


@pytest.fixture
async def persistent_topic():
    """A PersistentTopic, for what the topic itself does."""
    t = PersistentTopic(TOPIC, -1, await open_ml(FakeLedgerClient(), MemoryStore()), _broker_config())
    yield t
    await t.close()
