"""Leader election over kazoo's ``Election`` recipe, for asyncio services.

Kazoo's recipe blocks a thread while it waits for the lock and while the leader
function runs, so each contender runs it in its own thread; that thread only tells
the event loop "elected" and then waits to be released. Leadership ends when the
leader coroutine returns or raises, when the contender is closed, and as soon as the
ZooKeeper connection is SUSPENDED or LOST: a leader that cannot see ZooKeeper cannot
know whether its session (and with it the election lock) still lives, and after the
session timeout another replica is elected. The contender then joins the election
again.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from kazoo.recipe.election import Election

from magnetar.common.errors import MagnetarError, NotFound
from magnetar.metadata.bridge import call_soon
from magnetar.metadata.nodes import SessionState
from magnetar.metadata.session import ZkSession

log = logging.getLogger(__name__)

Lead = Callable[[], Awaitable[None]]


class LeaderElection:
    """One contender: ``await run(lead)`` contends until :meth:`close`."""

    def __init__(self, session: ZkSession, path: str, identifier: str) -> None:
        self._session = session
        self._path = path
        self.identifier = identifier
        self._closed = False
        self._election: Election | None = None
        self._release = threading.Event()
        self.is_leader = False

    async def run(self, lead: Lead) -> None:
        """Contend; each time elected, run ``lead()`` until leadership ends; until closed."""
        loop = asyncio.get_running_loop()
        while not self._closed:
            try:
                await self._remove_own_nodes()
            except MagnetarError as exc:  # ZooKeeper unreachable: keep trying, never give up
                log.warning("leader election at %s: %s; trying again", self._path, exc.message)
                await asyncio.sleep(1.0)
                continue
            elected = asyncio.Event()
            finished: asyncio.Future[None] = loop.create_future()
            self._release = release = threading.Event()
            self._election = election = Election(
                self._session._require_client(), self._path, self.identifier
            )

            def leader_fn(
                elected: asyncio.Event = elected, release: threading.Event = release
            ) -> None:
                call_soon(loop, elected.set)
                release.wait()

            def contend(
                election: Election = election, finished: asyncio.Future[None] = finished
            ) -> None:
                try:
                    election.run(leader_fn)
                    call_soon(loop, _settle, finished, None)
                except Exception as exc:  # the session went away while contending
                    call_soon(loop, _settle, finished, exc)

            threading.Thread(target=contend, name="auditor-election", daemon=True).start()
            elected_wait: asyncio.Future[Any] = asyncio.ensure_future(elected.wait())
            try:
                waits: set[asyncio.Future[Any]] = {elected_wait, finished}
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if elected.is_set():
                    await self._lead(lead)
            finally:
                elected_wait.cancel()
                release.set()
                if not finished.done():
                    election.cancel()
            try:
                await finished
            except Exception as exc:
                log.warning("leader election at %s: %s; contending again", self._path, exc)
                await asyncio.sleep(0.5)

    async def _remove_own_nodes(self) -> None:
        """Delete lock nodes this session left behind (a release that failed while the
        connection was down): contending again behind our own node would block everyone."""
        try:
            names = await self._session.children(self._path)
        except NotFound:
            return
        for name in names:
            await self._session.delete_if_owned(f"{self._path}/{name}")

    async def _lead(self, lead: Lead) -> None:
        task = asyncio.ensure_future(lead())
        lost = asyncio.Event()

        def on_state(state: SessionState) -> None:
            if state is not SessionState.CONNECTED:
                lost.set()

        self._session.add_state_listener(on_state)
        self.is_leader = True
        log.info("%s is the leader (%s)", self.identifier, self._path)
        lost_wait = asyncio.ensure_future(lost.wait())
        try:
            await asyncio.wait({task, lost_wait}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.is_leader = False
            self._session.remove_state_listener(on_state)
            lost_wait.cancel()
            task.cancel()
            results = await asyncio.gather(task, return_exceptions=True)
        if lost.is_set():
            log.warning(
                "%s: ZooKeeper connection %s; giving up leadership",
                self.identifier,
                self._session.state.value,
            )
        elif isinstance(results[0], Exception):
            log.error(
                "leader duties of %s failed: %r; contending again", self.identifier, results[0]
            )

    async def leader(self) -> str | None:
        """The current leader's identifier (None: nobody is elected)."""
        return await leader_of(self._session, self._path)

    async def close(self) -> None:
        """Stop contending (resigning if leader)."""
        self._closed = True
        if self._election is not None:
            self._election.cancel()
        self._release.set()


async def leader_of(session: ZkSession, path: str) -> str | None:
    """The identifier of the leader of the election at ``path`` (None: no contender)."""
    election = Election(session._require_client(), path)
    contenders = await asyncio.to_thread(election.contenders)
    return str(contenders[0]) if contenders else None


def _settle(future: asyncio.Future[None], exc: Exception | None) -> None:
    if future.done():
        return
    if exc is None:
        future.set_result(None)
    else:
        future.set_exception(exc)
