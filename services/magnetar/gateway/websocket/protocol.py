"""The uvicorn WebSocket protocol the gateway serves with.

It is websockets' sans-I/O implementation (uvicorn's ``websockets-sansio``), which answers
an upgrade refused through ASGI's denial response extension (``websocket.http.response``:
the 401 of gateway/auth.py, the 401/403/404 of the WebSocket routes) with that status.
uvicorn 0.54 then logs an ERROR "ASGI callable returned without completing handshake"
for every such refusal: its ``send`` writes the denial and closes the connection but never
marks the handshake done, so the end of the app looks like a handshake left hanging (its
wsproto implementation does mark it; uvicorn pull request #3138). A refusal is an answer,
not a server error: this protocol marks the handshake done once the denial is sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

if TYPE_CHECKING:
    from uvicorn._types import ASGISendEvent


class GatewayWebSocketProtocol(WebSocketsSansIOProtocol):
    """``WebSocketsSansIOProtocol`` that counts a sent denial response as a finished handshake."""

    async def send(self, message: ASGISendEvent) -> None:
        await super().send(message)
        if message["type"] == "websocket.http.response.body" and not message.get("more_body", False):
            self.handshake_complete = True
