"""The REST creates of non-partitioned persistent topics that arrive together, gathered
into one ``CreateTopics`` call per namespace and caller (docs/gateway.md, "Creating a
topic"): one gRPC call instead of one per create, each create still answered with its own
outcome. A batch is sent at the end of the event loop's turn it started in (the requests
parsed in that turn join it), or once it holds ``MAX_TOPICS_PER_CALL`` topics."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

from magnetar.common.errors import MagnetarError, from_code
from magnetar.common.names import TopicName
from magnetar.gateway.auth import caller_authorization, caller_principal

MAX_TOPICS_PER_CALL = 1000
"""The most a broker creates in one call (broker/topic_creates.py)."""
SendBatch = Callable[[str, Sequence[str]], Awaitable[list[MagnetarError | None]]]
"""``(namespace, topics) -> each topic's error (None: created)``: AdminClient.create_topics."""
_Key = tuple[str, str | None, str | None]
_Batch = list[tuple[str, "asyncio.Future[None]"]]


class TopicCreateBatcher:
    """Gathers concurrent creates by namespace and caller (the batch is sent with the
    credentials of the requests in it: all the same)."""

    def __init__(self, send: SendBatch, max_topics: int = MAX_TOPICS_PER_CALL) -> None:
        self._send = send
        self._max = max_topics
        self._pending: dict[_Key, _Batch] = {}
        self._calls: set[asyncio.Task[None]] = set()

    async def create(self, topic: str) -> None:
        """Create the non-partitioned persistent ``topic`` (not a partition's name).

        Raises:
            The create's own error (AlreadyExists, NamespaceNotFound, ...), or the call's.
        """
        name = TopicName.parse(topic)
        key = (str(name.namespace), caller_authorization.get(), caller_principal.get())
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        batch = self._pending.get(key)
        if batch is None:
            batch = self._pending[key] = []
            loop.call_soon(self._flush, key, batch)  # in this request's context: its credentials
        batch.append((str(name), done))
        if len(batch) >= self._max:
            self._flush(key, batch)
        await done

    def _flush(self, key: _Key, batch: _Batch) -> None:
        if self._pending.get(key) is not batch:
            return  # sent already (it filled up)
        del self._pending[key]
        task = asyncio.get_running_loop().create_task(self._call(key[0], batch), name="gateway-create-topics")
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    async def _call(self, namespace: str, batch: _Batch) -> None:
        try:
            errors = await self._send(namespace, [topic for topic, _ in batch])
        except BaseException as exc:
            for _, done in batch:
                if not done.done():
                    done.set_exception(_copy(exc))
            if not isinstance(exc, Exception):
                raise
            return
        for (_, done), error in zip(batch, errors, strict=True):
            if not done.done():
                if error is None:
                    done.set_result(None)
                else:
                    done.set_exception(error)

    async def close(self) -> None:
        """Cancel the calls under way (their requests get CancelledError)."""
        for task in list(self._calls):
            task.cancel()
        for task in list(self._calls):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _copy(exc: BaseException) -> BaseException:
    """One error per waiting request (a shared one would gather every waiter's traceback)."""
    if isinstance(exc, MagnetarError):
        return from_code(exc.code, exc.message)
    return exc
