"""What a session sees of its WebSocket: text frames in and out, and a close. The
sessions are written against :class:`Socket`, so unit tests drive them with a twin;
:class:`StarletteSocket` is the real one."""

from __future__ import annotations

import logging
from typing import Protocol

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from magnetar.gateway.websocket.frames import WebSocketError

log = logging.getLogger(__name__)

NORMAL_CLOSURE = 1000
MAX_REASON_BYTES = 123
"""A close frame's payload is at most 125 bytes: the code's two and the reason's."""


class SocketClosed(Exception):
    """The socket is closed (by the client, or by the session); nothing more goes out."""


class Socket(Protocol):
    async def receive(self) -> str | bytes | None:
        """The next frame (text or binary); None once the client has gone."""
        ...

    async def send(self, text: str) -> None:
        """Send one text frame; waits while the client is slow to read.

        Raises:
            SocketClosed: the socket is closed.
        """
        ...

    async def close(self, code: int, reason: str) -> None:
        """Close the socket (once; later calls do nothing)."""
        ...


def close_reason(error: WebSocketError, detail: str = "") -> str:
    """Pulsar's description of ``error``, then ``: detail``, cut to fit a close frame."""
    text = f"{error.description}: {detail}" if detail else error.description
    raw = text.encode()
    if len(raw) <= MAX_REASON_BYTES:
        return text
    return raw[: MAX_REASON_BYTES - 3].decode(errors="ignore") + "..."


class ClientFrameErrors(logging.Filter):
    """Logs a client's invalid UTF-8 text frame (uvicorn closes the socket with 1007, as
    RFC 6455 asks) as one warning line: uvicorn logs it as an error with a traceback,
    so any client could fill the gateway's log with tracebacks. Installed on
    ``uvicorn.error`` by the server."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.msg == "Invalid UTF-8 sequence received from client.":
            record.msg = "Invalid UTF-8 in a text frame from a client: closed with 1007 (%s)"
            record.args = (record.exc_info[1],)
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


class StarletteSocket:
    """A :class:`Socket` over an accepted Starlette WebSocket."""

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket
        self.closed = False

    async def receive(self) -> str | bytes | None:
        if self.websocket.client_state is WebSocketState.DISCONNECTED:
            return None
        message = await self.websocket.receive()
        if message["type"] == "websocket.disconnect":
            self.closed = True
            return None
        text: str | None = message.get("text")
        return text if text is not None else message.get("bytes") or b""

    async def send(self, text: str) -> None:
        if self.closed:
            raise SocketClosed()
        try:
            await self.websocket.send({"type": "websocket.send", "text": text})
        except (WebSocketDisconnect, RuntimeError, OSError) as exc:
            self.closed = True
            raise SocketClosed() from exc

    async def close(self, code: int, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            await self.websocket.close(code, reason)
        except (WebSocketDisconnect, RuntimeError, OSError) as exc:
            log.debug("closing a WebSocket that is gone already: %r", exc)
