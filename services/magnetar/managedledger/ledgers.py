"""What the managed ledger needs from the ledger client (``LedgerClient``) and its handles."""

from __future__ import annotations

import asyncio
from typing import Protocol

from magnetar.ledger.context import LedgerClientConfig
from magnetar.ledger.metadata import LedgerMetadata
from magnetar.ledger.reader import LedgerEntry


class ReadHandle(Protocol):
    """A ledger opened for reading (``LedgerReader``)."""

    @property
    def ledger_id(self) -> int: ...

    @property
    def metadata(self) -> LedgerMetadata: ...

    async def read(self, first: int, last: int) -> list[LedgerEntry]: ...


class WriteHandle(ReadHandle, Protocol):
    """The open ledger this broker writes (``LedgerHandle``); it reads its confirmed entries."""

    def add_entry(self, payload: bytes) -> asyncio.Future[int]: ...

    async def close(self) -> LedgerMetadata: ...

    async def abort(self, drain: bool = False) -> None: ...


class Ledgers(Protocol):
    """Creating, opening and deleting ledgers."""

    @property
    def config(self) -> LedgerClientConfig: ...

    async def create_ledger(
        self, ensemble_size: int, write_quorum: int, ack_quorum: int, properties: dict[str, str] | None = None
    ) -> WriteHandle: ...

    async def open_ledger(self, ledger_id: int, recovery: bool = True) -> ReadHandle: ...

    async def delete_ledger(self, ledger_id: int) -> None: ...
