"""The broker's namespace subscription RPCs (a mixin of ``BrokerServicer``): wire ↔
:mod:`magnetar.broker.namespace_ops`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from magnetar.broker.namespace_ops import NamespaceOpResult, NamespaceOps
from magnetar.common.grpcutil import rpc_errors
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from magnetar.broker.service import BrokerService


def _answer(result: NamespaceOpResult) -> pb.NamespaceBundleSubscriptionResponse:
    return pb.NamespaceBundleSubscriptionResponse(subscriptions=result.subscriptions, entries=result.entries)


class NamespaceOpsRpcs:
    service: BrokerService

    @rpc_errors
    async def NamespaceClearBacklog(
        self, request: pb.NamespaceBundleSubscriptionRequest, context: grpc.aio.ServicerContext,
    ) -> pb.NamespaceBundleSubscriptionResponse:
        ops = NamespaceOps(self.service)
        return _answer(await ops.clear_backlog(request.namespace, request.bundle, request.subscription))

    @rpc_errors
    async def NamespaceUnsubscribe(
        self, request: pb.NamespaceBundleSubscriptionRequest, context: grpc.aio.ServicerContext,
    ) -> pb.NamespaceBundleSubscriptionResponse:
        ops = NamespaceOps(self.service)
        return _answer(await ops.unsubscribe(request.namespace, request.bundle, request.subscription, request.check_only))
