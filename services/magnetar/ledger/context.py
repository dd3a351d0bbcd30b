"""What a ledger handle, recovery and a reader work with: the client's config and the
bookies, bookie registry and metadata store, each seen through the few calls they make.

``LedgerClient`` builds the one :class:`ClientContext` of a process from its ZooKeeper
stores and bookie pool; tests build one from in-memory twins.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from magnetar.ledger.addbatcher import AddBatchers
from magnetar.ledger.metadata import LedgerMetadata

if TYPE_CHECKING:  # types only: the context imports no transport
    from magnetar.ledger.bookie_client import AddFailure, Entry
    from magnetar.proto.v1 import bookie_pb2 as pb


@dataclass(frozen=True)
class LedgerClientConfig:
    add_timeout_s: float = 10.0
    """A bookie that has not answered an add batch by then is replaced."""
    read_timeout_s: float = 10.0
    """A read not answered by then moves on to the next replica."""
    max_entry_bytes: int = 5 * 1024 * 1024 + 64 * 1024 - 8
    """Largest payload (the bookie's limit less the 8-byte ledger header)."""
    properties: dict[str, str] = field(default_factory=dict)
    auth_token: str | None = None
    """The token presented to bookies with authentication on (a superuser role's)."""


class BookieConnection(Protocol):
    """One bookie (``BookieClient``): pipelined adds, reads, fencing."""

    async def send_add_request(self, request: pb.AddRequest) -> asyncio.Future[list[AddFailure]]: ...

    async def send_add(self, entries: Sequence[Entry], recovery: bool = False) -> asyncio.Future[list[AddFailure]]: ...

    async def read_entry(self, ledger_id: int, entry_id: int, fence: bool = False) -> Entry: ...

    async def read_entry_list(self, ledger_id: int, entry_ids: Sequence[int]) -> list[Entry]: ...

    async def read_lac(self, ledger_id: int) -> int: ...

    async def fence(self, ledger_id: int) -> int: ...


class BookieConnections(Protocol):
    """A connection per bookie address (``BookiePool``)."""

    def get(self, address: str) -> BookieConnection: ...


class BookieRegistry(Protocol):
    """The bookies available for new fragments (``ZkBookieRegistry``)."""

    async def list_writable(self) -> list[str]: ...


class LedgerMetadataStore(Protocol):
    """Versioned ledger metadata (``ZkLedgerMetadataStore``)."""

    async def read(self, ledger_id: int) -> tuple[LedgerMetadata, int]: ...

    async def write(self, ledger_id: int, metadata: LedgerMetadata, version: int) -> int: ...

    async def update(
        self, ledger_id: int, fn: Callable[[LedgerMetadata], LedgerMetadata]
    ) -> tuple[LedgerMetadata, int]: ...


@dataclass(frozen=True)
class ClientContext:
    """The config, bookies, registry and metadata store shared by a client's ledgers."""

    config: LedgerClientConfig
    pool: BookieConnections
    registry: BookieRegistry
    store: LedgerMetadataStore
    adds: AddBatchers = field(init=False, compare=False, repr=False)
    """Adds to each bookie, gathered across every ledger of this client (``addbatcher.py``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "adds", AddBatchers(self))
