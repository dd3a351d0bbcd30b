"""Fault injection for tests and chaos drills: make ZooKeeper expire a session now."""

from __future__ import annotations

import asyncio

from kazoo.client import KazooClient

from magnetar.common.errors import NotConnected
from magnetar.metadata.nodes import SessionState
from magnetar.metadata.session import ZkSession


async def expire_session(session: ZkSession, timeout_s: float = 15.0) -> None:
    """Have the server expire ``session``; return once it runs on a new session.

    A second client joins the session and closes it, as ZooKeeper's own tests do, so
    the server really expires it: its ephemeral znodes are deleted at once, and the
    session's renewal hooks run when kazoo has connected again.

    Raises:
        NotConnected: the session is not connected.
        TimeoutError: no new session within ``timeout_s``.
    """
    client_id = session.client_id
    if client_id is None:
        raise NotConnected("cannot expire a session that is not connected")
    lost, renewed = asyncio.Event(), asyncio.Event()

    def on_state(state: SessionState) -> None:
        if state is SessionState.LOST:
            lost.set()
        elif state is SessionState.CONNECTED and lost.is_set():
            renewed.set()

    session.add_state_listener(on_state)
    try:
        other = KazooClient(hosts=session.connect, client_id=client_id)
        await asyncio.to_thread(other.start, timeout_s)
        await asyncio.to_thread(other.stop)
        other.close()
        async with asyncio.timeout(timeout_s):
            await renewed.wait()
    finally:
        session.remove_state_listener(on_state)
