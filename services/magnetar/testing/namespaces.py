"""Namespaces for tests that share one cluster: a new one per test."""

from __future__ import annotations

import uuid

from magnetar.client.admin import AdminClient


async def new_namespace(broker_address: str, prefix: str) -> str:
    """Create ``public/<prefix>-<hex>`` through the broker at ``broker_address`` and return
    its name. No broker owns any of its bundles yet, so the first broker asked for one of
    its topics takes it: how a test on a shared cluster chooses a topic's owner."""
    namespace = f"public/{prefix}-{uuid.uuid4().hex[:6]}"
    async with AdminClient(broker_address, 10) as admin:
        await admin.create_namespace(namespace)
    return namespace
