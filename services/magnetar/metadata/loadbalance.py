"""The brokers' load reports in ZooKeeper (Pulsar's ``/loadbalance/brokers/<broker>``).

Each broker keeps one ephemeral znode with its report (a JSON document, Pulsar's
``LocalBrokerData`` shape): it goes with the broker's session, so only live brokers have
one. Readers keep a :class:`LoadReportCache`, refreshed when a broker comes or goes (a
children watch) and re-read every ``refresh_s``: a lookup reads the cache, never ZooKeeper.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from magnetar.common.errors import MagnetarError, NotFound
from magnetar.metadata.codec import decode, encode
from magnetar.metadata.errors import NodeExists
from magnetar.metadata.session import ZkSession

log = logging.getLogger(__name__)


class ZkLoadReportStore:
    def __init__(self, session: ZkSession) -> None:
        self._session = session
        self._paths = session.paths
        self._hooked: set[str] = set()
        self._last: dict[str, dict[str, Any]] = {}

    async def write(self, broker_id: str, report: dict[str, Any]) -> None:
        """Create or replace ``broker_id``'s report (ephemeral: it goes with the session;
        after a session expiry the last report is written again)."""
        path = self._paths.load_report(broker_id)
        data = encode(report)
        self._last[broker_id] = report
        if broker_id not in self._hooked:
            self._session.add_renewal_hook(lambda: self.write(broker_id, self._last[broker_id]))
            self._hooked.add(broker_id)
        stat = await self._session.exists(path)
        if stat is not None and not self._session.owns(stat.ephemeral_owner):
            return  # a previous run's report: it goes with that session; ours follows then
        try:
            if stat is None:
                await self._session.create(path, data, ephemeral=True, makepath=True)
            else:
                await self._session.set(path, data)
        except (NodeExists, NotFound):
            pass  # raced with our own earlier write or the old session's end: next round

    async def read(self, broker_id: str) -> dict[str, Any] | None:
        """One broker's report (None: it has none)."""
        path = self._paths.load_report(broker_id)
        try:
            data, _ = await self._session.get(path)
        except NotFound:
            return None
        return decode(data, path) if data else None

    async def read_all(self, changed: asyncio.Event | None = None) -> dict[str, dict[str, Any]]:
        """Every live broker's report by broker id; ``changed`` is set once when the set of
        brokers with a report next changes."""
        parent = self._paths.load_reports()
        try:
            if changed is None:
                names = await self._session.children(parent)
            else:
                await self._session.ensure_path(parent)
                names = await self._session.watch_children(parent, changed)
        except NotFound:
            return {}
        docs = await asyncio.gather(*(self.read(n) for n in names), return_exceptions=True)
        out: dict[str, dict[str, Any]] = {}
        for name, doc in zip(names, docs, strict=True):
            if isinstance(doc, dict):
                out[name] = doc
            elif isinstance(doc, BaseException) and not isinstance(doc, MagnetarError):
                raise doc
        return out


class LoadReportCache:
    """The live brokers' reports, kept fresh by an owned task (``start``/``close``)."""

    def __init__(
        self, store: ZkLoadReportStore, refresh_s: float,
        on_refresh: Callable[[dict[str, dict[str, Any]]], None] | None = None,
    ) -> None:
        self._store = store
        self.refresh_s = refresh_s
        self.reports: dict[str, dict[str, Any]] = {}
        """Broker id → its last report read (Pulsar's LocalBrokerData as JSON)."""
        self._on_refresh = on_refresh
        self._task: asyncio.Task[None] | None = None
        self.refreshed = asyncio.Event()
        """Set after each refresh (tests and the leader wait on it)."""

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="load-report-cache")

    async def refresh(self, changed: asyncio.Event | None = None) -> None:
        self.reports = await self._store.read_all(changed)
        if self._on_refresh is not None:
            self._on_refresh(self.reports)
        self.refreshed.set()

    async def _run(self) -> None:
        while True:
            changed = asyncio.Event()
            try:
                await self.refresh(changed)
            except MagnetarError as exc:
                log.debug("reading the load reports: %s", exc.message)
            try:
                await asyncio.wait_for(changed.wait(), self.refresh_s)
            except TimeoutError:
                pass

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
