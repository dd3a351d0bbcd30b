"""One ZooKeeper session for an asyncio service, over kazoo.

Every call uses kazoo's ``*_async`` API; its completion, which runs on a kazoo thread,
is handed to the event loop with ``loop.call_soon_threadsafe``, so no call blocks the
loop or holds an executor thread. Kazoo errors become Magnetar errors
(:mod:`magnetar.metadata.errors`). After the session expires, kazoo connects again
with a new session and the session-renewed hooks run (ephemeral znodes are re-created
there).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import RolledBackError
from kazoo.retry import KazooRetry

from magnetar.common.errors import (
    MagnetarError,
    MetadataVersionConflict,
    NotConnected,
    NotFound,
    Timeout,
)
from magnetar.common.tasks import BackgroundTasks
from magnetar.metadata.bridge import call_soon, wait_result
from magnetar.metadata.errors import MetadataTooLarge, is_connection_error, translate
from magnetar.metadata.nodes import NodeStat, Op, SessionState
from magnetar.metadata.paths import ZkPaths

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 128
"""Requests of one session waiting for ZooKeeper's answer at once; more wait their turn
on the event loop. Kazoo wakes its connection thread with one byte per request on a
socket pair: a burst of thousands would fill that socket's buffer, and the next request
would then block the event loop until the thread caught up (seconds, under load)."""

MAX_REQUEST_BYTES = 0xFFFFF
"""ZooKeeper's ``jute.maxbuffer`` default (1 MB less one byte), which our servers keep: a
request longer than that makes the server close the whole session."""
OP_OVERHEAD_BYTES = 256
"""What one operation adds to its path and data (headers, lengths, version, ACL), bounded
from above."""


def check_request_size(op: str, paths: Sequence[str], data: Sequence[bytes]) -> None:
    """Refuse a request that ZooKeeper would not take.

    Raises:
        MetadataTooLarge: its paths and data would pass :data:`MAX_REQUEST_BYTES`.
    """
    size = OP_OVERHEAD_BYTES * (len(paths) + 1) + sum(len(p.encode()) for p in paths) + sum(map(len, data))
    if size > MAX_REQUEST_BYTES:
        where = paths[0][:200] + (f" and {len(paths) - 1} more" if len(paths) > 1 else "")
        raise MetadataTooLarge(
            f"ZooKeeper {op} of {where} would be about {size:,} bytes, over ZooKeeper's limit of "
            f"{MAX_REQUEST_BYTES:,} (jute.maxbuffer): nothing was written; make the names or values shorter"
        )


StateListener = Callable[[SessionState], None]
RenewalHook = Callable[[], Awaitable[None]]


class ZkSession:
    """A kazoo client bound to one event loop and one metadata root."""

    def __init__(
        self,
        connect: str,
        root: str = "/magnetar",
        session_timeout_s: float = 10.0,
        *,
        op_timeout_s: float = 30.0,
    ) -> None:
        """Args:
        connect: ZooKeeper connect string ``host:port[,host:port…]``.
        root: the root znode all paths live under (created by :meth:`start`).
        session_timeout_s: requested session timeout; ephemeral znodes of a crashed
            process vanish this long after it stopped answering.
        op_timeout_s: longest wait for one operation's answer.
        """
        self.connect = connect
        self.paths = ZkPaths(root)
        self.session_timeout_s = session_timeout_s
        self.op_timeout_s = op_timeout_s
        self._client: KazooClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._stopping = False
        self._deadlines: set[asyncio.Timeout] = set()  # of the calls waiting for an answer
        self._state = SessionState.SUSPENDED
        self._lost = False
        self._generation = 0
        self._session_ids: set[int] = set()
        self._listeners: list[StateListener] = []
        self._hooks: list[RenewalHook] = []
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        self._tasks = BackgroundTasks("ZooKeeper session")

    # -- lifecycle ---------------------------------------------------------------

    async def start(self, timeout_s: float = 30.0) -> None:
        """Connect and make sure the root znode exists.

        Raises:
            NotConnected: ZooKeeper could not be reached within ``timeout_s``.
        """
        if self._client is not None or self._closed:
            raise NotConnected("a ZkSession can be started only once")
        self._loop = asyncio.get_running_loop()
        client = KazooClient(
            hosts=self.connect,
            timeout=self.session_timeout_s,
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=2.0),
        )
        client.add_listener(lambda state: self._on_kazoo_state(client, state))
        try:
            await asyncio.to_thread(client.start, timeout_s)
        except Exception as exc:
            await asyncio.to_thread(client.stop)
            client.close()
            raise NotConnected(
                f"could not connect to ZooKeeper at {self.connect} within {timeout_s:g} s "
                f"({type(exc).__name__}: {exc}); check that ZooKeeper is running and "
                "reachable at that address and that the zookeeper setting is right"
            ) from exc
        self._client = client
        try:
            await self.ensure_path(self.paths.root)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Cancel hooks in progress and close the session (its ephemeral znodes go)."""
        if self._closed:
            return
        self._closed = True
        await self._tasks.close()
        client, self._client = self._client, None
        if client is not None:
            await asyncio.to_thread(client.stop)
            client.close()

    def stopping(self) -> None:
        """The service is stopping: from now on a call made while ZooKeeper is unreachable
        fails at once with :class:`NotConnected` instead of waiting up to ``op_timeout_s``
        for a reconnection, and so do calls waiting already, so a stop with ZooKeeper gone
        stays prompt. (What the stop wanted to store is then left as after a crash, which
        the next owner recovers.)"""
        self._stopping = True
        self._give_up_if_stopping()

    def _unreachable_while_stopping(self) -> bool:
        return self._stopping and self._state is not SessionState.CONNECTED

    def _give_up_if_stopping(self) -> None:
        if self._unreachable_while_stopping() and self._loop is not None:
            now = self._loop.time()
            for deadline in list(self._deadlines):
                deadline.reschedule(now)

    async def __aenter__(self) -> ZkSession:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def state(self) -> SessionState:
        """The last state kazoo reported."""
        return self._state

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """The current (session id, password), None when not connected."""
        return self._client.client_id if self._client else None

    @property
    def session_id(self) -> int | None:
        """The current session id, None when not connected."""
        client_id = self.client_id
        return client_id[0] if client_id else None

    def owns(self, ephemeral_owner: int) -> bool:
        """True when ``ephemeral_owner`` is this session or one of its expired predecessors."""
        return ephemeral_owner != 0 and ephemeral_owner in self._session_ids

    # -- state changes (kazoo thread -> loop) ---------------------------------------

    def add_state_listener(self, listener: StateListener) -> None:
        """Call ``listener(state)`` on the event loop at every state change."""
        self._listeners.append(listener)

    def remove_state_listener(self, listener: StateListener) -> None:
        """Undo :meth:`add_state_listener`."""
        self._listeners.remove(listener)

    def add_renewal_hook(self, hook: RenewalHook) -> None:
        """Run ``await hook()`` each time a new session replaces an expired one.

        A failing hook is logged and retried with backoff until it succeeds, the
        session expires again, or the session is closed.
        """
        self._hooks.append(hook)

    def remove_renewal_hook(self, hook: RenewalHook) -> None:
        """Undo :meth:`add_renewal_hook`."""
        self._hooks.remove(hook)

    def _on_kazoo_state(self, client: KazooClient, state: str) -> None:
        client_id = client.client_id if state == "CONNECTED" else None
        if self._loop is not None:
            call_soon(self._loop, self._dispatch_state, SessionState(state), client_id)

    def _dispatch_state(self, state: SessionState, client_id: tuple[int, bytes] | None) -> None:
        if self._closed:
            return
        self._state = state
        self._give_up_if_stopping()
        if client_id:
            self._session_ids.add(client_id[0])
        if state is SessionState.LOST:
            log.warning("ZooKeeper session expired; waiting for a new one")
            self._lost = True
            self._generation += 1
        elif state is SessionState.CONNECTED and self._lost:
            self._lost = False
            log.info("new ZooKeeper session after expiry; running renewal hooks")
            self._tasks.spawn(self._run_hooks(self._generation), name="zk-renewal-hooks")
        for listener in list(self._listeners):
            try:
                listener(state)
            except Exception:
                log.exception("ZooKeeper state listener failed")

    async def _run_hooks(self, generation: int) -> None:
        for hook in list(self._hooks):
            delay = 0.2
            while not self._closed and self._generation == generation:
                try:
                    await hook()
                    break
                except Exception:
                    log.warning("session-renewed hook failed; retrying", exc_info=True)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)

    # -- operations --------------------------------------------------------------

    def _require_client(self) -> KazooClient:
        if self._client is None:
            state = "closed" if self._closed else "not started"
            raise NotConnected(f"the ZooKeeper session to {self.connect} is {state}")
        return self._client

    async def _call(
        self, op: str, path: str, begin: Callable[[KazooClient], Any], *, idempotent: bool = False,
        queued: bool = True,
    ) -> Any:
        """Run one kazoo ``*_async`` call; ``idempotent`` ones ride out a reconnection.
        At most :data:`MAX_IN_FLIGHT` calls are sent at once; ``queued=False`` skips that
        queue (the lease's ping: it must not wait behind a burst)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.op_timeout_s
        delay = 0.05
        while True:
            if self._unreachable_while_stopping():
                raise NotConnected(f"ZooKeeper at {self.connect} is unreachable and the service is stopping")
            try:
                async with asyncio.timeout_at(deadline) as timeout:
                    self._deadlines.add(timeout)
                    try:
                        if not queued:
                            return await wait_result(begin(self._require_client()))
                        async with self._slots:
                            return await wait_result(begin(self._require_client()))
                    finally:
                        self._deadlines.discard(timeout)
            except TimeoutError as exc:
                if self._unreachable_while_stopping():
                    raise NotConnected(
                        f"ZooKeeper {op} of {path}: ZooKeeper at {self.connect} is unreachable and the service is stopping"
                    ) from exc
                raise Timeout(
                    f"ZooKeeper {op} of {path} got no answer within {self.op_timeout_s:g} s"
                ) from exc
            except MagnetarError:
                raise
            except Exception as exc:
                if not (idempotent and is_connection_error(exc) and not self._closed):
                    raise translate(exc, op, path) from exc
                if loop.time() + delay >= deadline:
                    raise translate(exc, op, path) from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def get(self, path: str) -> tuple[bytes, NodeStat]:
        """Data and stat of ``path``. Raises: NotFound."""
        data, stat = await self._call("read", path, lambda c: c.get_async(path), idempotent=True)
        return data, NodeStat.from_kazoo(stat)

    async def exists(self, path: str) -> NodeStat | None:
        """Stat of ``path``, None when it does not exist."""
        stat = await self._call("exists", path, lambda c: c.exists_async(path), idempotent=True)
        return NodeStat.from_kazoo(stat) if stat else None

    async def children(self, path: str) -> list[str]:
        """Names of ``path``'s children (unsorted). Raises: NotFound."""
        names = await self._call(
            "list", path, lambda c: c.get_children_async(path), idempotent=True
        )
        return list(names)

    async def watch_children(self, path: str, changed: asyncio.Event) -> list[str]:
        """Names of ``path``'s children; ``changed`` is set once when they next change.

        Raises: NotFound.
        """
        loop = asyncio.get_running_loop()

        def watch(_event: Any) -> None:
            call_soon(loop, changed.set)

        names = await self._call(
            "list", path, lambda c: c.get_children_async(path, watch=watch), idempotent=True
        )
        return list(names)

    async def get_watched(self, path: str, changed: Callable[[], None]) -> tuple[bytes, NodeStat]:
        """Data and stat of ``path``; ``changed()`` runs once on the event loop when it
        next changes or is deleted (a ZooKeeper data watch; lost with the session).

        Raises: NotFound (no watch is left then).
        """
        loop = asyncio.get_running_loop()

        def watch(_event: Any) -> None:
            call_soon(loop, changed)

        data, stat = await self._call("read", path, lambda c: c.get_async(path, watch=watch), idempotent=True)
        return data, NodeStat.from_kazoo(stat)

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        makepath: bool = True,
    ) -> str:
        """Create ``path`` (and missing parents when ``makepath``); return its real path.

        Raises:
            NodeExists: (a MetadataVersionConflict) it exists already.
            MetadataTooLarge: path and data over ZooKeeper's request limit.
        """
        check_request_size("create", [path], [data])
        return str(
            await self._call(
                "create",
                path,
                lambda c: c.create_async(
                    path, data, ephemeral=ephemeral, sequence=sequential, makepath=makepath
                ),
            )
        )

    async def set(self, path: str, data: bytes, version: int = -1) -> NodeStat:
        """Replace the data if the version still is ``version`` (-1: any); return the new stat.

        Raises:
            MetadataVersionConflict: the znode changed since ``version``.
            NotFound: it does not exist.
            MetadataTooLarge: path and data over ZooKeeper's request limit.
        """
        check_request_size("write", [path], [data])
        stat = await self._call("write", path, lambda c: c.set_async(path, data, version))
        return NodeStat.from_kazoo(stat)

    async def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Delete ``path`` if its version is ``version`` (-1: any), children too if ``recursive``.

        Raises:
            NotFound, MetadataVersionConflict, MetadataError (children, not recursive).
        """
        if not recursive:
            await self._call("delete", path, lambda c: c.delete_async(path, version))
            return
        client = self._require_client()
        try:
            await asyncio.to_thread(client.delete, path, version, True)
        except Exception as exc:
            raise translate(exc, "delete", path) from exc

    async def ping(self) -> None:
        """One request to ZooKeeper (an ``exists`` of the root), not retried: it returns
        once the server answered, so the session was alive when it was sent.

        Raises:
            MetadataError (connection loss, session expired), NotConnected, Timeout.
        """
        root = self.paths.root
        await self._call("ping", root, lambda c: c.exists_async(root), queued=False)

    async def delete_if_owned(self, path: str) -> None:
        """Delete the ephemeral ``path`` if this session (or an expired one of ours)
        created it; anything else (gone, another session's, changed meanwhile) is left."""
        stat = await self.exists(path)
        if stat is None or not self.owns(stat.ephemeral_owner):
            return
        try:
            await self.delete(path, stat.version)
        except (NotFound, MetadataVersionConflict):
            pass

    async def ensure_path(self, path: str) -> None:
        """Create ``path`` and its parents as empty znodes where missing."""
        await self._call("create", path, lambda c: c.ensure_path_async(path), idempotent=True)

    async def multi(self, ops: Sequence[Op]) -> list[Any]:
        """Apply ``ops`` atomically: all or none.

        Returns:
            One result per op: the created path, True (delete/check) or a NodeStat (set).

        Raises:
            The translated error of the first op that failed (NotFound, NodeExists …).
            MetadataTooLarge: the operations together are over ZooKeeper's request limit.
        """
        check_request_size("multi-operation", [op.path for op in ops], [op.data for op in ops])

        def begin(client: KazooClient) -> Any:
            txn = client.transaction()
            for op in ops:
                op.add_to(txn)
            return txn.commit_async()

        where = ", ".join(op.path for op in ops)
        results = await self._call("multi-operation", where, begin)
        for op, result in zip(ops, results, strict=True):
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                raise translate(result, op.kind, op.path) from result
        return [
            NodeStat.from_kazoo(r) if op.kind == "set" else r
            for op, r in zip(ops, results, strict=True)
        ]

    async def wait_gone(self, path: str, timeout_s: float) -> bool:
        """Wait until ``path`` does not exist; False if it still does after ``timeout_s``."""
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()

        def watch(_event: Any) -> None:
            call_soon(loop, changed.set)

        deadline = loop.time() + timeout_s
        while True:
            changed.clear()
            stat = await self._call(
                "exists", path, lambda c: c.exists_async(path, watch=watch), idempotent=True
            )
            if stat is None:
                return True
            try:
                async with asyncio.timeout_at(deadline):
                    await changed.wait()
            except TimeoutError:
                return False
