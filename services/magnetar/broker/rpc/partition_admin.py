"""The broker's partition admin RPC (a mixin of ``BrokerServicer``): Pulsar's
createMissedPartitions, one partition at a time on its owner."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from magnetar.common.grpcutil import rpc_errors
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from magnetar.broker.service import BrokerService


class PartitionAdminRpcs:
    service: BrokerService

    @rpc_errors
    async def CreateMissedPartitions(
        self, request: pb.CreateMissedPartitionsRequest, context: grpc.aio.ServicerContext,
    ) -> pb.CreateMissedPartitionsResponse:
        return pb.CreateMissedPartitionsResponse(created=await self.service.create_missed_partition(request.topic))
