"""Every znode path Magnetar uses is spelled here, under one root (default ``/magnetar``).

::

    <root>/bookies/available/<host:port>   ephemeral, JSON info of a writable bookie
    <root>/bookies/readonly/<host:port>    ephemeral, JSON info of a read-only bookie
    <root>/ledgers/L<id, 19 digits>        ledger metadata (layout settled by the ledger issue)
    <root>/idgen/ledgers                   ledger id generator
"""

from __future__ import annotations

from magnetar.common.errors import InvalidArgument


def _check_name(kind: str, name: str) -> str:
    if not name or "/" in name or name in (".", "..") or any(ord(c) < 32 for c in name):
        raise InvalidArgument(f"invalid {kind} for a znode name: {name!r}")
    return name


class ZkPaths:
    """Builds the znode paths under one root."""

    def __init__(self, root: str = "/magnetar") -> None:
        """Args: root: absolute znode path, e.g. ``/magnetar`` (not ``/`` itself).

        Raises:
            InvalidArgument: the root is not an absolute path without a trailing slash.
        """
        if not root.startswith("/") or root == "/" or root.endswith("/") or "//" in root:
            raise InvalidArgument(f"ZooKeeper root must look like /magnetar, got {root!r}")
        for part in root[1:].split("/"):
            _check_name("root path component", part)
        self.root = root

    def bookies(self) -> str:
        """Parent of both bookie registration lists."""
        return f"{self.root}/bookies"

    def bookies_available(self) -> str:
        """Parent of writable bookies' registrations."""
        return f"{self.root}/bookies/available"

    def bookie_available(self, bookie_id: str) -> str:
        """Registration of a writable bookie."""
        return f"{self.bookies_available()}/{_check_name('bookie id', bookie_id)}"

    def bookies_readonly(self) -> str:
        """Parent of read-only bookies' registrations."""
        return f"{self.root}/bookies/readonly"

    def bookie_readonly(self, bookie_id: str) -> str:
        """Registration of a read-only bookie."""
        return f"{self.bookies_readonly()}/{_check_name('bookie id', bookie_id)}"

    def ledgers(self) -> str:
        """Parent of ledger metadata znodes."""
        return f"{self.root}/ledgers"

    def ledger(self, ledger_id: int) -> str:
        """Metadata of one ledger (zero-padded so names sort by id)."""
        if ledger_id < 0:
            raise InvalidArgument(f"ledger id must not be negative, got {ledger_id}")
        return f"{self.ledgers()}/L{ledger_id:019d}"

    def ledger_id_generator(self) -> str:
        """The znode ledger ids are drawn from."""
        return f"{self.root}/idgen/ledgers"

    def __repr__(self) -> str:
        return f"ZkPaths({self.root!r})"
