"""The ledger client: create, open (with or without recovery), read, delete ledgers.

Used by the broker and the auditor. One instance per process, sharing one ZooKeeper
session and one gRPC client per bookie.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from magnetar.common.errors import InvalidArgument, MagnetarError, NoSuchLedger
from magnetar.ledger.bookie_client import BookiePool
from magnetar.ledger.handle import LedgerHandle
from magnetar.ledger.metadata import Fragment, LedgerMetadata, check_quorums
from magnetar.ledger.placement import choose_ensemble
from magnetar.ledger.reader import LedgerReader
from magnetar.ledger.recovery import recover
from magnetar.metadata.bookies import ZkBookieRegistry
from magnetar.metadata.ledgers import ZkLedgerMetadataStore
from magnetar.metadata.session import ZkSession


@dataclass(frozen=True)
class LedgerClientConfig:
    add_timeout_s: float = 10.0
    """A bookie that has not answered an add batch by then is replaced."""
    read_timeout_s: float = 10.0
    """A read not answered by then moves on to the next replica."""
    max_entry_bytes: int = 5 * 1024 * 1024 + 64 * 1024 - 8
    """Largest payload (the bookie's limit less the 8-byte ledger header)."""
    properties: dict[str, str] = field(default_factory=dict)


class LedgerClient:
    def __init__(self, session: ZkSession, config: LedgerClientConfig | None = None) -> None:
        self.config = config or LedgerClientConfig()
        self.session = session
        self.store: ZkLedgerMetadataStore[LedgerMetadata] = ZkLedgerMetadataStore(session, LedgerMetadata.from_dict)
        self.registry = ZkBookieRegistry(session)
        self.pool = BookiePool(timeout_s=self.config.read_timeout_s)
        self.writer_id = uuid.uuid4().hex
        """Recorded in the ledgers this client creates; registered while it lives."""
        self._writer_registered = False
        self._writer_lock = asyncio.Lock()

    async def close(self) -> None:
        await self.pool.close()

    async def create_ledger(
        self, ensemble_size: int, write_quorum: int, ack_quorum: int, properties: dict[str, str] | None = None
    ) -> LedgerHandle:
        """A new open ledger on E writable bookies.

        Raises:
            InvalidArgument: quorums not E >= Qw >= Qa >= 1.
            NotEnoughBookies: fewer than E writable bookies.
        """
        check_quorums(ensemble_size, write_quorum, ack_quorum)
        ensemble = choose_ensemble(await self.registry.list_writable(), ensemble_size)
        await self._register_writer()
        metadata = LedgerMetadata(
            ensemble_size, write_quorum, ack_quorum, fragments=(Fragment(0, tuple(ensemble)),),
            properties=dict(properties or {}), writer=self.writer_id,
        )
        ledger_id, version = await self.store.create(metadata)
        return LedgerHandle(self, ledger_id, metadata, version)

    async def _register_writer(self) -> None:
        async with self._writer_lock:
            if not self._writer_registered:
                await self.store.register_writer(self.writer_id)
                self._writer_registered = True

    async def open_ledger(self, ledger_id: int, recovery: bool = True) -> LedgerReader:
        """Open for reading. With ``recovery`` (the default) an open ledger is fenced and
        closed first (its writer's later adds fail with LedgerFenced); without, it stays
        open and is readable up to its LAC.

        Raises:
            NoSuchLedger, InvalidArgument (negative id), NotEnoughBookies/RecoveryError.
        """
        if ledger_id < 0:
            raise InvalidArgument(f"ledger id must not be negative, got {ledger_id}")
        if recovery:
            metadata = await recover(self, ledger_id)
            return LedgerReader(self, ledger_id, metadata, metadata.last_entry_id)
        metadata, _ = await self.store.read(ledger_id)
        lac = metadata.last_entry_id if metadata.is_closed else await self.read_lac(ledger_id, metadata)
        return LedgerReader(self, ledger_id, metadata, lac)

    async def read_lac(self, ledger_id: int, metadata: LedgerMetadata) -> int:
        """The highest LAC the bookies of the last fragment report (entries before that
        fragment were all confirmed when it was made).

        Raises:
            MagnetarError: no bookie of the fragment answered.
        """
        last = metadata.fragments[-1]
        results = await asyncio.gather(*(self.pool.get(b).read_lac(ledger_id) for b in last.bookies), return_exceptions=True)
        answers = [r for r in results if isinstance(r, int)]
        answers += [-1 for r in results if isinstance(r, NoSuchLedger)]
        if not answers:
            raise MagnetarError(f"ledger {ledger_id}: no bookie of {', '.join(last.bookies)} answered ReadLac: {results[0]}")
        return max([last.first_entry - 1, *answers])

    async def delete_ledger(self, ledger_id: int) -> None:
        """Delete the metadata, then the data on every bookie that holds a fragment
        (bookies that are down keep theirs until the auditor's garbage collection).

        Raises:
            NoSuchLedger.
        """
        metadata, _ = await self.store.read(ledger_id)
        await self.store.delete(ledger_id)
        results = await asyncio.gather(
            *(self.pool.get(b).delete_ledger(ledger_id) for b in metadata.bookies()), return_exceptions=True
        )
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, NoSuchLedger | MagnetarError):
                raise r

    async def list_ledgers(self) -> list[int]:
        return await self.store.list()

    async def ledger_metadata(self, ledger_id: int) -> LedgerMetadata:
        return (await self.store.read(ledger_id))[0]
