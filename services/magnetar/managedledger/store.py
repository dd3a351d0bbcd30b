"""What the managed ledger needs from its metadata store (``ZkManagedLedgerStore``)."""

from __future__ import annotations

from typing import Any, Protocol

Document = dict[str, Any]


class ManagedLedgerStore(Protocol):
    """Versioned ledger-list and cursor documents (see ``metadata/managed_ledgers.py``)."""

    async def get(self, tenant: str, namespace: str, topic: str) -> tuple[Document | None, int]: ...

    async def create(self, tenant: str, namespace: str, topic: str, doc: Document) -> int: ...

    async def update(self, tenant: str, namespace: str, topic: str, doc: Document, version: int) -> int: ...

    async def delete(self, tenant: str, namespace: str, topic: str) -> None: ...

    async def list_cursors(self, tenant: str, namespace: str, topic: str) -> list[str]: ...

    async def get_cursor(
        self, tenant: str, namespace: str, topic: str, cursor: str
    ) -> tuple[Document | None, int]: ...

    async def put_cursor(
        self, tenant: str, namespace: str, topic: str, cursor: str, doc: Document, version: int | None
    ) -> int: ...

    async def delete_cursor(self, tenant: str, namespace: str, topic: str, cursor: str) -> None: ...
