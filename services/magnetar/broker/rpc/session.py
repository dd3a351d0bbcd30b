"""The ``Session`` RPC (``Broker.Session``): the SDK's session with this broker over
gRPC, served by :class:`~magnetar.broker.session.handles.BrokerSession` (which the framed
session listener, :mod:`magnetar.broker.session`, drives too)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from magnetar.broker.session.handles import RESPONSE_BYTES, BrokerSession, HandleInbox, StreamServer
from magnetar.proto.v1 import broker_pb2 as pb

__all__ = ["RESPONSE_BYTES", "BrokerSession", "HandleInbox", "SessionRpcs", "StreamServer"]


class SessionRpcs:
    """The ``Session`` RPC of the broker's servicer (a mixin: it needs
    ``produce_stream`` and ``consume_stream``)."""

    produce_stream: StreamServer
    consume_stream: StreamServer

    async def Session(self, request_iterator: AsyncIterator[pb.SessionRequest], context: grpc.aio.ServicerContext) -> AsyncIterator[pb.SessionResponse]:
        session = BrokerSession(self.produce_stream, self.consume_stream)
        async for resp in session.run(request_iterator):
            yield resp
