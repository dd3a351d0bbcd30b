"""Managed ledger lists and their cursors in ZooKeeper, written with compare-and-set.

::

    <root>/managed-ledgers/<tenant>/<namespace>/persistent/<topic>            ledger list
    <root>/managed-ledgers/<tenant>/<namespace>/persistent/<topic>/<cursor>   one cursor

Ledger list: ``{"ledgers": [{"ledger_id": L, "entries": N, "size": B, "created_ms": T},
...], "properties": {...}}`` (the last ledger may be the open one, entries -1).
Cursor: ``{"mark_delete": [L, E], "individually_acked": [[[L1, E1], [L2, E2]], ...],
"batch_acks": [[L, E, size, "<hex mask>"], ...], "redelivery_counts": [[L, E, n], ...],
"properties": {...}}`` (the two middle keys only when not empty; the broker keeps the
document under ZooKeeper's 1 MB znode limit, see ``managedledger/cursor_state.py``).
Non-durable (reader) cursors are never stored. Cursor replacements made in one event-loop
turn, of any topics, go to ZooKeeper as one multi-operation (``grouped_sets.py``), each
still compare-and-set on its own version. Documents are opaque here: the broker's
managed ledger gives them meaning. Every write names the version it read; a mismatch raises
:class:`MetadataVersionConflict` and changes nothing.
"""

from __future__ import annotations

from typing import Any

from magnetar.common.errors import NotFound
from magnetar.metadata.codec import decode, encode
from magnetar.metadata.grouped_sets import GroupedSets
from magnetar.metadata.session import ZkSession

Document = dict[str, Any]


class ZkManagedLedgerStore:
    """Typed access to managed ledger and cursor znodes."""

    def __init__(self, session: ZkSession) -> None:
        self._session = session
        self._paths = session.paths
        self.cursor_writes = GroupedSets(session)
        """Cursor replacements made in one loop turn go as one multi-operation."""

    # -- the ledger list ----------------------------------------------------------
    async def get(self, tenant: str, namespace: str, topic: str) -> tuple[Document | None, int]:
        """The ledger list and its version; ``(None, -1)`` when the topic has none."""
        path = self._paths.managed_ledger(tenant, namespace, topic)
        try:
            data, stat = await self._session.get(path)
        except NotFound:
            return None, -1
        return decode(data, path), stat.version

    async def create(self, tenant: str, namespace: str, topic: str, doc: Document) -> int:
        """Create the ledger list (parents included); returns its version (0).

        Raises:
            MetadataVersionConflict: (NodeExists) it exists already.
        """
        path = self._paths.managed_ledger(tenant, namespace, topic)
        await self._session.create(path, encode(doc), makepath=True)
        return 0

    async def update(self, tenant: str, namespace: str, topic: str, doc: Document, version: int) -> int:
        """Replace the ledger list if it is still at ``version``; returns the new version.

        Raises:
            MetadataVersionConflict: someone else changed it since.
            NotFound: it was deleted.
        """
        path = self._paths.managed_ledger(tenant, namespace, topic)
        stat = await self._session.set(path, encode(doc), version)
        return stat.version

    async def delete(self, tenant: str, namespace: str, topic: str) -> None:
        """Delete the ledger list and all its cursors; nothing to delete is fine."""
        path = self._paths.managed_ledger(tenant, namespace, topic)
        try:
            await self._session.delete(path, recursive=True)
        except NotFound:
            pass

    async def list_topics(self, tenant: str, namespace: str) -> list[str]:
        """Topics of a namespace that have a managed ledger, sorted."""
        try:
            return sorted(await self._session.children(self._paths.managed_ledgers(tenant, namespace)))
        except NotFound:
            return []

    # -- cursors ------------------------------------------------------------------
    async def list_cursors(self, tenant: str, namespace: str, topic: str) -> list[str]:
        """Names of the topic's cursors, sorted (empty when the topic has none)."""
        try:
            return sorted(await self._session.children(self._paths.managed_ledger(tenant, namespace, topic)))
        except NotFound:
            return []

    async def get_cursor(self, tenant: str, namespace: str, topic: str, cursor: str) -> tuple[Document | None, int]:
        """A cursor's document and version; ``(None, -1)`` when it does not exist."""
        path = self._paths.cursor(tenant, namespace, topic, cursor)
        try:
            data, stat = await self._session.get(path)
        except NotFound:
            return None, -1
        return decode(data, path), stat.version

    async def put_cursor(
        self, tenant: str, namespace: str, topic: str, cursor: str, doc: Document, version: int | None
    ) -> int:
        """Create (``version`` None) or replace a cursor at ``version``; returns the new version.

        Raises:
            MetadataVersionConflict: it exists already (create) or changed since ``version``.
            NotFound: the managed ledger (create) or the cursor (replace) does not exist.
        """
        path = self._paths.cursor(tenant, namespace, topic, cursor)
        if version is None:
            await self._session.create(path, encode(doc), makepath=False)
            return 0
        return await self.cursor_writes.set(path, encode(doc), version)

    async def delete_cursor(self, tenant: str, namespace: str, topic: str, cursor: str) -> None:
        """Delete a cursor; a cursor that does not exist is fine."""
        try:
            await self._session.delete(self._paths.cursor(tenant, namespace, topic, cursor))
        except NotFound:
            pass
