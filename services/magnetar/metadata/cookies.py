"""Bookie cookies in ZooKeeper: ``<root>/cookies/<bookie id>`` (BookKeeper's ``/ledgers/cookies``).

A bookie keeps its cookie in its journal and data directories and, here, in ZooKeeper, so
that a bookie whose volumes came back empty is found at start: its directories no longer
carry the cookie ZooKeeper holds for its id. The store knows nothing of the cookie's
fields: it keeps the JSON document the bookie hands it, versioned like any znode.
"""

from __future__ import annotations

from typing import Any

from magnetar.common.errors import NotFound
from magnetar.metadata.bookies import check_bookie_id
from magnetar.metadata.codec import decode, encode
from magnetar.metadata.session import ZkSession


class ZkCookieStore:
    """Reads, creates and deletes bookies' registered cookies."""

    def __init__(self, session: ZkSession) -> None:
        self._session = session
        self._paths = session.paths

    async def read(self, bookie_id: str) -> tuple[dict[str, Any], int] | None:
        """The registered cookie of ``bookie_id`` and its version; None if it has none."""
        path = self._paths.cookie(check_bookie_id(bookie_id))
        try:
            data, stat = await self._session.get(path)
        except NotFound:
            return None
        return decode(data, path), stat.version

    async def create(self, bookie_id: str, cookie: dict[str, Any]) -> int:
        """Register the cookie of ``bookie_id``; returns its version (0).

        Raises:
            NodeExists: (a MetadataVersionConflict) the bookie has a registered cookie already.
        """
        await self._session.create(self._paths.cookie(check_bookie_id(bookie_id)), encode(cookie), makepath=True)
        return 0

    async def delete(self, bookie_id: str, version: int = -1) -> None:
        """Retire the registered cookie of ``bookie_id`` (at ``version``; -1: any).

        Raises:
            NotFound: the bookie has no registered cookie.
            MetadataVersionConflict: it changed since ``version``.
        """
        await self._session.delete(self._paths.cookie(check_bookie_id(bookie_id)), version)

    async def list(self) -> list[str]:
        """Ids of the bookies with a registered cookie, sorted."""
        try:
            return sorted(await self._session.children(self._paths.cookies()))
        except NotFound:
            return []
