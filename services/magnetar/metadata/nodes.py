"""Plain values the metadata session hands out: znode stats, session states, multi-ops."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Literal


class SessionState(enum.Enum):
    """Connection state of a ZooKeeper session, as kazoo reports it."""

    CONNECTED = "CONNECTED"
    """Connected; the session (and its ephemeral znodes) is alive."""
    SUSPENDED = "SUSPENDED"
    """Connection lost; the session may still be alive on the server."""
    LOST = "LOST"
    """The session expired: its ephemeral znodes are gone; a new one follows."""


@dataclass(frozen=True, slots=True)
class NodeStat:
    """The parts of a znode's stat that Magnetar uses."""

    version: int
    """Data version, the compare-and-set token of writes."""
    ephemeral_owner: int
    """Session id owning an ephemeral znode; 0 for a persistent one."""
    num_children: int
    data_length: int
    ctime_ms: int
    mtime_ms: int
    children_version: int = 0
    """Changes of the children list (``cversion``): a sequential child's number is taken from it."""

    @classmethod
    def from_kazoo(cls, stat: Any) -> NodeStat:
        """Convert kazoo's ``ZnodeStat``."""
        return cls(
            version=stat.version,
            ephemeral_owner=stat.ephemeralOwner,
            num_children=stat.numChildren,
            data_length=stat.dataLength,
            ctime_ms=stat.ctime,
            mtime_ms=stat.mtime,
            children_version=stat.cversion,
        )


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of an atomic multi-operation (:meth:`ZkSession.multi`)."""

    kind: Literal["create", "delete", "set", "check"]
    path: str
    data: bytes = b""
    version: int = -1
    ephemeral: bool = False

    @classmethod
    def create(cls, path: str, data: bytes = b"", *, ephemeral: bool = False) -> Op:
        """Create ``path`` (its parent must exist)."""
        return cls("create", path, data, ephemeral=ephemeral)

    @classmethod
    def delete(cls, path: str, version: int = -1) -> Op:
        """Delete ``path`` if its version is ``version`` (-1: any)."""
        return cls("delete", path, version=version)

    @classmethod
    def set(cls, path: str, data: bytes, version: int = -1) -> Op:
        """Replace ``path``'s data if its version is ``version`` (-1: any)."""
        return cls("set", path, data, version=version)

    @classmethod
    def check(cls, path: str, version: int) -> Op:
        """Fail the whole operation unless ``path`` has version ``version``."""
        return cls("check", path, version=version)

    def add_to(self, txn: Any) -> None:
        """Append this operation to a kazoo ``TransactionRequest``."""
        if self.kind == "create":
            txn.create(self.path, self.data, ephemeral=self.ephemeral)
        elif self.kind == "delete":
            txn.delete(self.path, self.version)
        elif self.kind == "set":
            txn.set_data(self.path, self.data, self.version)
        else:
            txn.check(self.path, self.version)
