"""Ledger metadata in ZooKeeper: ids, create, read, compare-and-set update, delete, list.

Ledger ids come from a persistent-sequential znode under ``<root>/idgen/ledgers``: the
sequence counter of the parent only grows (deleted children do not give numbers back),
so an id is never reused.

The store does not know the ledger metadata's type: the ledger client hands it the
decoder (``LedgerMetadata.from_dict``), and what it stores has a ``to_dict()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from magnetar.common.errors import MetadataVersionConflict, NoSuchLedger, NotFound
from magnetar.common.retry import RetryPolicy
from magnetar.metadata.codec import decode, encode
from magnetar.metadata.errors import NodeExists
from magnetar.metadata.session import ZkSession

_ID_PREFIX = "ID-"


class LedgerDocument(Protocol):
    """Ledger metadata as the store keeps it: a JSON document."""

    def to_dict(self) -> dict[str, Any]: ...


M = TypeVar("M", bound=LedgerDocument)


class ZkLedgerMetadataStore(Generic[M]):
    def __init__(self, session: ZkSession, decode: Callable[[dict[str, Any]], M]) -> None:
        """Args: decode: turns a stored document back into metadata (may raise on a bad one)."""
        self._session = session
        self._paths = session.paths
        self._decode = decode

    async def new_ledger_id(self) -> int:
        base = self._paths.ledger_id_generator()
        path = await self._session.create(f"{base}/{_ID_PREFIX}", sequential=True, makepath=True)
        try:
            await self._session.delete(path)
        except NotFound:
            pass
        return int(path.rsplit(_ID_PREFIX, 1)[1])

    async def id_bound(self) -> int:
        """Every ledger id issued so far is below this (0: none was ever issued here).

        A sequential child's number is its parent's children version when it was created,
        and that version only grows, so it bounds the ids handed out. A bookie's garbage
        collector leaves ledgers at or above it alone: they were never created in this
        metadata (a wrong root, or ``bookiesanity``'s ids from 2^62 up)."""
        stat = await self._session.exists(self._paths.ledger_id_generator())
        return 0 if stat is None else stat.children_version

    async def create(self, metadata: M) -> tuple[int, int]:
        """Store metadata under a fresh ledger id; returns (ledger id, version)."""
        ledger_id = await self.new_ledger_id()
        await self._session.create(self._paths.ledger(ledger_id), encode(metadata.to_dict()), makepath=True)
        return ledger_id, 0

    async def read(self, ledger_id: int) -> tuple[M, int]:
        """Raises NoSuchLedger."""
        try:
            data, stat = await self._session.get(self._paths.ledger(ledger_id))
        except NotFound as exc:
            raise NoSuchLedger(ledger_id) from exc
        return self._decode(decode(data, self._paths.ledger(ledger_id))), stat.version

    async def write(self, ledger_id: int, metadata: M, version: int) -> int:
        """Replace the metadata if it is still at ``version``; returns the new version.

        Raises:
            MetadataVersionConflict: somebody else changed it first.
            NoSuchLedger: it was deleted.
        """
        try:
            stat = await self._session.set(self._paths.ledger(ledger_id), encode(metadata.to_dict()), version)
        except NotFound as exc:
            raise NoSuchLedger(ledger_id) from exc
        return stat.version

    async def update(
        self, ledger_id: int, fn: Callable[[M], M], max_attempts: int = 10
    ) -> tuple[M, int]:
        """Read, apply ``fn`` (pure; may raise to abort), compare-and-set; retried at once
        on a conflict, up to ``max_attempts`` tries."""
        async for _ in RetryPolicy(max_tries=max_attempts, delay_s=0.0).attempts():
            current, version = await self.read(ledger_id)
            updated = fn(current)
            if updated == current:
                return current, version
            try:
                return updated, await self.write(ledger_id, updated, version)
            except MetadataVersionConflict:
                continue
        raise MetadataVersionConflict(f"ledger {ledger_id}: metadata kept changing; gave up after {max_attempts} attempts")

    async def delete(self, ledger_id: int) -> None:
        """Raises NoSuchLedger."""
        try:
            await self._session.delete(self._paths.ledger(ledger_id))
        except NotFound as exc:
            raise NoSuchLedger(ledger_id) from exc

    async def register_writer(self, writer_id: str) -> None:
        """Publish ``writer_id`` as a live ledger writer (ephemeral; re-created after a
        session expiry). The auditor leaves the open ledgers of a live writer alone."""
        path = self._paths.ledger_writer(writer_id)

        async def publish() -> None:
            try:
                await self._session.create(path, b"", ephemeral=True, makepath=True)
            except NodeExists:
                pass

        await publish()
        self._session.add_renewal_hook(publish)

    async def writer_alive(self, writer_id: str) -> bool:
        """True while the ledger client ``writer_id`` holds its registration."""
        return await self._session.exists(self._paths.ledger_writer(writer_id)) is not None

    async def list(self) -> list[int]:
        try:
            names = await self._session.children(self._paths.ledgers())
        except NotFound:
            return []
        return sorted(int(n[1:]) for n in names if n.startswith("L") and n[1:].isdigit())
