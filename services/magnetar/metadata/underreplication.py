"""Under-replication markers and replication locks in ZooKeeper (the auditor's state).

A marker ``<root>/underreplication/ledgers/L<id>`` is persistent: it says which bookies a
ledger is missing, and stays until a replication worker has brought every fragment
back to Qw live copies. Marking again merges the bookies into the marker. Clearing
is a compare-and-set on the version the worker read, so a bookie added while it
worked is not lost.

A lock ``<root>/underreplication/locks/L<id>`` is ephemeral: the replica that holds it
is the only one replicating that ledger; if it dies, the lock goes with its session.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from magnetar.common.errors import MetadataVersionConflict, NotFound
from magnetar.metadata.codec import decode, encode
from magnetar.metadata.errors import NodeExists
from magnetar.metadata.session import ZkSession


@dataclass(frozen=True)
class UnderReplicated:
    ledger_id: int
    missing: tuple[str, ...]
    """The bookies whose copies of the ledger's fragments are gone, sorted."""
    marked_at_ms: int
    """When the ledger was first marked."""
    version: int
    """The marker's znode version (for :meth:`ZkUnderReplicationStore.clear`)."""


class ZkUnderReplicationStore:
    def __init__(self, session: ZkSession) -> None:
        self._session = session
        self._paths = session.paths

    async def mark(self, ledger_id: int, bookies: set[str] | frozenset[str]) -> bool:
        """Mark ``ledger_id`` as missing ``bookies`` (merged into an existing marker).

        Returns True when the marker was created or grew.
        """
        path = self._paths.under_replicated_ledger(ledger_id)
        while True:
            try:
                data, stat = await self._session.get(path)
            except NotFound:
                new = {"missing": sorted(bookies), "marked_at_ms": int(time.time() * 1000)}
                try:
                    await self._session.create(path, encode(new), makepath=True)
                    return True
                except NodeExists:
                    continue
            doc = decode(data, path)
            have = set(doc.get("missing", []))
            if bookies <= have:
                return False
            doc["missing"] = sorted(have | bookies)
            try:
                await self._session.set(path, encode(doc), stat.version)
                return True
            except (MetadataVersionConflict, NotFound):
                continue

    async def get(self, ledger_id: int) -> UnderReplicated | None:
        path = self._paths.under_replicated_ledger(ledger_id)
        try:
            data, stat = await self._session.get(path)
        except NotFound:
            return None
        return _marker(ledger_id, decode(data, path), stat.version)

    async def list_ids(self) -> list[int]:
        """Ids of the marked ledgers, ascending."""
        try:
            names = await self._session.children(self._paths.under_replicated_ledgers())
        except NotFound:
            return []
        return sorted(int(n[1:]) for n in names if n.startswith("L") and n[1:].isdigit())

    async def list(self) -> list[UnderReplicated]:
        """Every marker, by ledger id (markers cleared meanwhile are left out)."""
        found = []
        for ledger_id in await self.list_ids():
            marker = await self.get(ledger_id)
            if marker is not None:
                found.append(marker)
        return found

    async def clear(self, marker: UnderReplicated) -> bool:
        """Delete the marker if it is still at ``marker.version``; False if it changed."""
        try:
            await self._session.delete(
                self._paths.under_replicated_ledger(marker.ledger_id), marker.version
            )
        except NotFound:
            return True
        except MetadataVersionConflict:
            return False
        return True

    async def try_lock(self, ledger_id: int, owner: str) -> bool:
        """Take the ephemeral replication lock of ``ledger_id``; False if somebody holds it."""
        try:
            await self._session.create(
                self._paths.replication_lock(ledger_id),
                encode({"owner": owner}),
                ephemeral=True,
                makepath=True,
            )
        except NodeExists:
            return False
        return True

    async def unlock(self, ledger_id: int) -> None:
        """Release a lock this session holds (no-op when it is gone)."""
        await self._session.delete_if_owned(self._paths.replication_lock(ledger_id))

    async def lock_owner(self, ledger_id: int) -> str | None:
        """Who replicates ``ledger_id`` right now (None: nobody)."""
        path = self._paths.replication_lock(ledger_id)
        try:
            data, _ = await self._session.get(path)
        except NotFound:
            return None
        return str(decode(data, path).get("owner", ""))

    async def record_audit(self, doc: dict[str, Any]) -> None:
        """Store the summary of the periodic check that just ended."""
        path = self._paths.last_audit()
        try:
            await self._session.set(path, encode(doc))
        except NotFound:
            try:
                await self._session.create(path, encode(doc), makepath=True)
            except NodeExists:
                await self._session.set(path, encode(doc))

    async def last_audit(self) -> dict[str, Any] | None:
        path = self._paths.last_audit()
        try:
            data, _ = await self._session.get(path)
        except NotFound:
            return None
        return decode(data, path)


def _marker(ledger_id: int, doc: dict[str, Any], version: int) -> UnderReplicated:
    return UnderReplicated(
        ledger_id,
        tuple(sorted(str(b) for b in doc.get("missing", []))),
        int(doc.get("marked_at_ms", 0)),
        version,
    )
