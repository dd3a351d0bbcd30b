"""The WebSocket endpoints, Pulsar's paths and upgrade answers.

A socket is accepted only once its SDK handle is open; what stops that is answered with
an HTTP status before the upgrade, as Pulsar does (the body is ``{"reason": ...}`` as
everywhere in the gateway): 400 ``Invalid query params: ...`` for a bad parameter, 404
for a missing topic or namespace, 409 for an Exclusive subscription or producer name
in use, 503 when no broker answers, 504 on a timeout, 401 / 403 when the brokers refuse
the caller. The handle is closed when the socket closes, whoever closes it.

With authentication on, the upgrade must present a token (gateway/auth.py) and each
socket's handle is opened by an SDK client of its own presenting that token.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from fastapi import APIRouter, WebSocket
from fastapi.responses import JSONResponse

from magnetar.client.aio import Client
from magnetar.client.options import ConsumerDeadLetterPolicy
from magnetar.common import errors as e
from magnetar.common.compression import codec
from magnetar.common.names import TopicName
from magnetar.gateway.auth import caller_role
from magnetar.gateway.context import GatewayContext
from magnetar.gateway.errors import status_of
from magnetar.gateway.websocket.consumer import ConsumerSession, ReaderSession
from magnetar.gateway.websocket.params import (
    InvalidQuery,
    consumer_params,
    producer_params,
    reader_params,
)
from magnetar.gateway.websocket.producer import ProducerSession
from magnetar.gateway.websocket.socket import Socket, StarletteSocket

log = logging.getLogger(__name__)

router = APIRouter()

PRODUCER_PATH = "/ws/v2/producer/persistent/{tenant}/{namespace}/{topic}"
CONSUMER_PATH = "/ws/v2/consumer/persistent/{tenant}/{namespace}/{topic}/{subscription}"
READER_PATH = "/ws/v2/reader/persistent/{tenant}/{namespace}/{topic}"


def upgrade_status(exc: BaseException) -> int:
    """The HTTP status refusing an upgrade whose SDK handle could not be opened: the
    admin API's, but 400 for every bad argument and 409 for a busy name (as Pulsar's
    WebSocket handlers)."""
    if isinstance(exc, e.ProducerBusy | e.ProducerFenced | e.ConsumerBusy):
        return 409
    if isinstance(exc, e.InvalidArgument):
        return 400
    return status_of(exc) if isinstance(exc, e.MagnetarError) else 500


class _Handle(Protocol):
    async def close(self) -> None: ...


class _Session(Protocol):
    async def run(self) -> None: ...


H = TypeVar("H", bound=_Handle)


def _context(websocket: WebSocket) -> GatewayContext:
    ctx: GatewayContext = websocket.app.state.context
    return ctx


def _query(websocket: WebSocket) -> dict[str, str]:
    """The first value of each query parameter (as Pulsar reads them)."""
    params = websocket.query_params
    return {key: params.getlist(key)[0] for key in params}


def _topic(tenant: str, namespace: str, topic: str) -> str:
    try:
        return str(TopicName(tenant=tenant, namespace=namespace, local_name=topic))
    except e.InvalidArgument as exc:
        raise InvalidQuery(f"Invalid topic name format: {exc.message}") from None


P = TypeVar("P")


async def _checked(
    websocket: WebSocket, tenant: str, namespace: str, topic: str, parse: Callable[[dict[str, str]], P]
) -> tuple[str, P] | None:
    """The topic's full name and the parsed query; None once the upgrade is refused (400)."""
    try:
        return _topic(tenant, namespace, topic), parse(_query(websocket))
    except InvalidQuery as exc:
        await _deny(websocket, 400, f"Invalid query params: {exc.message}")
        return None


async def _deny(websocket: WebSocket, status: int, reason: str) -> None:
    try:
        await websocket.send_denial_response(JSONResponse({"reason": reason}, status_code=status))
    except OSError:
        pass  # the client is gone


async def _serve(
    websocket: WebSocket,
    failure: str,
    open_handle: Callable[[Client], Awaitable[H]],
    session: Callable[[Socket, H], _Session],
) -> None:
    """Open the handle, accept, run the session, close the handle; or refuse the upgrade.

    The handle is opened with the caller's own SDK client (see
    :meth:`GatewayContext.caller_client`), so the brokers authorize the caller, also
    when the handle reconnects later."""
    async with _context(websocket).caller_client() as client:
        try:
            handle = await open_handle(client)
        except Exception as exc:
            status = upgrade_status(exc)
            detail = exc.message if isinstance(exc, e.MagnetarError) else repr(exc)
            if status == 500:
                log.error("%s on %s: %s", failure, websocket.url.path, detail)
            elif status in (401, 403):  # the route, the role and the reason; never the token
                log.warning("a broker refused WEBSOCKET %s to role %r: %s", websocket.url.path, caller_role.get(), detail)
            await _deny(websocket, status, f"{failure}: {detail}")
            return
        try:
            await websocket.accept()
            await session(StarletteSocket(websocket), handle).run()
        except OSError:
            pass  # the client went away before the socket opened
        finally:
            try:
                await handle.close()
            except Exception:
                log.exception("closing the SDK handle of %s failed", websocket.url.path)


@router.websocket(PRODUCER_PATH)
async def producer_socket(websocket: WebSocket, tenant: str, namespace: str, topic: str) -> None:
    """A producer: publish frames in, acks out."""
    if (checked := await _checked(websocket, tenant, namespace, topic, producer_params)) is None:
        return
    name, p = checked
    await _serve(
        websocket, "Failed to create producer",
        lambda client: client.create_producer(
            name, producer_name=p.producer_name, send_timeout_millis=p.send_timeout_millis,
            max_pending_messages=p.max_pending_messages, block_if_queue_full=False,
            batching_enabled=p.batching_enabled, batching_max_messages=p.batching_max_messages,
            batching_max_publish_delay_ms=p.batching_max_publish_delay_ms,
            message_routing_mode=p.routing_mode, compression_type=codec(p.compression_type),
        ),
        lambda socket, producer: ProducerSession(socket, producer, p.max_pending_messages, p.initial_sequence_id),
    )


@router.websocket(CONSUMER_PATH)
async def consumer_socket(websocket: WebSocket, tenant: str, namespace: str, topic: str, subscription: str) -> None:
    """A consumer: messages out; acks, negative acks, permits and commands in."""
    ctx = _context(websocket)
    max_queue = ctx.config.websocket_max_receiver_queue
    if (checked := await _checked(websocket, tenant, namespace, topic, lambda q: consumer_params(q, max_queue))) is None:
        return
    name, p = checked
    policy = None
    if p.dead_letter:
        policy = ConsumerDeadLetterPolicy(max_redeliver_count=p.max_redeliver_count, dead_letter_topic=p.dead_letter_topic)
    await _serve(
        websocket, "Failed to subscribe",
        lambda client: client.subscribe(
            name, subscription, consumer_type=p.subscription_type, consumer_name=p.consumer_name,
            receiver_queue_size=p.receiver_queue_size, priority_level=p.priority_level,
            negative_ack_redelivery_delay_ms=p.negative_ack_redelivery_delay_ms,
            unacked_messages_timeout_ms=p.ack_timeout_ms, dead_letter_policy=policy,
        ),
        lambda socket, consumer: ConsumerSession(socket, consumer, p.receiver_queue_size, p.pull_mode),
    )


@router.websocket(READER_PATH)
async def reader_socket(websocket: WebSocket, tenant: str, namespace: str, topic: str) -> None:
    """A reader: messages out from ``messageId`` on (exclusive); nothing is acked."""
    ctx = _context(websocket)
    max_queue = ctx.config.websocket_max_receiver_queue
    if (checked := await _checked(websocket, tenant, namespace, topic, lambda q: reader_params(q, max_queue))) is None:
        return
    name, p = checked
    await _serve(
        websocket, "Failed to create reader",
        lambda client: client.create_reader(
            name, p.start, reader_name=p.reader_name, receiver_queue_size=p.receiver_queue_size
        ),
        lambda socket, reader: ReaderSession(socket, reader, p.receiver_queue_size),
    )


@router.websocket("/ws/{path:path}")
async def unknown_socket(websocket: WebSocket, path: str) -> None:
    """Any other ``/ws/`` path: refused with 404 and the paths there are."""
    await _deny(
        websocket, 404,
        f"No WebSocket endpoint at /ws/{path}: use /ws/v2/producer/persistent/{{tenant}}/{{namespace}}/{{topic}}, "
        "/ws/v2/consumer/persistent/{tenant}/{namespace}/{topic}/{subscription} or "
        "/ws/v2/reader/persistent/{tenant}/{namespace}/{topic}",
    )
