"""Authentication on gRPC: the servers' interceptor and the clients' metadata.

Servers: :class:`AuthenticationInterceptor` hands what a call presents to the service's
:class:`~magnetar.common.authentication.AuthenticationService` before the servicer sees
it (unary calls and streams): the ``authorization`` metadata (``Bearer <token>`` or
``Basic <base64 of user:password>``), else the client certificate TLS verified (from
the call's ``auth_context()``), else nothing (the anonymous role, when one is set). It
refuses with UNAUTHENTICATED (``AuthenticationError``) otherwise; health checks and
reflection stay open. The role of an accepted call is in :data:`CALLER_ROLE` for the
handler (the interceptor, or the handler wrapper it installs, runs in the call's own
task). Clients: :class:`AuthorizationStub` adds the header to every call made through a
stub, asking its source anew for each call, so a rotating token is picked up by the next
call and the next stream.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any

import grpc

from magnetar.common.authentication import (
    AuthenticationService,
    Credentials,
    as_service,
    basic_header,
)
from magnetar.common.errors import AuthenticationError, AuthorizationError, MagnetarError
from magnetar.common.grpcutil import abort
from magnetar.common.tokens import TokenAuthenticator

log = logging.getLogger(__name__)

AUTHORIZATION_KEY = "authorization"
BEARER = "Bearer "
# Open without a token: probes and tooling must see a service's health.
OPEN_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
ORIGINAL_PRINCIPAL_KEY = "original-principal"
"""The role a proxy role's call acts for (Pulsar's ``originalPrincipal``)."""
MAX_ROLE_LENGTH = 1024
PEER_CERTIFICATE = "x509_pem_cert"
"""The ``auth_context()`` key of the peer's verified certificate (mTLS)."""

CALLER_ROLE: contextvars.ContextVar[str | None] = contextvars.ContextVar("magnetar_caller_role", default=None)
"""The authenticated role of the call being served (None: authentication is off)."""


def metadata_value(metadata: Any, name: str) -> str | None:
    """The entry ``name`` of call metadata, as sent."""
    for key, value in metadata or ():
        if key == name:
            return value.decode() if isinstance(value, bytes) else str(value)
    return None


def authorization_header(metadata: Any) -> str | None:
    """The ``authorization`` entry of call metadata, as sent."""
    return metadata_value(metadata, AUTHORIZATION_KEY)


def bearer_token(metadata: Any) -> str | None:
    """The token of an ``authorization: Bearer <token>`` entry in call metadata."""
    text = authorization_header(metadata)
    return text[len(BEARER) :].strip() if text is not None and text.startswith(BEARER) else None


def peer_certificate(context: grpc.aio.ServicerContext) -> bytes | None:
    """The client certificate the server's TLS verified (None: plain text, or no
    certificate: a server that does not require one does not ask for it)."""
    certificates = context.auth_context().get(PEER_CERTIFICATE) or ()
    return certificates[0] if certificates else None


def _refusal(handler: grpc.RpcMethodHandler, error: MagnetarError) -> grpc.RpcMethodHandler:
    """A handler of ``handler``'s kind that ends the call with ``error``."""

    async def refuse(request: Any, context: grpc.aio.ServicerContext) -> None:
        await abort(context, error)

    kwargs = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(refuse, **kwargs)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(refuse, **kwargs)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(refuse, **kwargs)
    return grpc.unary_unary_rpc_method_handler(refuse, **kwargs)


def _deciding(
    handler: grpc.RpcMethodHandler, decide: Callable[[grpc.aio.ServicerContext], Awaitable[None]]
) -> grpc.RpcMethodHandler:
    """``handler`` run after ``decide(context)``, which aborts a refused call (the peer's
    certificate is known only to the call's context, not to the interceptor)."""
    kwargs = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    behaviour = handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream

    if handler.response_streaming:

        async def streaming(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await decide(context)
            result = behaviour(request, context)
            if inspect.isasyncgen(result):
                async for item in result:
                    yield item
            else:  # a handler that writes with context.write
                await result

        factory = grpc.stream_stream_rpc_method_handler if handler.request_streaming else grpc.unary_stream_rpc_method_handler
        return factory(streaming, **kwargs)

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await decide(context)
        return await behaviour(request, context)

    factory = grpc.stream_unary_rpc_method_handler if handler.request_streaming else grpc.unary_unary_rpc_method_handler
    return factory(unary, **kwargs)


class AuthenticationInterceptor(grpc.aio.ServerInterceptor):
    """Every call but health and reflection needs a role from the service's providers.

    Args:
        authenticator: the service's providers and anonymous role (a bare token
            authenticator: the token provider alone).
        service: the service's name in log lines ("broker", "bookie").
        required_roles: if given, only these roles are let in (the bookie: superusers);
            others get PERMISSION_DENIED.
        proxy_roles: roles whose calls may name an ``original-principal`` to act for
            (Pulsar's ``proxyRoles``: the gateway); anyone else naming one is refused
            with PERMISSION_DENIED.
    """

    def __init__(
        self,
        authenticator: AuthenticationService | TokenAuthenticator,
        service: str,
        required_roles: Collection[str] | None = None,
        proxy_roles: Collection[str] = (),
    ) -> None:
        self.authenticator = as_service(authenticator)
        self.service = service
        self.required_roles = None if required_roles is None else frozenset(required_roles)
        self.proxy_roles = frozenset(proxy_roles)

    def _role(self, method: str, credentials: Credentials, original: str | None) -> str:
        """The caller's role (or the original principal its proxy role acts for);
        raises (and logs) the refusal."""
        try:
            role = self.authenticator.authenticate(credentials)
            if original is not None:
                if role not in self.proxy_roles:
                    raise AuthorizationError(
                        f"role {role!r} may not act for another role: it is not one of the {self.service}'s proxy_roles"
                    )
                if not original.strip() or len(original) > MAX_ROLE_LENGTH:
                    raise AuthenticationError("the original principal is not a role name")
                role = original.strip()
            if self.required_roles is not None and role not in self.required_roles:
                raise AuthorizationError(f"role {role!r} may not call the {self.service}: a superuser role is required")
        except (AuthenticationError, AuthorizationError) as exc:
            # One line per refused call: the method and the reason, never the credentials.
            log.warning("%s refused %s: %s", self.service, method, exc.message)
            raise
        return role

    async def caller_role(self, what: str, credentials: Credentials, original: str | None = None) -> str:
        """The role of a caller that presented ``credentials`` (acting for ``original``),
        as a call's is decided here: for a door that is not gRPC (the broker's framed
        session, whose first frame carries the ``authorization`` value). A costly
        check (a password hash) runs in a thread.

        Raises:
            AuthenticationError, AuthorizationError: refused (logged, with ``what``).
        """
        if self.authenticator.is_costly(credentials):
            return await asyncio.to_thread(self._role, what, credentials, original)
        return self._role(what, credentials, original)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method = handler_call_details.method
        if method.startswith(OPEN_PREFIXES):
            return await continuation(handler_call_details)
        metadata = handler_call_details.invocation_metadata
        header = authorization_header(metadata)
        original = metadata_value(metadata, ORIGINAL_PRINCIPAL_KEY)
        if header is None and self.authenticator.tls:
            # Only the call's context knows the peer's certificate: decide in the handler.
            handler = await continuation(handler_call_details)
            if handler is None:
                return None

            async def decide(context: grpc.aio.ServicerContext) -> None:
                try:
                    CALLER_ROLE.set(self._role(method, Credentials(None, peer_certificate(context)), original))
                except MagnetarError as exc:
                    await abort(context, exc)

            return _deciding(handler, decide)
        credentials = Credentials(header)
        try:
            if self.authenticator.is_costly(credentials):
                role = await asyncio.to_thread(self._role, method, credentials, original)
            else:
                role = self._role(method, credentials, original)
        except (AuthenticationError, AuthorizationError) as exc:
            handler = await continuation(handler_call_details)
            return None if handler is None else _refusal(handler, exc)
        CALLER_ROLE.set(role)
        return await continuation(handler_call_details)


def server_interceptors(
    authenticator: AuthenticationService | TokenAuthenticator | None, service: str, **kwargs: Any
) -> list[Any]:
    """The interceptors of a gRPC server: none when authentication is off."""
    return [] if authenticator is None else [AuthenticationInterceptor(authenticator, service, **kwargs)]


class AuthorizationStub:
    """A gRPC stub whose every call carries ``authorization: <header()>``
    (``Bearer <token>`` or ``Basic <base64 of user:password>``; none when it is "").

    ``header()`` is called for each call (a unary call, or the opening of a stream), so
    a source that rotates its token is followed. Calls keep their own objects (no
    interceptor task in between): ``stub.Produce()`` is still a plain stream call.
    """

    def __init__(
        self, stub: Any, header: Callable[[], str], original_principal: Callable[[], str | None] | None = None
    ) -> None:
        self._stub = stub
        self._header = header
        self._original_principal = original_principal

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._stub, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            metadata = tuple(kwargs.pop("metadata", None) or ())
            header = self._header()
            if header:  # "": nothing to present (an anonymous caller the gateway serves)
                metadata = (*metadata, (AUTHORIZATION_KEY, header))
            principal = self._original_principal() if self._original_principal is not None else None
            if principal:
                metadata = (*metadata, (ORIGINAL_PRINCIPAL_KEY, principal))
            return method(*args, metadata=metadata, **kwargs)

        return call


class BearerStub(AuthorizationStub):
    """A gRPC stub whose every call carries ``authorization: Bearer <token()>``."""

    def __init__(self, stub: Any, token: Callable[[], str]) -> None:
        super().__init__(stub, lambda: BEARER + token())


def with_token(stub: Any, token: Callable[[], str] | None) -> Any:
    """``stub`` itself without a token source, else a :class:`BearerStub` over it."""
    return stub if token is None else BearerStub(stub, token)


def with_authorization(
    stub: Any, header: Callable[[], str] | None, original_principal: Callable[[], str | None] | None = None
) -> Any:
    """``stub`` itself without a header source, else an :class:`AuthorizationStub` over
    it (naming ``original_principal()`` too, when that gives a role)."""
    return stub if header is None else AuthorizationStub(stub, header, original_principal)


def basic_source(user: str, password: str) -> Callable[[], str]:
    """The header source of basic credentials."""
    header = basic_header(user, password)
    return lambda: header

