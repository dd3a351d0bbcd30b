"""Authorization at the broker's gRPC door: which request each RPC is, and the server
interceptor that asks the :class:`Authorizer` before a unary call reaches the servicer.

The produce and consume streams are decided in the servicer, on their first message
(the topic is not known before), and asked again while they are open.

What each RPC needs follows Pulsar's PulsarAuthorizationProvider: lookups, stats and
topic lists need produce or consume (``LOOKUP``); subscription operations need consume
on that subscription; topic and namespace administration need a tenant admin; tenants
and the cluster's bundles are the superusers'. An RPC missing from the table is the
superusers' only, so a new RPC is closed until someone decides otherwise.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from magnetar.broker.authorization import Action, Request
from magnetar.broker.authorizer import Authorizer, admin_request
from magnetar.common.errors import MagnetarError
from magnetar.common.grpcauth import CALLER_ROLE, OPEN_PREFIXES
from magnetar.common.grpcutil import abort

SERVICE = "/magnetar.v1.Broker/"
STREAMS = frozenset({"Produce", "Consume", "Session"})
"""Decided by the servicer on the stream's first message (a session's: on each handle's)."""


def _topic(action: Action) -> Callable[[Any], Request]:
    return lambda r: admin_request(action, topic=r.topic)


def _subscription(r: Any) -> Request:
    return admin_request(Action.CONSUME, topic=r.topic, subscription=r.subscription)


def _expire(r: Any) -> Request:
    """One subscription: as its other admin calls; every subscription: a topic admin's
    (it changes what other roles' subscriptions hold)."""
    return admin_request(Action.ADMIN_TOPIC, topic=r.topic) if r.all_subscriptions else _subscription(r)


def _namespace(action: Action) -> Callable[[Any], Request]:
    return lambda r: admin_request(action, namespace=r.namespace)


def _tenant(action: Action) -> Callable[[Any], Request]:
    return lambda r: admin_request(action, tenant=r.tenant)


def _superuser(r: Any) -> Request:
    return admin_request(Action.ADMIN_TENANT)


RPC_REQUESTS: dict[str, Callable[[Any], Request]] = {
    # finding topics
    "Lookup": _topic(Action.LOOKUP),
    "GetPartitionedTopicMetadata": _topic(Action.LOOKUP),
    "GetTopicStats": _topic(Action.LOOKUP),
    "ListTopics": _namespace(Action.LOOKUP),
    "GetNamespaceTopicStats": _namespace(Action.LOOKUP),  # as ListTopics (issue 36, the console)
    "GetLiveLoadReport": _superuser,  # as Pulsar's broker-stats (issue 36, the console)
    "GetLastMessageId": _topic(Action.CONSUME),
    "GetSchema": _topic(Action.LOOKUP),  # Pulsar: a topic's schema is read with lookup
    "ListSubscriptions": _topic(Action.CONSUME),
    # subscriptions (Pulsar: SUBSCRIBE, UNSUBSCRIBE, SKIP, RESET_CURSOR, EXPIRE_MESSAGES, PEEK_MESSAGES)
    "CreateSubscription": _subscription,
    "DeleteSubscription": _subscription,
    "SkipMessages": _subscription,
    "ResetCursor": _subscription,
    "GetSubscriptionProperties": _subscription,
    "UpdateSubscriptionProperties": _subscription,
    "ExpireMessages": _expire,
    "PeekMessage": _subscription,
    "PeekMessages": _subscription,
    # topics
    "CreateTopic": _topic(Action.ADMIN_TOPIC),
    "CreateTopics": _namespace(Action.ADMIN_NAMESPACE),  # a tenant admin's, as CreateTopic (issue 35)
    "DeleteTopic": _topic(Action.ADMIN_TOPIC),
    "UpdatePartitions": _topic(Action.ADMIN_TOPIC),
    "UnloadTopic": _topic(Action.ADMIN_TOPIC),
    "GetInternalStats": _topic(Action.ADMIN_TOPIC),
    "TriggerCompaction": _topic(Action.ADMIN_TOPIC),
    "GetCompactionStatus": _topic(Action.ADMIN_TOPIC),
    "TerminateTopic": _topic(Action.ADMIN_TOPIC),
    "GetTopicProperties": _topic(Action.ADMIN_TOPIC),
    "UpdateTopicProperties": _topic(Action.ADMIN_TOPIC),
    "RemoveTopicProperty": _topic(Action.ADMIN_TOPIC),
    "CreateMissedPartitions": _topic(Action.ADMIN_TOPIC),
    "GetMessageIdByTimestamp": _topic(Action.CONSUME),  # Pulsar: PEEK_MESSAGES
    "GetMessageById": _topic(Action.CONSUME),  # Pulsar: PEEK_MESSAGES
    "GetTopicPolicies": _topic(Action.ADMIN_TOPIC),
    "SetTopicPolicy": _topic(Action.ADMIN_TOPIC),
    "RemoveTopicPolicy": _topic(Action.ADMIN_TOPIC),
    # schema registry (Pulsar's SchemasResource: reads need lookup, changes a tenant admin)
    "GetTopicSchema": _topic(Action.LOOKUP),
    "GetAllTopicSchemas": _topic(Action.LOOKUP),
    "GetSchemaVersion": _topic(Action.LOOKUP),
    "TestSchemaCompatibility": _topic(Action.LOOKUP),
    "PostTopicSchema": _topic(Action.ADMIN_TOPIC),
    "DeleteTopicSchema": _topic(Action.ADMIN_TOPIC),
    # namespaces, their policies and permissions
    "CreateNamespace": _namespace(Action.ADMIN_NAMESPACE),
    "DeleteNamespace": _namespace(Action.ADMIN_NAMESPACE),
    "GetRetention": _namespace(Action.ADMIN_NAMESPACE),
    "SetRetention": _namespace(Action.ADMIN_NAMESPACE),
    "GetDeadLetterPolicy": _namespace(Action.ADMIN_NAMESPACE),
    "SetDeadLetterPolicy": _namespace(Action.ADMIN_NAMESPACE),
    "GetNamespacePolicies": _namespace(Action.ADMIN_NAMESPACE),
    "SetNamespacePolicy": _namespace(Action.ADMIN_NAMESPACE),
    "RemoveNamespacePolicy": _namespace(Action.ADMIN_NAMESPACE),
    "LookupBundle": _namespace(Action.ADMIN_NAMESPACE),
    "UnloadNamespaceBundle": _namespace(Action.ADMIN_NAMESPACE),
    "SplitNamespaceBundle": _namespace(Action.ADMIN_NAMESPACE),
    "GetBundlesData": _namespace(Action.ADMIN_NAMESPACE),
    # Pulsar: NamespaceOperation.CLEAR_BACKLOG / UNSUBSCRIBE (a tenant admin)
    "NamespaceClearBacklog": _namespace(Action.ADMIN_NAMESPACE),
    "NamespaceUnsubscribe": _namespace(Action.ADMIN_NAMESPACE),
    "GrantPermission": _namespace(Action.ADMIN_NAMESPACE),
    "RevokePermission": _namespace(Action.ADMIN_NAMESPACE),
    "GrantSubscriptionPermission": _namespace(Action.ADMIN_NAMESPACE),
    "RevokeSubscriptionPermission": _namespace(Action.ADMIN_NAMESPACE),
    "GetPermissions": _namespace(Action.ADMIN_NAMESPACE),
    "GrantTopicPermission": _topic(Action.ADMIN_TOPIC),
    "RevokeTopicPermission": _topic(Action.ADMIN_TOPIC),
    "GetTopicPermissions": _topic(Action.ADMIN_TOPIC),
    # tenants (Pulsar: the tenant's admins read it and list its namespaces; the rest is superusers')
    "GetTenant": _tenant(Action.ADMIN_NAMESPACE),
    "ListNamespaces": _tenant(Action.ADMIN_NAMESPACE),
    "CreateTenant": _tenant(Action.ADMIN_TENANT),
    "UpdateTenant": _tenant(Action.ADMIN_TENANT),
    "DeleteTenant": _tenant(Action.ADMIN_TENANT),
    "ListTenants": _superuser,
    "ListClusters": _superuser,
}


def request_of(method: str, message: Any) -> Request:
    """The request an RPC call is (unknown RPCs: a superuser's)."""
    return RPC_REQUESTS.get(method.removeprefix(SERVICE), _superuser)(message)


class AuthorizationInterceptor(grpc.aio.ServerInterceptor):
    """Asks ``authorizer`` about every unary broker call, with the role the token
    interceptor (before this one) recorded in ``CALLER_ROLE``."""

    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if (
            handler is None or method.startswith(OPEN_PREFIXES) or handler.unary_unary is None
            or method.removeprefix(SERVICE) in STREAMS
        ):
            return handler
        behaviour = handler.unary_unary
        authorizer = self.authorizer

        async def checked(message: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                await authorizer.check(CALLER_ROLE.get(), request_of(method, message))
            except MagnetarError as exc:  # refused, or a malformed name
                await abort(context, exc)
            return await behaviour(message, context)

        return grpc.unary_unary_rpc_method_handler(
            checked, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer,
        )
