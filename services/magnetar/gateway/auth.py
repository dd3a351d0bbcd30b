"""Authentication of the gateway's REST and WebSocket APIs, and the caller's credentials
handed on to the brokers.

With ``authentication_enabled`` every request but the probes and the API documents
(:data:`OPEN_PATHS`) is given a role by the gateway's
:class:`~magnetar.common.authentication.AuthenticationService` before routing, from what
it presents: ``Authorization: Bearer <token>`` or ``Basic <base64 of user:password>``; a
WebSocket upgrade may give a token as the ``token`` query parameter instead, since
browsers cannot set headers on one (Pulsar's WebSocket API does the same); the client
certificate of a TLS connection (the ASGI ``tls`` extension, filled in by
``gateway/tlsprotocols.py``); or nothing (the anonymous role, when one is set). A
refusal is HTTP 401 ``{"reason": ...}`` (a WebSocket's upgrade is refused with 401, or,
where the server cannot answer an upgrade with a status, accepted and closed with 1008
and the reason).

An accepted request runs with :data:`caller_authorization`, :data:`caller_token` and
:data:`caller_role` set, so what it asks of the brokers carries the caller's own
``authorization`` header (Pulsar's proxy "forwards authorization credentials"): brokers
then authorize the caller exactly as they do an SDK client, and the gateway never lends
its own token to a caller, but one: a client certificate cannot be forwarded, so a
caller known by its certificate reaches the brokers with the gateway's own token and
its role as the ``original-principal`` (:data:`caller_principal`), which brokers accept
from their ``proxy_roles`` only (Pulsar's proxy roles). A caller that presented nothing
(the anonymous role) reaches the brokers with nothing: they answer it as their
anonymous role. This is pure ASGI middleware, so the variables are set in the task that
runs the route.
"""

from __future__ import annotations

import asyncio
import logging
import re
from contextvars import ContextVar
from urllib.parse import parse_qsl, urlencode

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from magnetar.common.authentication import AuthenticationService, Credentials, as_service
from magnetar.common.errors import AuthenticationError
from magnetar.common.tokens import TokenAuthenticator

log = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
"""Served without credentials: probes must see the gateway's state, and the API documents
describe nothing secret."""
OPEN_PREFIXES = ("/console/",)
"""Served without credentials too: the web console's static files (docs/console.md) hold
no data; the API calls they make carry the operator's token."""
BEARER = "Bearer "
_TOKEN_PARAM = re.compile(r"([?&]token=)[^&\s\"]*")
POLICY_VIOLATION = 1008
"""The close code of a WebSocket refused after its upgrade (RFC 6455)."""

caller_token: ContextVar[str | None] = ContextVar("magnetar_gateway_caller_token", default=None)
"""The bearer token of the request being served (None: authentication is off, an open
path, or the caller presented no token)."""
caller_authorization: ContextVar[str | None] = ContextVar("magnetar_gateway_caller_authorization", default=None)
"""The ``authorization`` header the request being served presented (a WebSocket's
``token`` parameter as ``Bearer <token>``), forwarded to the brokers (None: none)."""
caller_principal: ContextVar[str | None] = ContextVar("magnetar_gateway_caller_principal", default=None)
"""The role of the request being served when its TLS client certificate gave it (a
certificate cannot be forwarded: the gateway calls the brokers with its own token and
this role as the ``original-principal`` its proxy role acts for)."""
caller_role: ContextVar[str | None] = ContextVar("magnetar_gateway_caller_role", default=None)
"""The role of the request being served (None: authentication is off, or an open path)."""


def is_open_path(path: str) -> bool:
    """Whether ``path`` is served without credentials (:data:`OPEN_PATHS`,
    :data:`OPEN_PREFIXES` and the console's root)."""
    return path in OPEN_PATHS or path == "/console" or path.startswith(OPEN_PREFIXES)


def presented_authorization(scope: Scope) -> str | None:
    """The ``authorization`` a request presents: its ``Authorization`` header, or for a
    WebSocket upgrade without one its ``token`` query parameter as ``Bearer <token>``.

    A WebSocket's ``token`` parameter is removed from ``scope`` (uvicorn logs each
    upgrade's path with its query string, and routes have no use for it)."""
    query = scope.get("query_string", b"")
    from_query = None
    if scope["type"] == "websocket" and b"token=" in query:
        pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
        from_query = next((value.strip() for key, value in pairs if key == "token"), None)
        scope["query_string"] = urlencode([(k, v) for k, v in pairs if k != "token"]).encode("latin-1")
    for key, value in scope.get("headers", ()):
        if key == b"authorization":
            return value.decode("latin-1").strip()
    return None if from_query is None else BEARER + from_query


def presented_token(scope: Scope) -> str | None:
    """The bearer token a request presents (see :func:`presented_authorization`)."""
    header = presented_authorization(scope)
    return header[len(BEARER) :].strip() if header is not None and header.startswith(BEARER) else None


def client_certificate(scope: Scope) -> bytes | None:
    """The client certificate the connection's TLS verified (the ASGI ``tls``
    extension's first ``client_cert_chain`` entry, PEM), or None."""
    chain = (scope.get("extensions") or {}).get("tls", {}).get("client_cert_chain") or ()
    return chain[0].encode("ascii") if chain else None


class RedactTokens(logging.Filter):
    """Masks ``token=...`` in log records (uvicorn logs upgrade requests with their query)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(a, str) and "token=" in a for a in record.args):
            record.args = tuple(_TOKEN_PARAM.sub(r"\1***", a) if isinstance(a, str) else a for a in record.args)
        return True


class AuthenticationMiddleware:
    """ASGI middleware: authenticate every HTTP request and WebSocket upgrade but those
    to :data:`OPEN_PATHS`; run the accepted ones with :data:`caller_authorization`,
    :data:`caller_token` and :data:`caller_role` set."""

    def __init__(self, app: ASGIApp, authenticator: AuthenticationService | TokenAuthenticator) -> None:
        self.app = app
        self.authenticator = as_service(authenticator)
        # The schemes a refused caller may answer with (RFC 7235: one challenge each).
        schemes = [s for s, on in (("Bearer", self.authenticator.token), ('Basic realm="magnetar"', self.authenticator.basic)) if on]
        self.challenge = ", ".join(schemes) or "Bearer"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or is_open_path(scope["path"]):
            await self.app(scope, receive, send)
            return
        header = presented_authorization(scope)
        credentials = Credentials(header, client_certificate(scope))
        try:
            if self.authenticator.is_costly(credentials):  # a password to hash: off the event loop
                role = await asyncio.to_thread(self.authenticator.authenticate, credentials)
            else:
                role = self.authenticator.authenticate(credentials)
        except AuthenticationError as exc:
            # One line per refusal: the route and the reason, never the credentials (nor
            # the query string, which may hold a token).
            method = scope.get("method", "WEBSOCKET")
            log.warning("gateway refused %s %s: %s", method, scope["path"], exc.message)
            await _refuse(scope, receive, send, exc.message, self.challenge)
            return
        token = header[len(BEARER) :].strip() if header is not None and header.startswith(BEARER) else None
        by_certificate = header is None and self.authenticator.tls and client_certificate(scope) is not None
        resets = (
            caller_authorization.set(header), caller_token.set(token), caller_role.set(role),
            caller_principal.set(role if by_certificate else None),
        )
        try:
            await self.app(scope, receive, send)
        finally:
            caller_principal.reset(resets[3])
            caller_role.reset(resets[2])
            caller_token.reset(resets[1])
            caller_authorization.reset(resets[0])


async def _refuse(scope: Scope, receive: Receive, send: Send, reason: str, challenge: str = "Bearer") -> None:
    response = JSONResponse({"reason": reason}, status_code=401, headers={"WWW-Authenticate": challenge})
    if scope["type"] == "http":
        await response(scope, receive, send)
        return
    websocket = WebSocket(scope, receive, send)
    try:
        if "websocket.http.response" in scope.get("extensions", {}):
            await websocket.send_denial_response(response)
        else:  # the server cannot answer an upgrade with a status: open, then close at once
            await websocket.accept()
            await websocket.close(POLICY_VIOLATION, reason[:120])
    except OSError:
        pass  # the client is gone
