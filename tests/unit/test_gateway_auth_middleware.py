"""The gateway's token middleware without a network: which requests it lets through, what
it answers the others, that the caller's token and role reach the route (and the tasks
it starts), and that tokens never reach a log line."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, WebSocket
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from magnetar.common import tokens
from magnetar.gateway.auth import (
    AuthenticationMiddleware,
    RedactTokens,
    caller_role,
    caller_token,
    presented_token,
)
from magnetar.gateway.websocket.protocol import GatewayWebSocketProtocol

KEY = tokens.generate_secret_key()


def app() -> FastAPI:
    api = FastAPI()
    api.add_middleware(AuthenticationMiddleware, authenticator=tokens.TokenAuthenticator("HS256", KEY))

    @api.get("/healthz")
    async def healthz() -> dict[str, str | None]:
        return {"role": caller_role.get()}

    @api.get("/who")
    async def who() -> dict[str, str | None]:
        # A task started by the route (as the SDK's reconnects are) sees the caller too.
        in_task = await asyncio.create_task(_token_now())
        return {"role": caller_role.get(), "token": caller_token.get(), "in_task": in_task}

    return api


async def _token_now() -> str | None:
    return caller_token.get()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app()), base_url="http://gw") as client:
        yield client


async def test_a_valid_token_reaches_the_route_and_its_tasks(http: httpx.AsyncClient):
    token = tokens.create_token("app-1", KEY)
    got = (await http.get("/who", headers={"Authorization": f"Bearer {token}"})).json()
    assert got == {"role": "app-1", "token": token, "in_task": token}
    assert caller_token.get() is None  # reset after the request


@pytest.mark.parametrize(("headers", "reason"), [
    ({}, "no token was presented"),
    ({"Authorization": "Token abc"}, "no token was presented"),
    ({"Authorization": "Bearer abc"}, "malformed"),
    ({"Authorization": f"Bearer {tokens.create_token('x', KEY, expires_in_s=1, now=1000)}"}, "expired"),
    ({"Authorization": f"Bearer {tokens.create_token('x', tokens.generate_secret_key())}"}, "does not verify"),
])
async def test_refusals_are_401_with_a_reason(http: httpx.AsyncClient, headers: dict[str, str], reason: str,
                                              caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.WARNING, "magnetar.gateway.auth"):
        response = await http.get("/who", headers=headers)
    assert response.status_code == 401 and reason in response.json()["reason"]
    assert response.headers["www-authenticate"] == "Bearer"
    assert [r.getMessage() for r in caplog.records] == [f"gateway refused GET /who: {response.json()['reason']}"]


async def test_probes_need_no_token(http: httpx.AsyncClient):
    assert (await http.get("/healthz")).json() == {"role": None}
    assert (await http.get("/openapi.json")).status_code == 200


def test_a_websocket_token_comes_from_the_header_or_the_query_which_loses_it():
    scope = {"type": "websocket", "headers": [], "query_string": b"a=1&token=T0K&messageId=CAc%2B"}
    assert presented_token(scope) == "T0K"
    assert scope["query_string"] == b"a=1&messageId=CAc%2B"
    header = {"type": "websocket", "headers": [(b"authorization", b"Bearer H")], "query_string": b"token=Q"}
    assert presented_token(header) == "H" and header["query_string"] == b""
    http_scope = {"type": "http", "headers": [], "query_string": b"token=Q"}
    assert presented_token(http_scope) is None and http_scope["query_string"] == b"token=Q"  # HTTP: header only


def test_uvicorn_lines_have_tokens_masked():
    record = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, '%s - "WebSocket %s" %d',
                               ("127.0.0.1:5", "/ws/v2/reader/persistent/a/b/c?x=1&token=SECRET", 401), None)
    RedactTokens().filter(record)
    assert record.getMessage() == '127.0.0.1:5 - "WebSocket /ws/v2/reader/persistent/a/b/c?x=1&token=***" 401'


async def test_a_refused_websocket_upgrade_is_answered_401_and_logged_as_no_error(caplog) -> None:
    """Served by uvicorn with the gateway's WebSocket protocol: the client sees 401 with
    Pulsar's reason, and uvicorn logs the refusal (INFO) but no ERROR."""
    api = app()

    @api.websocket("/ws")
    async def echo(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text(caller_role.get() or "")
        await websocket.close()

    server = uvicorn.Server(uvicorn.Config(
        api, host="127.0.0.1", port=0, log_config=None, access_log=False, lifespan="off", ws=GatewayWebSocketProtocol,
    ))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        assert not serving.done()
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    caplog.set_level(logging.INFO, logger="uvicorn.error")
    try:
        for query in ("", "?token=not-a-jwt"):
            with pytest.raises(InvalidStatus) as refused:
                async with connect(f"ws://127.0.0.1:{port}/ws{query}", open_timeout=5):
                    pass
            assert refused.value.response.status_code == 401
            assert b'"reason"' in refused.value.response.body
        async with connect(f"ws://127.0.0.1:{port}/ws?token={tokens.create_token('app-1', KEY)}") as ws:
            assert await ws.recv() == "app-1"
    finally:
        server.should_exit = True
        await serving
    uvicorn_lines = [r for r in caplog.records if r.name == "uvicorn.error"]
    assert any("401" in r.getMessage() for r in uvicorn_lines)  # the refusals were served by uvicorn
    assert [r.getMessage() for r in uvicorn_lines if r.levelno >= logging.ERROR] == []
