"""Opening a producer's or consumer's stream, whatever carries it (a gRPC stream call in
``connection.BrokerStream``, a session handle in ``session.SessionStream``)."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from magnetar.common.errors import MagnetarError, NotConnected, Timeout


class OpenableStream(Protocol):
    target: str

    async def write(self, request: Any) -> None: ...

    async def read(self) -> Any: ...

    def cancel(self) -> None: ...


async def open_stream(stream: OpenableStream, first: Any, timeout_s: float | None) -> Any:
    """Write the opening request and return the broker's first answer.

    Raises:
        Timeout: no answer within ``timeout_s`` (None: no limit); NotConnected: the stream
            ended first; the broker's error (typed) otherwise. The stream is cancelled.
    """
    try:
        await asyncio.wait_for(stream.write(first), timeout_s)
        resp = await asyncio.wait_for(stream.read(), timeout_s)
    except TimeoutError:
        stream.cancel()
        raise Timeout(f"{stream.target} did not answer within {timeout_s:g} s") from None
    except MagnetarError:
        stream.cancel()
        raise
    if resp is None:
        stream.cancel()
        raise NotConnected(f"{stream.target} closed the stream without answering")
    return resp
