"""Token authentication on gRPC: the servers' interceptor and the clients' metadata.

Servers: :class:`TokenAuthInterceptor` checks the ``authorization: Bearer <token>``
metadata of every call (unary and streams) before the servicer sees it and refuses with
UNAUTHENTICATED (``AuthenticationError``) otherwise; health checks and reflection stay
open. The role of an accepted call is in :data:`CALLER_ROLE` for the handler (the
interceptor runs in the call's own task). Clients: :class:`BearerStub` adds the header
to every call made through a stub, asking its token source anew for each call, so a
rotating token is picked up by the next call and the next stream.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any

import grpc

from magnetar.common.errors import AuthenticationError, AuthorizationError, MagnetarError
from magnetar.common.grpcutil import abort

if TYPE_CHECKING:
    from magnetar.common.tokens import TokenAuthenticator

log = logging.getLogger(__name__)

AUTHORIZATION_KEY = "authorization"
BEARER = "Bearer "
# Open without a token: probes and tooling must see a service's health.
OPEN_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")

CALLER_ROLE: contextvars.ContextVar[str | None] = contextvars.ContextVar("magnetar_caller_role", default=None)
"""The authenticated role of the call being served (None: authentication is off)."""


def bearer_token(metadata: Any) -> str | None:
    """The token of an ``authorization: Bearer <token>`` entry in call metadata."""
    for key, value in metadata or ():
        if key == AUTHORIZATION_KEY:
            text = value.decode() if isinstance(value, bytes) else str(value)
            return text[len(BEARER) :].strip() if text.startswith(BEARER) else None
    return None


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


class TokenAuthInterceptor(grpc.aio.ServerInterceptor):
    """Every call but health and reflection needs a valid token.

    Args:
        authenticator: verifies tokens and names their role.
        service: the service's name in log lines ("broker", "bookie").
        required_roles: if given, only these roles are let in (the bookie: superusers);
            others get PERMISSION_DENIED.
    """

    def __init__(
        self, authenticator: TokenAuthenticator, service: str, required_roles: Collection[str] | None = None
    ) -> None:
        self.authenticator = authenticator
        self.service = service
        self.required_roles = None if required_roles is None else frozenset(required_roles)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method = handler_call_details.method
        if method.startswith(OPEN_PREFIXES):
            return await continuation(handler_call_details)
        try:
            role = self.authenticator.authenticate(bearer_token(handler_call_details.invocation_metadata))
            if self.required_roles is not None and role not in self.required_roles:
                raise AuthorizationError(f"role {role!r} may not call the {self.service}: a superuser role is required")
        except (AuthenticationError, AuthorizationError) as exc:
            # One line per refused call: the method and the reason, never the token.
            log.warning("%s refused %s: %s", self.service, method, exc.message)
            handler = await continuation(handler_call_details)
            return None if handler is None else _refusal(handler, exc)
        CALLER_ROLE.set(role)
        return await continuation(handler_call_details)


def server_interceptors(authenticator: TokenAuthenticator | None, service: str, **kwargs: Any) -> list[Any]:
    """The interceptors of a gRPC server: none when authentication is off."""
    return [] if authenticator is None else [TokenAuthInterceptor(authenticator, service, **kwargs)]


class BearerStub:
    """A gRPC stub whose every call carries ``authorization: Bearer <token>``.

    ``token()`` is called for each call (a unary call, or the opening of a stream), so
    a token source that rotates its token is followed. Calls keep their own objects
    (no interceptor task in between): ``stub.Produce()`` is still a plain stream call.
    """

    def __init__(self, stub: Any, token: Callable[[], str]) -> None:
        self._stub = stub
        self._token = token

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._stub, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            metadata = tuple(kwargs.pop("metadata", None) or ())
            return method(*args, metadata=(*metadata, (AUTHORIZATION_KEY, BEARER + self._token())), **kwargs)

        return call


def with_token(stub: Any, token: Callable[[], str] | None) -> Any:
    """``stub`` itself without a token source, else a :class:`BearerStub` over it."""
    return stub if token is None else BearerStub(stub, token)
