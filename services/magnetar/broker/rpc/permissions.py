"""The broker's permission RPCs (a mixin of ``BrokerServicer``): wire ↔
:class:`magnetar.broker.authorizer.Authorizer` (Pulsar's grant-permission,
revoke-permission, permissions and their subscription counterparts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from magnetar.common.grpcutil import rpc_errors
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from magnetar.broker.service import BrokerService


def _name_sets(granted: Mapping[str, Iterable[str]]) -> dict[str, pb.NameSet]:
    """Each role's (or subscription's) names, sorted, as the wire's NameSet."""
    return {key: pb.NameSet(names=sorted(names)) for key, names in granted.items()}


class PermissionRpcs:
    service: BrokerService

    @rpc_errors
    async def GrantPermission(self, request: pb.GrantPermissionRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self.service.authorizer.grant(request.namespace, request.role, request.actions)
        return pb.AdminResponse()

    @rpc_errors
    async def RevokePermission(self, request: pb.RevokePermissionRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self.service.authorizer.revoke(request.namespace, request.role)
        return pb.AdminResponse()

    @rpc_errors
    async def GrantSubscriptionPermission(
        self, request: pb.GrantSubscriptionPermissionRequest, context: grpc.aio.ServicerContext,
    ) -> pb.AdminResponse:
        await self.service.authorizer.grant_subscription(request.namespace, request.subscription, request.roles)
        return pb.AdminResponse()

    @rpc_errors
    async def RevokeSubscriptionPermission(
        self, request: pb.RevokeSubscriptionPermissionRequest, context: grpc.aio.ServicerContext,
    ) -> pb.AdminResponse:
        await self.service.authorizer.revoke_subscription(request.namespace, request.subscription, request.role)
        return pb.AdminResponse()

    @rpc_errors
    async def GetPermissions(self, request: pb.GetPermissionsRequest, context: grpc.aio.ServicerContext) -> pb.Permissions:
        auth = await self.service.authorizer.permissions(request.namespace)
        return pb.Permissions(
            roles=_name_sets(auth.roles), subscriptions=_name_sets(auth.subscriptions),
            topics={t: pb.TopicGrants(roles=_name_sets(g)) for t, g in auth.topics.items()},
        )

    @rpc_errors
    async def GrantTopicPermission(self, request: pb.GrantTopicPermissionRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self.service.authorizer.grant_topic(request.topic, request.role, request.actions)
        return pb.AdminResponse()

    @rpc_errors
    async def RevokeTopicPermission(self, request: pb.RevokeTopicPermissionRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self.service.authorizer.revoke_topic(request.topic, request.role)
        return pb.AdminResponse()

    @rpc_errors
    async def GetTopicPermissions(self, request: pb.GetTopicPermissionsRequest, context: grpc.aio.ServicerContext) -> pb.Permissions:
        granted = await self.service.authorizer.topic_permissions(request.topic)
        return pb.Permissions(roles=_name_sets(granted))
