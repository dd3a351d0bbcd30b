"""Token authentication of the gateway's REST and WebSocket APIs, and the caller's token
handed on to the brokers.

With ``authentication_enabled`` every request but the probes and the API documents
(:data:`OPEN_PATHS`) must carry ``Authorization: Bearer <token>``; a WebSocket upgrade
may give it as the ``token`` query parameter instead, since browsers cannot set headers
on one (Pulsar's WebSocket API does the same). The token is checked with the services'
:class:`TokenAuthenticator` before routing; a refusal is HTTP 401 ``{"reason": ...}``
(a WebSocket's upgrade is refused with 401, or, where the server cannot answer an
upgrade with a status, accepted and closed with 1008 and the reason).

An accepted request runs with :data:`caller_token` and :data:`caller_role` set, so what
it asks of the brokers carries the caller's own token (Pulsar's proxy "forwards
authorization credentials"): brokers then authorize the caller exactly as they do an
SDK client, and the gateway never lends its own token to a caller. This is pure ASGI
middleware, so both variables are set in the task that runs the route.
"""

from __future__ import annotations

import logging
import re
from contextvars import ContextVar
from urllib.parse import parse_qsl, urlencode

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from magnetar.common.errors import AuthenticationError
from magnetar.common.tokens import TokenAuthenticator

log = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
"""Served without a token: probes must see the gateway's state, and the API documents
describe nothing secret."""
BEARER = "Bearer "
_TOKEN_PARAM = re.compile(r"([?&]token=)[^&\s\"]*")
POLICY_VIOLATION = 1008
"""The close code of a WebSocket refused after its upgrade (RFC 6455)."""

caller_token: ContextVar[str | None] = ContextVar("magnetar_gateway_caller_token", default=None)
"""The token of the request being served (None: authentication is off, or an open path)."""
caller_role: ContextVar[str | None] = ContextVar("magnetar_gateway_caller_role", default=None)
"""The role of the request being served (None: authentication is off, or an open path)."""


def presented_token(scope: Scope) -> str | None:
    """The token a request presents: its ``Authorization: Bearer`` header, or for a
    WebSocket upgrade without one its ``token`` query parameter.

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
            text = value.decode("latin-1")
            return text[len(BEARER) :].strip() if text.startswith(BEARER) else None
    return from_query


class RedactTokens(logging.Filter):
    """Masks ``token=...`` in log records (uvicorn logs upgrade requests with their query)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(a, str) and "token=" in a for a in record.args):
            record.args = tuple(_TOKEN_PARAM.sub(r"\1***", a) if isinstance(a, str) else a for a in record.args)
        return True


class TokenAuthMiddleware:
    """ASGI middleware: authenticate every HTTP request and WebSocket upgrade but those
    to :data:`OPEN_PATHS`; run the accepted ones with :data:`caller_token` and
    :data:`caller_role` set."""

    def __init__(self, app: ASGIApp, authenticator: TokenAuthenticator) -> None:
        self.app = app
        self.authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        token = presented_token(scope)
        try:
            role = self.authenticator.authenticate(token)
        except AuthenticationError as exc:
            # One line per refusal: the route and the reason, never the token (nor the
            # query string, which may hold one).
            method = scope.get("method", "WEBSOCKET")
            log.warning("gateway refused %s %s: %s", method, scope["path"], exc.message)
            await _refuse(scope, receive, send, exc.message)
            return
        token_reset, role_reset = caller_token.set(token), caller_role.set(role)
        try:
            await self.app(scope, receive, send)
        finally:
            caller_role.reset(role_reset)
            caller_token.reset(token_reset)


async def _refuse(scope: Scope, receive: Receive, send: Send, reason: str) -> None:
    response = JSONResponse({"reason": reason}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
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
