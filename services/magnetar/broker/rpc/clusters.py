"""The broker's cluster RPCs (a mixin of ``BrokerServicer``): wire ↔
:class:`magnetar.broker.clusters.ClusterAdmin` (Pulsar's clusters create, update, get,
delete, list)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from magnetar.broker.clusters import ClusterData
from magnetar.common.grpcutil import rpc_errors
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from magnetar.broker.service import BrokerService


def _data(p: pb.ClusterData) -> ClusterData:
    return ClusterData(p.service_url, p.service_url_tls, p.broker_service_url, p.broker_service_url_tls)


class ClusterRpcs:
    service: BrokerService

    @rpc_errors
    async def ListClusters(self, request: pb.ListClustersRequest, context: grpc.aio.ServicerContext) -> pb.NameList:
        return pb.NameList(names=await self.service.clusters.names())

    @rpc_errors
    async def CreateCluster(self, request: pb.ClusterRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self.service.clusters.create(request.cluster, _data(request.data))
        return pb.AdminResponse()

    @rpc_errors
    async def UpdateCluster(self, request: pb.ClusterRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self.service.clusters.update(request.cluster, _data(request.data))
        return pb.AdminResponse()

    @rpc_errors
    async def GetCluster(self, request: pb.GetClusterRequest, context: grpc.aio.ServicerContext) -> pb.ClusterData:
        data = await self.service.clusters.get(request.cluster)
        return pb.ClusterData(
            service_url=data.service_url, service_url_tls=data.service_url_tls,
            broker_service_url=data.broker_service_url, broker_service_url_tls=data.broker_service_url_tls,
        )

    @rpc_errors
    async def DeleteCluster(self, request: pb.GetClusterRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self.service.clusters.delete(request.cluster)
        return pb.AdminResponse()
