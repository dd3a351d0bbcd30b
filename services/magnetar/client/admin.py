"""The admin client: tenants, namespaces, topics and subscriptions over the brokers'
admin RPCs, as Pulsar's ``PulsarAdmin`` offers them. ``magnetar admin`` and the
gateway both administer the cluster through it.

It shares the SDK's transport (:class:`ConnectionPool`: channels, the service hosts
tried in turn, errors typed). A call that must run on a topic's owner is sent there
after a lookup, and looked up again if the topic moves meanwhile (``NotOwner``), as a
Pulsar broker redirects; a call on a partitioned topic goes to every partition's owner.
Answers are the broker's protobuf messages.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from magnetar.common.bundles import bundles_of_names, parse_boundary
from magnetar.common.errors import (
    InvalidArgument,
    MagnetarError,
    NotOwner,
    PreconditionFailed,
    TopicNotFound,
    from_code,
)
from magnetar.common.message_id import MessageId, Start
from magnetar.common.names import TopicName
from magnetar.common.partitions import admin_targets
from magnetar.common.retry import RetryPolicy
from magnetar.proto.v1 import broker_pb2 as pb

from .connection import ConnectionPool, TopicOwner

if TYPE_CHECKING:
    from magnetar.common.tls import ClientTls
    from magnetar.proto.v1.broker_pb2_grpc import BrokerStub

    Call = Callable[[BrokerStub], Awaitable["R"]]

R = TypeVar("R")
OWNER_RETRY = RetryPolicy(max_tries=3, delay_s=0.0)
"""A topic that moved between the lookup and the call: look it up again at once."""


class AdminClient:
    """Administer a cluster through any of its brokers (``service_url``)."""

    def __init__(
        self, service_url: str, operation_timeout_s: float = 30.0, *, tls: ClientTls | None = None,
        token: Callable[[], str] | None = None, authorization: Callable[[], str] | None = None,
        original_principal: Callable[[], str | None] | None = None,
    ) -> None:
        """``tls``: call the brokers with TLS (also on with a ``magnetar+ssl://`` URL);
        ``token``: a token source; ``authorization``: an ``authorization`` header source;
        ``original_principal``: the role a proxy role acts for (see ConnectionPool).

        Raises: InvalidArgument: a bad service URL, unreadable TLS files."""
        self.pool = ConnectionPool(service_url, operation_timeout_s, tls=tls, token=token, authorization=authorization,
                                   original_principal=original_principal)
        self.timeout = operation_timeout_s

    async def close(self) -> None:
        await self.pool.close()

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- where a call runs ---------------------------------------------------------
    async def call(self, fn: Call[R], address: str | None = None) -> R:
        """``fn(stub)`` on the broker at ``address``, or on the service hosts in turn."""
        if address:
            return await self.pool.unary(address, fn)
        return await self.pool.on_service_hosts("admin", lambda stub, _host: fn(stub))

    async def on_owner(self, topic: str, fn: Call[R], lookup_first: bool = True) -> R:
        """``fn(stub)`` on the broker owning ``topic``, looked up again if it moves;
        without ``lookup_first`` a service host is asked first (it may own it, and a
        call that needs no owner then succeeds without a lookup)."""
        if not lookup_first:
            try:
                return await self.call(fn)
            except NotOwner:
                pass

        async def on_current_owner() -> R:
            # A NotOwner from the lookup itself is not retried: only the owner's is.
            owner = await self.pool.lookup(topic)
            try:
                return await self.call(fn, owner)
            except NotOwner as exc:
                raise _Moved(exc) from exc

        try:
            return await OWNER_RETRY.run(on_current_owner, retry_on=_Moved)
        except _Moved as moved:
            raise moved.error from None

    async def on_partitions(
        self, topic: str, fn: Callable[[BrokerStub, str], Awaitable[R]],
        message_id: pb.MessageIdData | None = None, whole_topic: bool = False,
    ) -> list[R]:
        """``fn(stub, partition)`` on each target partition's owner (on ``topic`` itself
        when it is not partitioned); see :func:`admin_targets`."""
        targets = admin_targets(topic, await self.pool.partitions(topic), message_id, whole_topic)
        return [await self.on_owner(target, _bound(fn, target)) for target in targets]

    # -- tenants -------------------------------------------------------------------
    async def clusters(self) -> list[str]:
        """The clusters tenants may be allowed on (this one and the registered ones)."""
        return list((await self.call(lambda s: s.ListClusters(pb.ListClustersRequest(), timeout=self.timeout))).names)

    async def create_cluster(self, cluster: str, data: pb.ClusterData) -> None:
        request = pb.ClusterRequest(cluster=cluster, data=data)
        await self.call(lambda s: s.CreateCluster(request, timeout=self.timeout))

    async def update_cluster(self, cluster: str, data: pb.ClusterData) -> None:
        request = pb.ClusterRequest(cluster=cluster, data=data)
        await self.call(lambda s: s.UpdateCluster(request, timeout=self.timeout))

    async def cluster(self, cluster: str) -> pb.ClusterData:
        return await self.call(lambda s: s.GetCluster(pb.GetClusterRequest(cluster=cluster), timeout=self.timeout))

    async def delete_cluster(self, cluster: str) -> None:
        await self.call(lambda s: s.DeleteCluster(pb.GetClusterRequest(cluster=cluster), timeout=self.timeout))

    async def tenants(self) -> list[str]:
        return list((await self.call(lambda s: s.ListTenants(pb.ListTenantsRequest(), timeout=self.timeout))).names)

    async def create_tenant(self, tenant: str, info: pb.TenantInfo | None = None) -> None:
        """Without ``info``: no admin roles, allowed on this cluster."""
        request = pb.CreateTenantRequest(tenant=tenant, info=info)
        await self.call(lambda s: s.CreateTenant(request, timeout=self.timeout))

    async def tenant(self, tenant: str) -> pb.TenantInfo:
        return await self.call(lambda s: s.GetTenant(pb.GetTenantRequest(tenant=tenant), timeout=self.timeout))

    async def update_tenant(self, tenant: str, info: pb.TenantInfo) -> None:
        request = pb.UpdateTenantRequest(tenant=tenant, info=info)
        await self.call(lambda s: s.UpdateTenant(request, timeout=self.timeout))

    async def delete_tenant(self, tenant: str) -> None:
        await self.call(lambda s: s.DeleteTenant(pb.DeleteTenantRequest(tenant=tenant), timeout=self.timeout))

    # -- namespaces ----------------------------------------------------------------
    async def namespaces(self, tenant: str) -> list[str]:
        request = pb.ListNamespacesRequest(tenant=tenant)
        return list((await self.call(lambda s: s.ListNamespaces(request, timeout=self.timeout))).names)

    async def create_namespace(
        self, namespace: str, policies: pb.NamespacePolicies | None = None, permissions: pb.Permissions | None = None,
    ) -> None:
        """With ``policies``: created with them (checked as :meth:`set_namespace_policy` does);
        with ``permissions``: with those grants (Pulsar's auth_policies)."""
        request = pb.CreateNamespaceRequest(namespace=namespace, policies=policies, permissions=permissions)
        await self.call(lambda s: s.CreateNamespace(request, timeout=self.timeout))

    async def delete_namespace(self, namespace: str) -> None:
        request = pb.DeleteNamespaceRequest(namespace=namespace)
        await self.call(lambda s: s.DeleteNamespace(request, timeout=self.timeout))

    async def retention(self, namespace: str) -> pb.RetentionPolicies:
        request = pb.GetRetentionRequest(namespace=namespace)
        return await self.call(lambda s: s.GetRetention(request, timeout=self.timeout))

    async def set_retention(self, namespace: str, policies: pb.RetentionPolicies) -> None:
        request = pb.SetRetentionRequest(namespace=namespace, policies=policies)
        await self.call(lambda s: s.SetRetention(request, timeout=self.timeout))

    async def dead_letter_policy(self, namespace: str) -> pb.DeadLetterPolicy:
        request = pb.GetDeadLetterPolicyRequest(namespace=namespace)
        return await self.call(lambda s: s.GetDeadLetterPolicy(request, timeout=self.timeout))

    async def set_dead_letter_policy(self, namespace: str, policy: pb.DeadLetterPolicy) -> None:
        request = pb.SetDeadLetterPolicyRequest(namespace=namespace, policy=policy)
        await self.call(lambda s: s.SetDeadLetterPolicy(request, timeout=self.timeout))

    async def namespace_policies(self, namespace: str) -> pb.NamespacePolicies:
        """Every policy the namespace sets (unset fields: the broker's defaults apply)."""
        request = pb.GetNamespacePoliciesRequest(namespace=namespace)
        return await self.call(lambda s: s.GetNamespacePolicies(request, timeout=self.timeout))

    async def set_namespace_policy(
        self, namespace: str, backlog_quota_type: pb.BacklogQuotaType = pb.DESTINATION_STORAGE, **policy: Any,
    ) -> None:
        """Set one policy, given as one keyword of SetNamespacePolicyRequest's ``policy``:
        ``retention``, ``message_ttl_seconds``, ``backlog_quota`` (of
        ``backlog_quota_type``), ``deduplication``, ``delayed_delivery``, ``dead_letter``,
        ``publish_rate`` or ``dispatch_rate``.

        Raises:
            InvalidArgument: not exactly one policy, or a value Pulsar's rules refuse.
            PreconditionFailed: a bad TTL, or a retention / backlog quota conflict.
            NamespaceNotFound.
        """
        if len(policy) != 1:
            raise InvalidArgument(f"set one policy at a time, got {sorted(policy) or 'none'}")
        request = pb.SetNamespacePolicyRequest(namespace=namespace, backlog_quota_type=backlog_quota_type, **policy)
        await self.call(lambda s: s.SetNamespacePolicy(request, timeout=self.timeout))

    async def publish_rate(self, namespace: str) -> pb.PublishRate | None:
        """The namespace's publishRate (None: not set, no limit)."""
        policies = await self.namespace_policies(namespace)
        return policies.publish_rate if policies.HasField("publish_rate") else None

    async def set_publish_rate(self, namespace: str, rate: pb.PublishRate) -> None:
        """Raises: InvalidArgument (a limit below -1), NamespaceNotFound."""
        await self.set_namespace_policy(namespace, publish_rate=rate)

    async def remove_publish_rate(self, namespace: str) -> None:
        await self.remove_namespace_policy(namespace, pb.POLICY_PUBLISH_RATE)

    async def dispatch_rate(self, namespace: str) -> pb.DispatchRate | None:
        """The namespace's dispatchRate (None: not set, no limit)."""
        policies = await self.namespace_policies(namespace)
        return policies.dispatch_rate if policies.HasField("dispatch_rate") else None

    async def set_dispatch_rate(self, namespace: str, rate: pb.DispatchRate) -> None:
        """Raises: InvalidArgument (a limit below -1, a period below 1), NamespaceNotFound."""
        await self.set_namespace_policy(namespace, dispatch_rate=rate)

    async def remove_dispatch_rate(self, namespace: str) -> None:
        await self.remove_namespace_policy(namespace, pb.POLICY_DISPATCH_RATE)

    async def remove_namespace_policy(
        self, namespace: str, policy: pb.NamespacePolicyKind,
        backlog_quota_type: pb.BacklogQuotaType = pb.DESTINATION_STORAGE,
    ) -> None:
        """Remove one policy (the broker's default applies again). Raises: NamespaceNotFound."""
        request = pb.RemoveNamespacePolicyRequest(namespace=namespace, policy=policy, backlog_quota_type=backlog_quota_type)
        await self.call(lambda s: s.RemoveNamespacePolicy(request, timeout=self.timeout))

    async def topic_policies(self, topic: str, applied: bool = False) -> pb.NamespacePolicies:
        """What ``topic`` sets (a partition: its partitioned topic); ``applied``: what
        applies (its policies over its namespace's; the broker's defaults stay unset)."""
        request = pb.GetTopicPoliciesRequest(topic=topic, applied=applied)
        return await self.call(lambda s: s.GetTopicPolicies(request, timeout=self.timeout))

    async def set_topic_policy(
        self, topic: str, backlog_quota_type: pb.BacklogQuotaType = pb.DESTINATION_STORAGE, **policy: Any,
    ) -> None:
        """Set one of ``topic``'s policies, as :meth:`set_namespace_policy` a namespace's.

        Raises:
            InvalidArgument: as set_namespace_policy, or a policy with no topic level.
            PreconditionFailed; NamespaceNotFound.
        """
        carried = pb.SetNamespacePolicyRequest(backlog_quota_type=backlog_quota_type, **policy)
        request = pb.SetTopicPolicyRequest(topic=topic, policy=carried)
        await self.call(lambda s: s.SetTopicPolicy(request, timeout=self.timeout))

    async def remove_topic_policy(
        self, topic: str, policy: pb.NamespacePolicyKind, backlog_quota_type: pb.BacklogQuotaType = pb.DESTINATION_STORAGE,
    ) -> None:
        """Remove one of ``topic``'s policies (its namespace's applies again)."""
        carried = pb.RemoveNamespacePolicyRequest(policy=policy, backlog_quota_type=backlog_quota_type)
        request = pb.RemoveTopicPolicyRequest(topic=topic, policy=carried)
        await self.call(lambda s: s.RemoveTopicPolicy(request, timeout=self.timeout))

    async def schema_compatibility_strategy(self, namespace: str) -> str:
        """The namespace's schemaCompatibilityStrategy (UNDEFINED: the broker's default applies)."""
        p = await self.namespace_policies(namespace)
        return p.schema_compatibility_strategy if p.HasField("schema_compatibility_strategy") else "UNDEFINED"

    async def set_schema_compatibility_strategy(self, namespace: str, strategy: str) -> None:
        """Raises: InvalidArgument (not one of Pulsar's strategies), NamespaceNotFound."""
        await self.set_namespace_policy(namespace, schema_compatibility_strategy=strategy)

    async def is_allow_auto_update_schema(self, namespace: str) -> bool:
        """Whether producers may register new schema versions (unset: true, as Pulsar)."""
        p = await self.namespace_policies(namespace)
        return p.is_allow_auto_update_schema if p.HasField("is_allow_auto_update_schema") else True

    async def set_is_allow_auto_update_schema(self, namespace: str, allowed: bool) -> None:
        await self.set_namespace_policy(namespace, is_allow_auto_update_schema=allowed)

    async def schema_validation_enforced(self, namespace: str) -> bool:
        """Whether producers without a schema are refused on topics with one (unset: false)."""
        p = await self.namespace_policies(namespace)
        return p.schema_validation_enforced if p.HasField("schema_validation_enforced") else False

    async def set_schema_validation_enforced(self, namespace: str, enforced: bool) -> None:
        await self.set_namespace_policy(namespace, schema_validation_enforced=enforced)

    # -- schemas (any broker answers: the registry is in ZooKeeper) ------------------
    async def schema(self, topic: str, version: int | None = None) -> pb.TopicSchema:
        """The latest live schema, or ``version``. Raises: SchemaNotFound."""
        request = pb.GetTopicSchemaRequest(topic=topic, version=version)
        return await self.call(lambda s: s.GetTopicSchema(request, timeout=self.timeout))

    async def all_schemas(self, topic: str) -> list[pb.TopicSchema]:
        """The live versions (since the last delete), oldest first."""
        request = pb.GetAllTopicSchemasRequest(topic=topic)
        return list((await self.call(lambda s: s.GetAllTopicSchemas(request, timeout=self.timeout))).versions)

    async def post_schema(self, topic: str, schema: pb.SchemaInfo) -> int:
        """Register ``schema`` (the namespace's strategy applies); its version (an
        identical live one's). Raises: IncompatibleSchema, InvalidSchema, InvalidArgument."""
        request = pb.TopicSchemaRequest(topic=topic, schema=schema)
        return (await self.call(lambda s: s.PostTopicSchema(request, timeout=self.timeout))).version

    async def delete_schema(self, topic: str) -> int | None:
        """The delete's version; None: the topic had no schema."""
        request = pb.DeleteTopicSchemaRequest(topic=topic)
        answer = await self.call(lambda s: s.DeleteTopicSchema(request, timeout=self.timeout))
        return answer.version if answer.HasField("version") else None

    async def test_schema_compatibility(self, topic: str, schema: pb.SchemaInfo) -> pb.SchemaCompatibility:
        """Would ``schema`` be registered? Stores nothing."""
        request = pb.TopicSchemaRequest(topic=topic, schema=schema)
        return await self.call(lambda s: s.TestSchemaCompatibility(request, timeout=self.timeout))

    async def schema_version(self, topic: str, schema: pb.SchemaInfo) -> int:
        """The version of the live schema identical to ``schema``. Raises: SchemaNotFound."""
        request = pb.TopicSchemaRequest(topic=topic, schema=schema)
        return (await self.call(lambda s: s.GetSchemaVersion(request, timeout=self.timeout))).version

    async def bundles(self, namespace: str, bundle: str = "") -> list[pb.BundleOwner]:
        """Each bundle (or the one named) with its owner's address ('' if unowned)."""
        request = pb.LookupBundleRequest(namespace=namespace, bundle=bundle)
        return list((await self.call(lambda s: s.LookupBundle(request, timeout=self.timeout))).bundles)

    async def unload_namespace(self, namespace: str, bundle: str = "") -> list[str]:
        """Unload one bundle (or every owned one) on its owner; returns the bundles
        unloaded. An unowned bundle has nothing to unload."""
        done = []
        for owner in await self.bundles(namespace, bundle):
            if owner.broker_address:
                await self._unload_bundle(namespace, owner.bundle, owner.broker_address)
                done.append(owner.bundle)
        return done

    async def clear_namespace_backlog(self, namespace: str, subscription: str = "") -> int:
        """Clear the backlog of every subscription (or the one named) on every topic of
        the namespace, bundle by bundle on its owner; returns the entries acknowledged."""
        replies = await self._on_bundles(namespace, lambda s, r: s.NamespaceClearBacklog(r, timeout=self.timeout),
                                         subscription)
        return sum(r.entries for r in replies)

    async def unsubscribe_namespace(self, namespace: str, subscription: str) -> int:
        """Delete ``subscription`` on every topic of the namespace that has it; returns how
        many were deleted. Every bundle is checked first: while consumers are connected
        to it anywhere, nothing is deleted (PreconditionFailed)."""
        def call(stub: BrokerStub, request: pb.NamespaceBundleSubscriptionRequest) -> Awaitable[Any]:
            return stub.NamespaceUnsubscribe(request, timeout=self.timeout)

        await self._on_bundles(namespace, call, subscription, check_only=True)
        return sum(r.subscriptions for r in await self._on_bundles(namespace, call, subscription))

    async def _on_bundles(
        self, namespace: str, fn: Callable[[BrokerStub, pb.NamespaceBundleSubscriptionRequest], Awaitable[Any]],
        subscription: str, check_only: bool = False,
    ) -> list[Any]:
        """``fn`` for each bundle of the namespace, on its owner (an unowned one: on a
        service host, which takes it), asked again if the bundle moves meanwhile."""
        replies = []
        for owner in await self.bundles(namespace):
            request = pb.NamespaceBundleSubscriptionRequest(
                namespace=namespace, bundle=owner.bundle, subscription=subscription, check_only=check_only)
            address = owner.broker_address

            async def on_bundle_owner(request: pb.NamespaceBundleSubscriptionRequest = request) -> Any:
                nonlocal address
                try:
                    return await self.call(lambda s: fn(s, request), address or None)
                except NotOwner as exc:
                    address = (await self.bundles(namespace, request.bundle))[0].broker_address
                    raise _Moved(exc) from exc

            try:
                replies.append(await OWNER_RETRY.run(on_bundle_owner, retry_on=_Moved))
            except _Moved as moved:
                raise moved.error from None
        return replies

    async def split_bundle(
        self, namespace: str, bundle: str, algorithm: str = "", unload: bool = False, boundaries: Iterable[int] = (),
    ) -> list[str]:
        """Split ``bundle`` on its owner (an unowned one: on a service host, which takes
        it); returns the bundles made. ``algorithm``: range_equally_divide (empty),
        topic_count_equally_divide or specified_positions_divide (at ``boundaries``).

        Raises:
            PreconditionFailed: no such bundle, nothing to split, too many bundles.
            InvalidArgument: an unknown algorithm, bad boundaries. NamespaceNotFound.
        """
        request = pb.SplitNamespaceBundleRequest(
            namespace=namespace, bundle=bundle, algorithm=algorithm, unload=unload,
            boundaries=[parse_boundary(b) for b in boundaries])  # InvalidArgument: not a 32-bit hash
        # Every bundle, not the one named: a bundle that is none is the broker's to refuse.
        address = next((o.broker_address for o in await self.bundles(namespace) if o.bundle == bundle), "")

        async def on_bundle_owner() -> pb.SplitNamespaceBundleResponse:
            nonlocal address
            try:
                return await self.call(lambda s: s.SplitNamespaceBundle(request, timeout=self.timeout), address or None)
            except NotOwner as exc:
                address = next((o.broker_address for o in await self.bundles(namespace) if o.bundle == bundle), "")
                raise _Moved(exc) from exc

        try:
            return list((await OWNER_RETRY.run(on_bundle_owner, retry_on=_Moved)).bundles)
        except _Moved as moved:
            raise moved.error from None

    async def bundles_data(self, namespace: str) -> pb.NamespaceBundlesData:
        """The namespace's bundle boundaries as stored (Pulsar's BundlesData)."""
        request = pb.GetBundlesDataRequest(namespace=namespace)
        return await self.call(lambda s: s.GetBundlesData(request, timeout=self.timeout))

    async def _unload_bundle(self, namespace: str, bundle: str, address: str) -> None:
        request = pb.UnloadNamespaceBundleRequest(namespace=namespace, bundle=bundle)
        await self.call(lambda s: s.UnloadNamespaceBundle(request, timeout=self.timeout), address)

    # -- permissions (Pulsar's namespace AuthPolicies) -------------------------------
    async def grant_permission(self, namespace: str, role: str, actions: Iterable[str]) -> None:
        """Give ``role`` exactly ``actions`` on the namespace (produce, consume, functions,
        sources, sinks, packages), replacing what it had.

        Raises:
            InvalidArgument: an unknown action; NamespaceNotFound; AuthorizationError.
        """
        request = pb.GrantPermissionRequest(namespace=namespace, role=role, actions=list(actions))
        await self.call(lambda s: s.GrantPermission(request, timeout=self.timeout))

    async def revoke_permission(self, namespace: str, role: str) -> None:
        """Take every action away from ``role`` on the namespace. Raises: NamespaceNotFound."""
        request = pb.RevokePermissionRequest(namespace=namespace, role=role)
        await self.call(lambda s: s.RevokePermission(request, timeout=self.timeout))

    async def grant_subscription_permission(self, namespace: str, subscription: str, roles: Iterable[str]) -> None:
        """Add ``roles`` to the roles that may consume ``subscription`` in the namespace."""
        request = pb.GrantSubscriptionPermissionRequest(namespace=namespace, subscription=subscription, roles=list(roles))
        await self.call(lambda s: s.GrantSubscriptionPermission(request, timeout=self.timeout))

    async def revoke_subscription_permission(self, namespace: str, subscription: str, role: str) -> None:
        """Remove ``role`` from the roles that may consume ``subscription``."""
        request = pb.RevokeSubscriptionPermissionRequest(namespace=namespace, subscription=subscription, role=role)
        await self.call(lambda s: s.RevokeSubscriptionPermission(request, timeout=self.timeout))

    async def get_permissions(self, namespace: str) -> pb.Permissions:
        """The namespace's grants and subscription role lists, as the broker keeps them."""
        request = pb.GetPermissionsRequest(namespace=namespace)
        return await self.call(lambda s: s.GetPermissions(request, timeout=self.timeout))

    async def permissions(self, namespace: str) -> dict[str, list[str]]:
        """Each role and the actions granted to it (Pulsar's ``Map<role, Set<AuthAction>>``)."""
        return _name_sets((await self.get_permissions(namespace)).roles)

    async def subscription_permissions(self, namespace: str) -> dict[str, list[str]]:
        """Each subscription limited to some roles, and those roles."""
        return _name_sets((await self.get_permissions(namespace)).subscriptions)

    async def grant_topic_permission(self, topic: str, role: str, actions: Iterable[str]) -> None:
        """Give ``role`` exactly ``actions`` on ``topic`` (in addition to its namespace grant).

        Raises: InvalidArgument: an unknown action; NamespaceNotFound; AuthorizationError."""
        request = pb.GrantTopicPermissionRequest(topic=topic, role=role, actions=list(actions))
        await self.call(lambda s: s.GrantTopicPermission(request, timeout=self.timeout))

    async def revoke_topic_permission(self, topic: str, role: str) -> None:
        """Take ``role``'s grant on ``topic`` away. Raises: PreconditionFailed (none there)."""
        request = pb.RevokeTopicPermissionRequest(topic=topic, role=role)
        await self.call(lambda s: s.RevokeTopicPermission(request, timeout=self.timeout))

    async def topic_permissions(self, topic: str) -> dict[str, list[str]]:
        """Each role and its actions on ``topic`` (namespace and topic grants together)."""
        request = pb.GetTopicPermissionsRequest(topic=topic)
        return _name_sets((await self.call(lambda s: s.GetTopicPermissions(request, timeout=self.timeout))).roles)

    # -- topics --------------------------------------------------------------------
    async def topics(self, namespace: str) -> list[str]:
        request = pb.ListTopicsRequest(namespace=namespace)
        return list((await self.call(lambda s: s.ListTopics(request, timeout=self.timeout))).names)

    async def non_persistent_topics(self, namespace: str) -> list[str]:
        """The non-persistent topics of ``namespace`` loaded now: each owner of one of its
        bundles lists those it serves (they exist nowhere else), sorted."""
        request = pb.ListTopicsRequest(namespace=namespace, non_persistent=True)
        owners = {b.broker_address for b in await self.bundles(namespace) if b.broker_address}
        names: set[str] = set()
        for address in sorted(owners):
            names.update((await self.call(lambda s: s.ListTopics(request, timeout=self.timeout), address)).names)
        return sorted(names)

    async def create_topic(self, topic: str, partitions: int = 0) -> None:
        """A non-partitioned topic, or (``partitions`` > 0) a partitioned one; a
        non-persistent one is loaded on its owner."""
        request = pb.CreateTopicRequest(topic=topic, partitions=partitions)
        if topic.startswith("non-persistent://"):
            await self.on_owner(topic, lambda s: s.CreateTopic(request, timeout=self.timeout))
            return
        await self.call(lambda s: s.CreateTopic(request, timeout=self.timeout))

    async def create_topics(self, namespace: str, topics: Sequence[str]) -> list[MagnetarError | None]:
        """Non-partitioned persistent topics of ``namespace``, created in one call (at most
        1,000); returns each one's error (None: created), in order.

        Raises:
            InvalidArgument: a topic of another namespace or domain, a partition's name,
                too many topics (nothing is created).
        """
        request = pb.CreateTopicsRequest(namespace=namespace, topics=list(topics))
        answer = await self.call(lambda s: s.CreateTopics(request, timeout=self.timeout))
        return [from_code(r.error_code, r.message) if r.error_code else None for r in answer.results]

    async def topic_properties(self, topic: str) -> dict[str, str]:
        """The topic's properties (of a partitioned topic, its partitions' merged)."""
        out: dict[str, str] = {}
        for answer in await self.on_partitions(topic, lambda s, t: s.GetTopicProperties(
            pb.TopicPropertiesRequest(topic=t), timeout=self.timeout,
        )):
            out.update(answer.properties)
        return out

    async def update_topic_properties(self, topic: str, properties: dict[str, str]) -> None:
        """Merge ``properties`` into the topic's (every partition's)."""
        await self.on_partitions(topic, lambda s, t: s.UpdateTopicProperties(
            pb.TopicPropertiesRequest(topic=t, properties=properties), timeout=self.timeout,
        ))

    async def remove_topic_property(self, topic: str, key: str) -> None:
        """Remove ``key`` from the topic's properties (every partition's)."""
        await self.on_partitions(topic, lambda s, t: s.RemoveTopicProperty(
            pb.TopicPropertiesRequest(topic=t, key=key), timeout=self.timeout,
        ))

    async def delete_topic(self, topic: str, force: bool = False) -> None:
        request = pb.DeleteTopicRequest(topic=topic, force=force)
        await self.on_owner(topic, lambda s: s.DeleteTopic(request, timeout=self.timeout), lookup_first=False)

    async def unload_topic(self, topic: str) -> None:
        await self.on_partitions(topic, lambda s, t: s.UnloadTopic(pb.UnloadTopicRequest(topic=t), timeout=self.timeout))

    async def topic_stats(self, topic: str) -> pb.TopicStats:
        request = pb.TopicStatsRequest(topic=topic)
        return await self.on_owner(topic, lambda s: s.GetTopicStats(request, timeout=self.timeout), lookup_first=False)

    async def namespace_topic_stats(self, namespace: str, broker: str) -> list[pb.TopicStats]:
        """The stats of the topics of ``namespace`` the broker at ``broker`` has loaded."""
        request = pb.NamespaceTopicStatsRequest(namespace=namespace)
        response = await self.call(lambda s: s.GetNamespaceTopicStats(request, timeout=self.timeout), broker)
        return list(response.topics)

    async def live_load_report(self, broker: str) -> dict[str, Any]:
        """The load of the broker at ``broker`` measured now (Pulsar's LocalBrokerData)."""
        response = await self.call(lambda s: s.GetLiveLoadReport(pb.LiveLoadReportRequest(), timeout=self.timeout), broker)
        doc: dict[str, Any] = json.loads(response.json)
        return doc

    async def partition_stats(self, topic: str) -> list[pb.TopicStats]:
        """The stats of every partition, in order (of ``topic`` itself when not partitioned)."""
        return await self.on_partitions(
            topic, lambda s, t: s.GetTopicStats(pb.TopicStatsRequest(topic=t), timeout=self.timeout),
        )

    async def trigger_compaction(self, topic: str) -> None:
        """Compact a non-partitioned topic or one partition in the background (its owner
        broker runs it). Raises: AlreadyExists: a compaction of it is running."""
        request = pb.CompactionRequest(topic=topic)
        await self.on_owner(topic, lambda s: s.TriggerCompaction(request, timeout=self.timeout))

    async def compaction_status(self, topic: str) -> pb.CompactionStatus:
        """The status of the last compaction of a non-partitioned topic or one partition
        on its owner broker (NOT_RUN, RUNNING, SUCCESS or ERROR, and the last error)."""
        request = pb.CompactionRequest(topic=topic)
        return await self.on_owner(topic, lambda s: s.GetCompactionStatus(request, timeout=self.timeout))

    async def internal_stats(self, topic: str) -> pb.InternalStats:
        """The managed ledger's figures of a non-partitioned topic or one partition."""
        request = pb.InternalStatsRequest(topic=topic)
        return await self.on_owner(topic, lambda s: s.GetInternalStats(request, timeout=self.timeout))

    async def terminate_topic(self, topic: str) -> pb.MessageIdData:
        """Terminate a non-partitioned topic or one partition: it takes no more producers
        or messages, and its consumers learn they reached its end once they have read
        everything. Returns its last message id (entry_id -1: none in that ledger).

        Raises:
            TopicNotFound; InvalidTopicName: a partitioned topic's own name (see
            :meth:`terminate_partitioned_topic`).
        """
        request = pb.TerminateTopicRequest(topic=topic)
        return await self.on_owner(topic, lambda s: s.TerminateTopic(request, timeout=self.timeout))

    async def terminate_partitioned_topic(self, topic: str) -> list[pb.MessageIdData]:
        """Terminate every partition of a partitioned topic; their last message ids, in
        partition order.

        Raises:
            TopicNotFound: not a partitioned topic.
        """
        name = TopicName.parse(topic)
        count = await self.pool.partitions(str(name))
        if name.is_partition or not count:
            raise TopicNotFound(f"{topic} is not a partitioned topic")
        return [await self.terminate_topic(str(name.partition(i))) for i in range(count)]

    async def message_id_by_timestamp(self, topic: str, timestamp_ms: int) -> pb.MessageIdData:
        """The first message of a non-partitioned topic or one partition published at or
        after ``timestamp_ms``.

        Raises:
            NotFound: none was; InvalidArgument: a negative time.
        """
        request = pb.MessageIdByTimestampRequest(topic=topic, timestamp_ms=timestamp_ms)
        return await self.on_owner(topic, lambda s: s.GetMessageIdByTimestamp(request, timeout=self.timeout))

    async def message_by_id(self, topic: str, ledger_id: int, entry_id: int) -> pb.PeekMessageResponse:
        """The message stored at ``ledger_id:entry_id`` of a non-partitioned topic or one
        partition (of a batch, its first message), read without changing anything.

        Raises:
            NoSuchEntry: no such entry on the topic; InvalidArgument: a negative id.
        """
        request = pb.GetMessageByIdRequest(topic=topic, ledger_id=ledger_id, entry_id=entry_id)
        return await self.on_owner(topic, lambda s: s.GetMessageById(request, timeout=self.timeout))

    async def last_message_id(self, topic: str) -> pb.MessageIdData:
        """The last stored entry of a non-partitioned topic or one partition."""
        return await self.pool.last_message_id(topic)

    async def partitions(self, topic: str) -> int:
        """The partition count (0: not partitioned)."""
        return await self.pool.partitions(topic)

    async def update_partitions(self, topic: str, partitions: int) -> None:
        """Grow a partitioned topic to ``partitions``. The broker first creates each
        durable subscription of its partitions on the new ones, at their start (as
        Pulsar does, so nothing published there is missed), and raises the count last: a
        failed grow leaves the topic as it was. Producers and consumers already open add
        the new partitions within their ``auto_update_partitions_interval_seconds``.

        Raises:
            TopicNotFound: not a partitioned topic; InvalidArgument: fewer partitions.
        """
        request = pb.UpdatePartitionsRequest(topic=topic, partitions=partitions)
        await self.call(lambda s: s.UpdatePartitions(request, timeout=self.timeout))

    async def delete_partitioned_topic(self, topic: str, force: bool = False) -> None:
        """Delete every partition (each on its owner), then the partitioned topic. Without
        ``force`` nothing is deleted while a partition has producers or consumers.

        Raises:
            TopicNotFound: not a partitioned topic; PreconditionFailed: clients connected.
        """
        count = await self.partitions(topic)
        if not count:
            raise TopicNotFound(f"partitioned topic {topic} does not exist")
        if not force:
            for stats in await self.partition_stats(topic):
                if stats.producers or any(s.consumers for s in stats.subscriptions):
                    raise PreconditionFailed(f"topic {stats.topic} has connected producers or consumers; close them first")
        base = TopicName.parse(topic)
        for i in range(count):
            try:
                await self.delete_topic(str(base.partition(i)), force=True)
            except TopicNotFound:
                pass  # never used: nothing stored
        await self.delete_topic(topic, force=True)  # the partitions are gone: drops the metadata

    async def create_missed_partitions(self, topic: str) -> list[str]:
        """Give each declared partition of a partitioned topic that lacks one its managed
        ledger (each on its owner); returns the partitions created.

        Raises: TopicNotFound: not a partitioned topic.
        """
        if TopicName.parse(topic).is_partition or not await self.partitions(topic):
            raise TopicNotFound(f"Partitioned Topic not found: {topic}")
        created = await self.on_partitions(topic, lambda s, t: s.CreateMissedPartitions(
            pb.CreateMissedPartitionsRequest(topic=t), timeout=self.timeout))
        count = len(created)
        base = TopicName.parse(topic)
        return [str(base.partition(i)) for i in range(count) if created[i].created]

    async def bundle_range(self, topic: str) -> str:
        """The bundle of its namespace the topic falls in (e.g. ``0x40000000_0x80000000``).

        Raises: InvalidArgument (a bad name), NamespaceNotFound.
        """
        name = TopicName.parse(topic)
        return bundles_of_names(o.bundle for o in await self.bundles(str(name.namespace))).bundle_of(name)

    async def lookup(self, topic: str) -> str:
        """The ``host:port`` of the broker serving ``topic``."""
        return await self.pool.lookup(topic)

    async def lookup_owner(self, topic: str) -> TopicOwner:
        """The broker serving ``topic``: its ``host:port`` and its Pulsar protocol URLs."""
        return await self.pool.lookup_owner(topic)

    # -- subscriptions (on every target partition's owner) -------------------------
    async def subscriptions(self, topic: str) -> list[str]:
        """The subscriptions of the topic (of any of its partitions), sorted."""
        lists = await self.on_partitions(
            topic, lambda s, t: s.ListSubscriptions(pb.ListSubscriptionsRequest(topic=t), timeout=self.timeout)
        )
        return sorted({name for reply in lists for name in reply.names})

    async def create_subscription(self, topic: str, subscription: str, message_id: MessageId = MessageId.latest) -> None:
        mid = message_id.to_proto()
        await self.on_partitions(topic, lambda s, t: s.CreateSubscription(
            pb.CreateSubscriptionRequest(topic=t, subscription=subscription, message_id=mid), timeout=self.timeout,
        ), mid, whole_topic=True)

    async def delete_subscription(self, topic: str, subscription: str, force: bool = False) -> None:
        await self.on_partitions(topic, lambda s, t: s.DeleteSubscription(
            pb.DeleteSubscriptionRequest(topic=t, subscription=subscription, force=force), timeout=self.timeout,
        ))

    async def skip(self, topic: str, subscription: str, count: int) -> None:
        """Acknowledge the next ``count`` entries (>= 1) of the subscription."""
        await self._skip(topic, subscription, count, every=False)

    async def clear_backlog(self, topic: str, subscription: str) -> None:
        await self._skip(topic, subscription, 0, every=True)

    async def _skip(self, topic: str, subscription: str, count: int, every: bool) -> None:
        await self.on_partitions(topic, lambda s, t: s.SkipMessages(
            pb.SkipMessagesRequest(topic=t, subscription=subscription, count=count, all=every), timeout=self.timeout,
        ))

    async def reset_cursor(self, topic: str, subscription: str, message_id: MessageId) -> None:
        mid = message_id.to_proto()
        await self.on_partitions(topic, lambda s, t: s.ResetCursor(
            pb.ResetCursorRequest(topic=t, subscription=subscription, message_id=mid), timeout=self.timeout,
        ), mid)

    async def reset_cursor_to_time(self, topic: str, subscription: str, timestamp_ms: int) -> None:
        await self.on_partitions(topic, lambda s, t: s.ResetCursor(
            pb.ResetCursorRequest(topic=t, subscription=subscription, timestamp_ms=timestamp_ms), timeout=self.timeout,
        ))

    async def expire_messages(self, topic: str, subscription: str, expire_time_s: int) -> None:
        """Acknowledge every message published more than ``expire_time_s`` seconds ago."""
        await self.on_partitions(topic, lambda s, t: s.ExpireMessages(
            pb.ExpireMessagesRequest(topic=t, subscription=subscription, expire_time_s=expire_time_s),
            timeout=self.timeout,
        ))

    async def expire_messages_all_subscriptions(self, topic: str, expire_time_s: int) -> None:
        """On every subscription (of every partition), acknowledge every message published
        more than ``expire_time_s`` seconds ago."""
        await self.on_partitions(topic, lambda s, t: s.ExpireMessages(
            pb.ExpireMessagesRequest(topic=t, expire_time_s=expire_time_s, all_subscriptions=True), timeout=self.timeout,
        ))

    async def subscription_properties(self, topic: str, subscription: str) -> dict[str, str]:
        """The subscription's properties (of a partitioned topic, every partition's merged)."""
        out: dict[str, str] = {}
        for answer in await self.on_partitions(topic, lambda s, t: s.GetSubscriptionProperties(
            pb.SubscriptionPropertiesRequest(topic=t, subscription=subscription), timeout=self.timeout,
        )):
            out.update(answer.properties)
        return out

    async def update_subscription_properties(self, topic: str, subscription: str, properties: dict[str, str]) -> None:
        """Replace the subscription's properties (on every partition)."""
        await self.on_partitions(topic, lambda s, t: s.UpdateSubscriptionProperties(
            pb.SubscriptionPropertiesRequest(topic=t, subscription=subscription, properties=properties),
            timeout=self.timeout,
        ))

    async def peek_message(self, topic: str, subscription: str, position: int) -> pb.PeekMessageResponse:
        """The ``position``-th message (1: the first) ``subscription`` has not acknowledged,
        read without changing anything (``found`` False: it has fewer). A non-partitioned
        topic or one partition."""
        request = pb.PeekMessageRequest(topic=topic, subscription=subscription, position=position)
        return await self.on_owner(topic, lambda s: s.PeekMessage(request, timeout=self.timeout))

    async def peek_messages(self, topic: str, subscription: str, position: int, count: int) -> list[pb.PeekMessageResponse]:
        """Up to ``count`` messages from the ``position``-th one ``subscription`` has not
        acknowledged on, in order, read without changing anything. One topic or partition."""
        request = pb.PeekMessageRequest(topic=topic, subscription=subscription, position=position, count=count)
        return list((await self.on_owner(topic, lambda s: s.PeekMessages(request, timeout=self.timeout))).messages)

    async def examine_message(self, topic: str, start: Start, position: int) -> pb.PeekMessageResponse:
        """The ``position``-th message from the first (``earliest``) or back from the last
        (``latest``) one, acknowledged or not.

        Raises:
            PreconditionFailed: the topic holds no messages.
        """
        where = pb.EARLIEST if start == "earliest" else pb.LATEST
        request = pb.PeekMessageRequest(topic=topic, position=position, start=where)
        return await self.on_owner(topic, lambda s: s.PeekMessage(request, timeout=self.timeout))


class _Moved(Exception):
    """The owner's call said NotOwner: the topic moved after the lookup."""

    def __init__(self, error: NotOwner) -> None:
        super().__init__(str(error))
        self.error = error


def _bound(fn: Callable[[BrokerStub, str], Awaitable[R]], topic: str) -> Call[R]:
    return lambda stub: fn(stub, topic)


def _name_sets(sets: Mapping[str, pb.NameSet]) -> dict[str, list[str]]:
    """``{key: sorted names}``, keys sorted (the answer does not depend on map order)."""
    return {key: sorted(sets[key].names) for key in sorted(sets)}

