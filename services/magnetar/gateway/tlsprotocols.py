"""uvicorn protocols that tell the app the client certificate of a TLS connection.

uvicorn does not fill in ASGI's ``tls`` extension, so the ``tls`` authentication
provider could not see who a client is. These protocols put the certificate the
connection's TLS verified (with ``tls_trust_certs_file``, a presented certificate is
verified in the handshake or the connection is refused) into each request's and each
WebSocket upgrade's ``scope["extensions"]["tls"]["client_cert_chain"]`` as PEM, as the
extension names it.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from magnetar.gateway.websocket.protocol import GatewayWebSocketProtocol

try:
    import httptools  # noqa: F401 - uvicorn's "auto" choice when it is installed
except ImportError:  # pragma: no cover
    from uvicorn.protocols.http.h11_impl import H11Protocol as _HttpProtocol
else:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _HttpProtocol  # type: ignore[assignment]


class ClientCertificateApp:
    """``app`` with the connection's client certificate in every scope."""

    def __init__(self, app: ASGIApp, certificate_pem: str) -> None:
        self.app = app
        self.certificate_pem = certificate_pem

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        extensions = scope.setdefault("extensions", {})
        extensions["tls"] = {**extensions.get("tls", {}), "client_cert_chain": [self.certificate_pem]}
        await self.app(scope, receive, send)


def _with_certificate(protocol: Any, transport: asyncio.BaseTransport) -> None:
    ssl_object = transport.get_extra_info("ssl_object")
    certificate = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if certificate:
        protocol.app = ClientCertificateApp(protocol.app, ssl.DER_cert_to_PEM_cert(certificate))


class GatewayHttpProtocol(_HttpProtocol):  # type: ignore[misc, valid-type]
    """uvicorn's HTTP protocol, telling the app the client certificate."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        _with_certificate(self, transport)


class GatewayTlsWebSocketProtocol(GatewayWebSocketProtocol):
    """The gateway's WebSocket protocol, telling the app the client certificate."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        _with_certificate(self, transport)
