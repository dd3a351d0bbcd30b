"""Fixtures shared by the SDK unit tests: the in-memory broker twin of test_client_sdk
and an asyncio client connected to it."""

from __future__ import annotations

import pytest
from test_client_sdk import Twin

import magnetar.asyncio as ma


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
