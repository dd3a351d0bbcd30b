"""Credentials that expire, at the Pulsar protocol door: AUTH_CHALLENGE and AUTH_RESPONSE.

A connection authenticated with a token that has an ``exp`` is challenged when the token
expires, as Pulsar's brokers do (``AuthenticationState.isExpired``): the broker sends
AUTH_CHALLENGE and the client answers AUTH_RESPONSE with fresh credentials
(pulsar-client asks its authentication again: a token supplier gives a new token). A
fresh answer for the same role lets the connection go on, and its new ``exp`` is watched
in turn. The connection is closed (ERROR ``AuthenticationError`` first; the client's
producers and consumers reconnect with what their authentication gives then) when:

- the client did not say in CONNECT that it can refresh (``supports_auth_refresh``);
- no answer came within ``timeout_s`` of the challenge;
- the answer's credentials fail, or name another role (Pulsar: "principal cannot change
  during an authentication refresh": producers and consumers were authorized for it).

So no connection outlives its credentials by more than ``timeout_s``; an AUTH_RESPONSE
that no challenge asked for is checked the same way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from magnetar.common.authentication import AuthenticationService, Credentials
from magnetar.common.errors import AuthenticationError
from magnetar.proto.pulsar import pulsar_api_pb2 as pb

if TYPE_CHECKING:
    from magnetar.protocol.frames import Frame

log = logging.getLogger(__name__)

AUTH_REFRESH_TIMEOUT_S = 5.0
"""How long a challenged client has to answer with fresh credentials."""
REFRESH_AUTH_DATA = b"PulsarAuthRefresh"
"""What Pulsar's brokers put in AUTH_CHALLENGE to ask for fresh credentials."""


class RefreshingConnection(Protocol):
    peer: str
    role: str | None
    protocol_version: int

    @property
    def closed(self) -> bool: ...

    def write(self, command: pb.BaseCommand) -> None: ...

    def refuse_and_close(self, command: pb.BaseCommand, why: str) -> None: ...

    def spawn(self, request: Coroutine[Any, Any, None], name: str) -> None: ...


class CredentialsWatch:
    """The expiry of one connection's credentials, and their refreshes."""

    def __init__(
        self, conn: RefreshingConnection, service: AuthenticationService, server_version: str, *,
        timeout_s: float = AUTH_REFRESH_TIMEOUT_S, certificate: bytes | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:  # fmt: skip
        self.conn = conn
        self.service = service
        self.server_version = server_version
        self.timeout_s = timeout_s
        self.certificate = certificate
        self.clock = clock
        self.method = ""
        self.expires_at: float | None = None
        self.supports_refresh = False
        self.refreshes = 0
        self._changed = asyncio.Event()

    def connected(self, connect: pb.CommandConnect, credentials: Credentials) -> None:
        """CONNECT's credentials were accepted: watch them."""
        self.method = connect.auth_method_name or "none"
        self.supports_refresh = connect.feature_flags.supports_auth_refresh
        self.expires_at = self.service.expires_at(credentials)
        if self.expires_at is not None:
            self.conn.spawn(self._watch(), name="auth-refresh")

    async def _watch(self) -> None:
        while not self.conn.closed and self.expires_at is not None:
            wait = self.expires_at - self.clock()
            if wait > 0:
                self._changed.clear()
                try:
                    await asyncio.wait_for(self._changed.wait(), wait)
                except TimeoutError:
                    pass
                continue
            if not self.supports_refresh:
                self._close("the credentials expired and the client cannot refresh them (no supports_auth_refresh)")
                return
            before = self.refreshes
            self.conn.write(pb.BaseCommand(
                type=pb.BaseCommand.AUTH_CHALLENGE,
                authChallenge=pb.CommandAuthChallenge(
                    server_version=self.server_version, protocol_version=self.conn.protocol_version,
                    challenge=pb.AuthData(auth_method_name=self.method, auth_data=REFRESH_AUTH_DATA),
                ),
            ))  # fmt: skip
            deadline = self.clock() + self.timeout_s
            while self.refreshes == before and self.clock() < deadline and not self.conn.closed:
                self._changed.clear()
                try:
                    await asyncio.wait_for(self._changed.wait(), max(0.0, deadline - self.clock()))
                except TimeoutError:
                    pass
            if self.refreshes == before and not self.conn.closed:
                self._close(f"the credentials expired and no fresh ones came within {self.timeout_s:g} s of AUTH_CHALLENGE")
                return

    def auth_response(self, frame: Frame) -> None:
        """AUTH_RESPONSE: check the fresh credentials (a password off the event loop)."""
        response = frame.command.authResponse.response
        try:
            credentials = Credentials.of_method(response.auth_method_name or self.method, response.auth_data, self.certificate)
        except AuthenticationError as exc:
            self._close(f"the refreshed credentials fail: {exc.message}")
            return
        if self.service.is_costly(credentials):
            self.conn.spawn(self._check_slowly(credentials), name="AUTH_RESPONSE")
        else:
            self._check(credentials, lambda: self.service.authenticate(credentials))

    async def _check_slowly(self, credentials: Credentials) -> None:
        try:
            role = await asyncio.to_thread(self.service.authenticate, credentials)
        except AuthenticationError as exc:
            self._close(f"the refreshed credentials fail: {exc.message}")
            return
        self._check(credentials, lambda: role)

    def _check(self, credentials: Credentials, authenticate: Callable[[], str]) -> None:
        if self.conn.closed:
            return
        try:
            role = authenticate()
        except AuthenticationError as exc:
            self._close(f"the refreshed credentials fail: {exc.message}")
            return
        if role != self.conn.role:
            self._close(f"the refreshed credentials are role {role!r}, not {self.conn.role!r}: the role cannot change on a connection")
            return
        self.refreshes += 1
        watching = self.expires_at is not None
        self.expires_at = self.service.expires_at(credentials)
        self._changed.set()
        if not watching and self.expires_at is not None:
            self.conn.spawn(self._watch(), name="auth-refresh")
        log.debug("pulsar connection %s: credentials of %r refreshed", self.conn.peer, role)

    def _close(self, why: str) -> None:
        self.conn.refuse_and_close(pb.BaseCommand(
            type=pb.BaseCommand.ERROR, error=pb.CommandError(request_id=0, error=pb.AuthenticationError, message=why),
        ), why)  # fmt: skip
