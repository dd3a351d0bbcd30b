"""Bookie registrations: ephemeral znodes under ``<root>/bookies/{available,readonly}``.

A bookie is listed while its ZooKeeper session lives. Like BookKeeper, a bookie that
restarts quickly after a crash finds its old registration still held by the dead
session, and waits for it to expire rather than take it over (it might belong to
another live bookie configured with the same address). After the bookie's own
session expires, the registry re-creates its registrations in the new session.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from magnetar.common.errors import InvalidArgument, MetadataVersionConflict, NotFound
from magnetar.common.netutil import split_host_port
from magnetar.metadata.codec import decode, encode
from magnetar.metadata.errors import NodeExists
from magnetar.metadata.nodes import Op
from magnetar.metadata.session import ZkSession

log = logging.getLogger(__name__)


def check_bookie_id(bookie_id: str) -> str:
    """Return ``bookie_id`` if it is ``host:port``.

    Raises:
        InvalidArgument: it is not.
    """
    try:
        split_host_port(bookie_id)
    except ValueError as exc:
        raise InvalidArgument(f"a bookie id is host:port, got {bookie_id!r}") from exc
    if "/" in bookie_id:
        raise InvalidArgument(f"a bookie id is host:port, got {bookie_id!r}")
    return bookie_id


@dataclass
class _Registration:
    info: dict[str, Any]
    read_only: bool


class ZkBookieRegistry:
    """Registers bookies and lists the registered ones."""

    def __init__(self, session: ZkSession, *, stale_wait_s: float | None = None) -> None:
        """Args:
        session: a started session.
        stale_wait_s: how long :meth:`register` waits for a registration held by
            another (normally dead) session to expire; default twice the session
            timeout plus 5 s.
        """
        self._session = session
        self._paths = session.paths
        self._stale_wait_s = (
            stale_wait_s if stale_wait_s is not None else 2 * session.session_timeout_s + 5
        )
        self._registrations: dict[str, _Registration] = {}
        self._lock = asyncio.Lock()
        self._hooked = False

    def _path(self, bookie_id: str, read_only: bool) -> str:
        if read_only:
            return self._paths.bookie_readonly(bookie_id)
        return self._paths.bookie_available(bookie_id)

    async def register(self, bookie_id: str, info: dict[str, Any], read_only: bool = False) -> None:
        """Publish ``bookie_id`` as writable (or read-only) with ``info``; kept across expiry.

        Registering an id again replaces its info and mode.

        Raises:
            InvalidArgument: bad id, or ``info`` is not JSON.
            NodeExists: another session holds the registration and it did not expire
                within ``stale_wait_s`` (is another bookie using this address?).
        """
        check_bookie_id(bookie_id)
        encode(info)
        async with self._lock:
            if not self._hooked:
                self._session.add_renewal_hook(self._register_again)
                self._hooked = True
            await self._publish(bookie_id, dict(info), read_only)
            self._registrations[bookie_id] = _Registration(dict(info), read_only)

    async def set_read_only(self, bookie_id: str, read_only: bool) -> None:
        """Move this process's registration of ``bookie_id`` to the read-only list or back.

        Raises:
            NotFound: ``bookie_id`` was not registered through this registry.
        """
        async with self._lock:
            reg = self._registrations.get(bookie_id)
            if reg is None:
                raise NotFound(f"bookie {bookie_id} is not registered by this process")
            if reg.read_only == read_only:
                return
            old, new = self._path(bookie_id, reg.read_only), self._path(bookie_id, read_only)
            stat = await self._session.exists(old)
            moved = False
            if stat is not None and stat.ephemeral_owner == self._session.session_id:
                await self._session.ensure_path(new.rsplit("/", 1)[0])
                try:
                    await self._session.multi(
                        [
                            Op.delete(old, stat.version),
                            Op.create(new, encode(reg.info), ephemeral=True),
                        ]
                    )
                    moved = True
                except (NotFound, MetadataVersionConflict):
                    pass  # changed meanwhile: the general path below sorts it out
            if not moved:
                await self._publish(bookie_id, reg.info, read_only)
            reg.read_only = read_only

    async def unregister(self, bookie_id: str) -> None:
        """Remove this process's registration of ``bookie_id`` (no-op if there is none)."""
        async with self._lock:
            self._registrations.pop(bookie_id, None)
            for read_only in (False, True):
                await self._session.delete_if_owned(self._path(bookie_id, read_only))

    async def list_writable(self) -> list[str]:
        """Ids of the bookies registered as writable, sorted."""
        return await self._list(self._paths.bookies_available())

    async def list_read_only(self) -> list[str]:
        """Ids of the bookies registered as read-only, sorted."""
        return await self._list(self._paths.bookies_readonly())

    async def watch_registered(self, changed: asyncio.Event) -> set[str]:
        """Every registered bookie, writable or read-only; ``changed`` is set once when
        either list next changes."""
        found: set[str] = set()
        for parent in (self._paths.bookies_available(), self._paths.bookies_readonly()):
            await self._session.ensure_path(parent)
            found |= set(await self._session.watch_children(parent, changed))
        return found

    async def get_info(self, bookie_id: str) -> dict[str, Any] | None:
        """The info a registered bookie published, None if it is not registered."""
        for read_only in (False, True):
            path = self._path(bookie_id, read_only)
            try:
                data, _ = await self._session.get(path)
            except NotFound:
                continue
            return decode(data, path)
        return None

    async def _list(self, parent: str) -> list[str]:
        try:
            return sorted(await self._session.children(parent))
        except NotFound:
            return []

    async def _register_again(self) -> None:
        async with self._lock:
            for bookie_id, reg in list(self._registrations.items()):
                await self._publish(bookie_id, reg.info, reg.read_only)
                log.info("bookie %s registered again in the new ZooKeeper session", bookie_id)

    async def _publish(self, bookie_id: str, info: dict[str, Any], read_only: bool) -> None:
        """Create the registration in the current session, waiting out a stale one."""
        session = self._session
        target = self._path(bookie_id, read_only)
        await self._session.delete_if_owned(self._path(bookie_id, not read_only))
        data = encode(info)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._stale_wait_s
        while True:
            try:
                await session.create(target, data, ephemeral=True, makepath=True)
                return
            except NodeExists:
                pass
            stat = await session.exists(target)
            if stat is None:
                continue
            owner = stat.ephemeral_owner
            if owner == session.session_id:
                await session.set(target, data, version=stat.version)
                return
            if session.owns(owner):
                await self._session.delete_if_owned(target)
                continue
            if owner == 0:
                raise NodeExists(
                    f"{target} is a persistent znode, not a bookie registration: delete it"
                )
            log.warning(
                "bookie %s is still registered by an earlier ZooKeeper session 0x%x; "
                "waiting for it to expire",
                bookie_id,
                owner,
            )
            remaining = deadline - loop.time()
            if remaining <= 0 or not await session.wait_gone(target, remaining):
                raise NodeExists(
                    f"bookie {bookie_id} is already registered at {target} by another "
                    f"ZooKeeper session (0x{owner:x}) that did not expire within "
                    f"{self._stale_wait_s:g} s: is another bookie running with this address?"
                )
