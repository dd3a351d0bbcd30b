"""The ledger client: create, open (with or without recovery), read, delete ledgers.

Used by the broker and the auditor. One instance per process, sharing one ZooKeeper
session and one gRPC client per bookie.
"""

from __future__ import annotations

import asyncio
import uuid

from magnetar.common.errors import InvalidArgument, MagnetarError, NoSuchLedger
from magnetar.common.tls import ClientTls
from magnetar.ledger.bookie_client import BookiePool
from magnetar.ledger.context import ClientContext, LedgerClientConfig
from magnetar.ledger.handle import LedgerHandle
from magnetar.ledger.metadata import Fragment, LedgerMetadata, check_quorums
from magnetar.ledger.placement import choose_ensemble
from magnetar.ledger.reader import LedgerReader, read_lac
from magnetar.ledger.recovery import recover
from magnetar.metadata.bookies import ZkBookieRegistry
from magnetar.metadata.ledgers import ZkLedgerMetadataStore
from magnetar.metadata.session import ZkSession


class LedgerClient:
    def __init__(
        self, session: ZkSession, config: LedgerClientConfig | None = None, tls: ClientTls | None = None
    ) -> None:
        """Args: tls: how bookies are called (None: plain text)."""
        self.config = config or LedgerClientConfig()
        self.session = session
        self.store: ZkLedgerMetadataStore[LedgerMetadata] = ZkLedgerMetadataStore(session, LedgerMetadata.from_dict)
        self.registry = ZkBookieRegistry(session)
        self.pool = BookiePool(timeout_s=self.config.read_timeout_s, tls=tls, token=self.config.auth_token)
        self.context = ClientContext(self.config, self.pool, self.registry, self.store)
        """What the handles, recovery and readers of this client work with."""
        self.writer_id = uuid.uuid4().hex
        """Recorded in the ledgers this client creates; registered while it lives."""
        self._writer_registered = False
        self._writer_lock = asyncio.Lock()

    async def close(self) -> None:
        await self.context.adds.close()
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
        return LedgerHandle(self.context, ledger_id, metadata, version)

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
            metadata = await recover(self.context, ledger_id)
            return LedgerReader(self.context, ledger_id, metadata, metadata.last_entry_id)
        metadata, _ = await self.store.read(ledger_id)
        lac = metadata.last_entry_id if metadata.is_closed else await self.read_lac(ledger_id, metadata)
        return LedgerReader(self.context, ledger_id, metadata, lac)

    async def read_lac(self, ledger_id: int, metadata: LedgerMetadata) -> int:
        """The highest LAC the bookies of the last fragment report (see :func:`.reader.read_lac`)."""
        return await read_lac(self.context, ledger_id, metadata)

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
