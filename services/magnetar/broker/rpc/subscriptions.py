"""The broker's subscription, retention and dead-letter admin RPCs (a mixin of ``BrokerServicer``):
wire ↔ :mod:`magnetar.broker.subscription_admin` and :mod:`magnetar.broker.retention`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from magnetar.broker.namespace_policies import PolicyKind
from magnetar.broker.retention import RetentionPolicy
from magnetar.broker.rpc import wire
from magnetar.broker.rpc.namespaces import dead_letter_from_proto, dead_letter_to_proto
from magnetar.broker.subscription_admin import Start, SubscriptionAdmin
from magnetar.common.errors import InvalidArgument
from magnetar.common.grpcutil import rpc_errors
from magnetar.common.message_id import MessageId
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from magnetar.broker.service import BrokerService


class SubscriptionAdminRpcs:
    service: BrokerService

    @property
    def _subscriptions(self) -> SubscriptionAdmin:
        return SubscriptionAdmin(self.service)

    @rpc_errors
    async def ListSubscriptions(self, request: pb.ListSubscriptionsRequest, context: grpc.aio.ServicerContext) -> pb.NameList:
        return pb.NameList(names=await self._subscriptions.list_subscriptions(request.topic))

    @rpc_errors
    async def CreateSubscription(self, request: pb.CreateSubscriptionRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        start: MessageId | Start
        if request.HasField("message_id"):
            start = wire.message_id(request.message_id)
        else:
            start = "earliest" if request.initial_position == pb.EARLIEST else "latest"
        await self._subscriptions.create_subscription(request.topic, request.subscription, start)
        return pb.AdminResponse()

    @rpc_errors
    async def DeleteSubscription(self, request: pb.DeleteSubscriptionRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self._subscriptions.delete_subscription(request.topic, request.subscription, request.force)
        return pb.AdminResponse()

    @rpc_errors
    async def SkipMessages(self, request: pb.SkipMessagesRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        if request.all:
            await self._subscriptions.clear_backlog(request.topic, request.subscription)
        else:
            await self._subscriptions.skip(request.topic, request.subscription, request.count)
        return pb.AdminResponse()

    @rpc_errors
    async def GetSubscriptionProperties(self, request: pb.SubscriptionPropertiesRequest, context: grpc.aio.ServicerContext) -> pb.Properties:
        return pb.Properties(properties=await self._subscriptions.get_properties(request.topic, request.subscription))

    @rpc_errors
    async def UpdateSubscriptionProperties(self, request: pb.SubscriptionPropertiesRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self._subscriptions.update_properties(request.topic, request.subscription, dict(request.properties))
        return pb.AdminResponse()

    @rpc_errors
    async def ResetCursor(self, request: pb.ResetCursorRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        kind = request.WhichOneof("target")
        if kind is None:
            raise InvalidArgument("reset the cursor to a time (timestamp_ms) or a message id")
        target = request.timestamp_ms if kind == "timestamp_ms" else wire.message_id(request.message_id)
        await self._subscriptions.reset_cursor(request.topic, request.subscription, target)
        return pb.AdminResponse()

    @rpc_errors
    async def SetRetention(self, request: pb.SetRetentionRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        if not request.HasField("policies"):
            raise InvalidArgument("give the retention policies (retention_time_minutes, retention_size_mb)")
        policies = request.policies
        # As the gateway's: Pulsar's rules, checked against the backlog quota.
        await self.service.namespace_policies.set(
            request.namespace, PolicyKind.RETENTION,
            RetentionPolicy(policies.retention_time_minutes, policies.retention_size_mb),
        )
        return pb.AdminResponse()

    @rpc_errors
    async def GetRetention(self, request: pb.GetRetentionRequest, context: grpc.aio.ServicerContext) -> pb.RetentionPolicies:
        policy = await self.service.retention.retention_policies(request.namespace)
        return pb.RetentionPolicies(
            retention_time_minutes=policy.retention_time_minutes, retention_size_mb=policy.retention_size_mb
        )

    @rpc_errors
    async def SetDeadLetterPolicy(self, request: pb.SetDeadLetterPolicyRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self.service.set_dead_letter_defaults(request.namespace, dead_letter_from_proto(request.policy))
        return pb.AdminResponse()

    @rpc_errors
    async def GetDeadLetterPolicy(self, request: pb.GetDeadLetterPolicyRequest, context: grpc.aio.ServicerContext) -> pb.DeadLetterPolicy:
        return dead_letter_to_proto(await self.service.dead_letter_defaults(request.namespace))
