"""The broker's namespace bundle RPCs (a mixin of ``BrokerServicer``): wire ↔
:meth:`magnetar.broker.service.BrokerService.split_bundle` and ``bundles_data``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from magnetar.common.grpcutil import rpc_errors
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from magnetar.broker.service import BrokerService


class BundleRpcs:
    service: BrokerService

    @rpc_errors
    async def SplitNamespaceBundle(
        self, request: pb.SplitNamespaceBundleRequest, context: grpc.aio.ServicerContext,
    ) -> pb.SplitNamespaceBundleResponse:
        made = await self.service.split_bundle(
            request.namespace, request.bundle, request.algorithm, request.unload, list(request.boundaries))
        return pb.SplitNamespaceBundleResponse(bundles=made)

    @rpc_errors
    async def GetBundlesData(
        self, request: pb.GetBundlesDataRequest, context: grpc.aio.ServicerContext,
    ) -> pb.NamespaceBundlesData:
        bundles = await self.service.bundles_data(request.namespace)
        return pb.NamespaceBundlesData(boundaries=bundles.boundaries, num_bundles=bundles.count)
