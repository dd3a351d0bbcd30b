"""The admin client over the gateway's REST API (Pulsar's admin v2 paths), for
``magnetar admin --admin-url http://host:8080``, as ``pulsar-admin --admin-url`` works.

It offers the methods of :class:`magnetar.client.admin.AdminClient` that ``magnetar
admin`` uses, with the same answers (the broker's protobuf messages), so the command's
output does not depend on the door; plus the gateway's own resources (bookies, ledgers,
dead letters) as JSON. An error answer becomes the typed error of its status, with the
gateway's ``reason`` as its message.
"""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import Iterable
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx

from magnetar.common import errors as e
from magnetar.common.message_id import MessageId
from magnetar.common.names import TopicName
from magnetar.common.tls import ClientTls, https_context
from magnetar.proto.v1 import broker_pb2 as pb

from .schema_json import definition_text, schema_from_json, type_name

_ERRORS: dict[int, type[e.MagnetarError]] = {
    400: e.InvalidArgument, 401: e.AuthenticationError, 403: e.AuthorizationError, 404: e.NotFound, 405: e.InvalidArgument, 406: e.InvalidArgument,
    409: e.AlreadyExists, 412: e.PreconditionFailed, 422: e.InvalidArgument,
    503: e.NotConnected, 504: e.Timeout,
}
_TYPES = {"Exclusive": pb.EXCLUSIVE, "Shared": pb.SHARED, "Failover": pb.FAILOVER, "Key_Shared": pb.KEY_SHARED}


def cluster_json(data: pb.ClusterData) -> dict[str, str]:
    """Pulsar's ClusterData JSON of ``data`` (unset URLs left out)."""
    return {k: v for k, v in (
        ("serviceUrl", data.service_url), ("serviceUrlTls", data.service_url_tls),
        ("brokerServiceUrl", data.broker_service_url), ("brokerServiceUrlTls", data.broker_service_url_tls),
    ) if v}


class RestAdmin:
    """Administer a cluster through its gateway at ``admin_url`` (``http://host:8080``)."""

    def __init__(
        self, admin_url: str, timeout_s: float = 30.0, *, tls: ClientTls | None = None, token: str | None = None,
        authorization: str | None = None,
    ) -> None:
        """``tls``: how an ``https://`` gateway is verified (its CAs, a client certificate;
        None: the system's roots); ``token``: sent as ``Authorization: Bearer`` with every
        request; ``authorization``: sent as the ``Authorization`` header instead."""
        self.admin_url = admin_url.rstrip("/")
        verify: ssl.SSLContext | bool = https_context(tls) if tls is not None else True
        header = authorization or (f"Bearer {token}" if token else None)
        headers = {"Authorization": header} if header else None
        self._http = httpx.AsyncClient(base_url=self.admin_url, timeout=timeout_s, verify=verify, headers=headers)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> RestAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def request(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        """The JSON answer (None for an empty one).

        Raises:
            MagnetarError: the typed error of an error status, or NotConnected when the
                gateway cannot be reached.
        """
        response = await self._send(method, path, body, params)
        if not response.content:
            return None
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.content

    async def _send(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> httpx.Response:
        """The answer of a success status (see :meth:`request`)."""
        try:
            response = await self._http.request(method, path, json=body, params=params)
        except httpx.TimeoutException as exc:
            raise e.Timeout(f"the gateway at {self.admin_url} did not answer in time") from exc
        except httpx.HTTPError as exc:
            raise e.NotConnected(f"cannot reach the gateway at {self.admin_url}: {exc}") from exc
        if response.status_code >= 400:
            try:
                reason = str(response.json()["reason"])
            except (ValueError, KeyError, TypeError):
                reason = response.text.strip()[:300] or response.reason_phrase
            raise _ERRORS.get(response.status_code, e.MagnetarError)(f"{reason} (HTTP {response.status_code})")
        return response

    # -- tenants -------------------------------------------------------------------
    async def clusters(self) -> list[str]:
        return list(await self.request("GET", "/admin/v2/clusters"))

    async def create_cluster(self, cluster: str, data: pb.ClusterData) -> None:
        await self.request("PUT", f"/admin/v2/clusters/{_seg(cluster)}", cluster_json(data))

    async def update_cluster(self, cluster: str, data: pb.ClusterData) -> None:
        await self.request("POST", f"/admin/v2/clusters/{_seg(cluster)}", cluster_json(data))

    async def cluster(self, cluster: str) -> pb.ClusterData:
        doc = await self.request("GET", f"/admin/v2/clusters/{_seg(cluster)}")
        return pb.ClusterData(
            service_url=doc.get("serviceUrl") or "", service_url_tls=doc.get("serviceUrlTls") or "",
            broker_service_url=doc.get("brokerServiceUrl") or "",
            broker_service_url_tls=doc.get("brokerServiceUrlTls") or "",
        )

    async def delete_cluster(self, cluster: str) -> None:
        await self.request("DELETE", f"/admin/v2/clusters/{_seg(cluster)}")

    async def tenants(self) -> list[str]:
        return list(await self.request("GET", "/admin/v2/tenants"))

    async def tenant(self, tenant: str) -> pb.TenantInfo:
        info = await self.request("GET", f"/admin/v2/tenants/{_seg(tenant)}")
        return pb.TenantInfo(admin_roles=info.get("adminRoles") or [], allowed_clusters=info.get("allowedClusters") or [])

    async def update_tenant(self, tenant: str, info: pb.TenantInfo) -> None:
        body = {"adminRoles": list(info.admin_roles), "allowedClusters": list(info.allowed_clusters)}
        await self.request("POST", f"/admin/v2/tenants/{_seg(tenant)}", body)

    async def create_tenant(self, tenant: str, info: pb.TenantInfo | None = None) -> None:
        """Without ``info``: no admin roles, allowed on the cluster (as pulsar-admin)."""
        if info is None:
            info = pb.TenantInfo(allowed_clusters=await self.clusters())
        body = {"adminRoles": list(info.admin_roles), "allowedClusters": list(info.allowed_clusters)}
        await self.request("PUT", f"/admin/v2/tenants/{_seg(tenant)}", body)

    async def delete_tenant(self, tenant: str) -> None:
        await self.request("DELETE", f"/admin/v2/tenants/{_seg(tenant)}")

    # -- namespaces ----------------------------------------------------------------
    async def namespaces(self, tenant: str) -> list[str]:
        return list(await self.request("GET", f"/admin/v2/namespaces/{_seg(tenant)}"))

    async def create_namespace(
        self, namespace: str, policies: pb.NamespacePolicies | None = None, permissions: pb.Permissions | None = None,
    ) -> None:
        """A Policies body with what ``policies`` says of replication clusters and
        ``permissions`` (the CLI's ``namespaces create --clusters``); no body without either."""
        body: dict[str, Any] = {}
        if policies is not None and policies.replication_clusters:
            body["replication_clusters"] = list(policies.replication_clusters)
        if permissions is not None:
            body["auth_policies"] = {
                "namespace_auth": {r: list(a.names) for r, a in permissions.roles.items()},
                "subscription_auth_roles": {s: list(r.names) for s, r in permissions.subscriptions.items()},
            }
        await self.request("PUT", _ns(namespace), body or None)

    async def delete_namespace(self, namespace: str) -> None:
        await self.request("DELETE", _ns(namespace))

    async def retention(self, namespace: str) -> pb.RetentionPolicies:
        got = await self.request("GET", _ns(namespace, "retention")) or {}
        return pb.RetentionPolicies(
            retention_time_minutes=got.get("retentionTimeInMinutes", 0), retention_size_mb=got.get("retentionSizeInMB", 0)
        )

    async def set_retention(self, namespace: str, policies: pb.RetentionPolicies) -> None:
        body = {"retentionTimeInMinutes": policies.retention_time_minutes, "retentionSizeInMB": policies.retention_size_mb}
        await self.request("POST", _ns(namespace, "retention"), body)

    async def dead_letter_policy(self, namespace: str) -> pb.DeadLetterPolicy:
        got = await self.request("GET", _ns(namespace, "deadLetterPolicy")) or {}
        return pb.DeadLetterPolicy(
            max_redeliver_count=got.get("maxRedeliverCount") or 0, retry_letter_topic=got.get("retryLetterTopic") or "",
            dead_letter_topic=got.get("deadLetterTopic") or "",
            initial_subscription_name=got.get("initialSubscriptionName") or "",
        )

    async def set_dead_letter_policy(self, namespace: str, policy: pb.DeadLetterPolicy) -> None:
        body = {
            "maxRedeliverCount": policy.max_redeliver_count or None, "retryLetterTopic": policy.retry_letter_topic or None,
            "deadLetterTopic": policy.dead_letter_topic or None,
            "initialSubscriptionName": policy.initial_subscription_name or None,
        }
        if any(v is not None for v in body.values()):
            await self.request("POST", _ns(namespace, "deadLetterPolicy"), body)
        else:
            await self.request("DELETE", _ns(namespace, "deadLetterPolicy"))

    async def publish_rate(self, namespace: str) -> pb.PublishRate | None:
        got = await self.request("GET", _ns(namespace, "publishRate"))
        if got is None:
            return None
        return pb.PublishRate(msg_rate=got.get("publishThrottlingRateInMsg", -1), byte_rate=got.get("publishThrottlingRateInByte", -1))

    async def set_publish_rate(self, namespace: str, rate: pb.PublishRate) -> None:
        body = {"publishThrottlingRateInMsg": rate.msg_rate, "publishThrottlingRateInByte": rate.byte_rate}
        await self.request("POST", _ns(namespace, "publishRate"), body)

    async def remove_publish_rate(self, namespace: str) -> None:
        await self.request("DELETE", _ns(namespace, "publishRate"))

    async def dispatch_rate(self, namespace: str) -> pb.DispatchRate | None:
        got = await self.request("GET", _ns(namespace, "dispatchRate"))
        if got is None:
            return None
        return pb.DispatchRate(
            msg_rate=got.get("dispatchThrottlingRateInMsg", -1), byte_rate=got.get("dispatchThrottlingRateInByte", -1),
            relative_to_publish_rate=got.get("relativeToPublishRate", False), period_s=got.get("ratePeriodInSecond", 1),
        )

    async def set_dispatch_rate(self, namespace: str, rate: pb.DispatchRate) -> None:
        body = {
            "dispatchThrottlingRateInMsg": rate.msg_rate, "dispatchThrottlingRateInByte": rate.byte_rate,
            "relativeToPublishRate": rate.relative_to_publish_rate, "ratePeriodInSecond": rate.period_s,
        }
        await self.request("POST", _ns(namespace, "dispatchRate"), body)

    async def remove_dispatch_rate(self, namespace: str) -> None:
        await self.request("DELETE", _ns(namespace, "dispatchRate"))

    async def bundles(self, namespace: str, bundle: str = "") -> list[pb.BundleOwner]:
        owners = (await self.request("GET", _ns(namespace, "bundles")))["owners"]
        return [pb.BundleOwner(bundle=b, broker_address=o or "") for b, o in owners.items() if not bundle or b == bundle]

    async def unload_namespace(self, namespace: str, bundle: str = "") -> list[str]:
        if bundle:
            await self.request("PUT", _ns(namespace, _seg(bundle), "unload"))
            return [bundle]
        await self.request("PUT", _ns(namespace, "unload"))
        return []

    async def split_bundle(
        self, namespace: str, bundle: str, algorithm: str = "", unload: bool = False, boundaries: Iterable[int] = (),
    ) -> list[str]:
        """As AdminClient.split_bundle; the bundles made are those listed after the split
        and not before (Pulsar's route answers 204, no body)."""
        before = {o.bundle for o in await self.bundles(namespace)}
        params: dict[str, Any] = {"unload": str(unload).lower()}
        if algorithm:
            params["splitAlgorithmName"] = algorithm
        await self.request("PUT", _ns(namespace, _seg(bundle), "split"), list(boundaries) or None, params)
        return [o.bundle for o in await self.bundles(namespace) if o.bundle not in before]

    async def create_missed_partitions(self, topic: str) -> None:
        await self.request("POST", _topic(topic, "createMissedPartitions"))

    async def bundle_range(self, topic: str) -> str:
        return str(await self.request("GET", f"/lookup/v2/topic/persistent/{topic_path(TopicName.parse(topic))}/bundle"))

    async def clear_namespace_backlog(self, namespace: str, subscription: str = "") -> None:
        await self.request("POST", _ns(namespace, "clearBacklog", *([_seg(subscription)] if subscription else [])))

    async def unsubscribe_namespace(self, namespace: str, subscription: str) -> None:
        await self.request("POST", _ns(namespace, "unsubscribe", _seg(subscription)))

    # -- permissions -----------------------------------------------------------------
    async def grant_permission(self, namespace: str, role: str, actions: Iterable[str]) -> None:
        await self.request("POST", _ns(namespace, "permissions", _seg(role)), list(actions))

    async def revoke_permission(self, namespace: str, role: str) -> None:
        await self.request("DELETE", _ns(namespace, "permissions", _seg(role)))

    async def grant_subscription_permission(self, namespace: str, subscription: str, roles: Iterable[str]) -> None:
        await self.request("POST", _ns(namespace, "permissions", "subscription", _seg(subscription)), list(roles))

    async def revoke_subscription_permission(self, namespace: str, subscription: str, role: str) -> None:
        await self.request("DELETE", _ns(namespace, "permissions", _seg(subscription), _seg(role)))

    async def permissions(self, namespace: str) -> dict[str, list[str]]:
        got = await self.request("GET", _ns(namespace, "permissions")) or {}
        return {role: sorted(got[role]) for role in sorted(got)}

    async def grant_topic_permission(self, topic: str, role: str, actions: Iterable[str]) -> None:
        await self.request("POST", _topic(topic, "permissions", _seg(role)), list(actions))

    async def revoke_topic_permission(self, topic: str, role: str) -> None:
        await self.request("DELETE", _topic(topic, "permissions", _seg(role)))

    async def topic_permissions(self, topic: str) -> dict[str, list[str]]:
        got = await self.request("GET", _topic(topic, "permissions")) or {}
        return {role: sorted(got[role]) for role in sorted(got)}

    async def subscription_permissions(self, namespace: str) -> dict[str, list[str]]:
        got = await self.request("GET", _ns(namespace, "permissions", "subscription")) or {}
        return {sub: sorted(got[sub]) for sub in sorted(got)}

    # -- topics --------------------------------------------------------------------
    async def topics(self, namespace: str) -> list[str]:
        """As the broker lists them: a partitioned topic by its own name, not its partitions
        (Pulsar's REST list names the partitions)."""
        partitioned = set(await self.request("GET", f"/admin/v2/persistent/{namespace}/partitioned"))
        names = await self.request("GET", f"/admin/v2/persistent/{namespace}")
        parents = {str(TopicName.parse(n).partitioned_topic_name) for n in names}
        return sorted(n for n in parents | partitioned if n in partitioned or n in names)

    async def non_persistent_topics(self, namespace: str) -> list[str]:
        """The non-persistent topics of ``namespace`` loaded now."""
        return sorted(await self.request("GET", f"/admin/v2/non-persistent/{namespace}"))

    async def create_topic(self, topic: str, partitions: int = 0) -> None:
        if partitions:
            await self.request("PUT", _topic(topic, "partitions"), partitions)
        else:
            await self.request("PUT", _topic(topic))

    async def topic_properties(self, topic: str) -> dict[str, str]:
        return dict(await self.request("GET", _topic(topic, "properties")))

    async def update_topic_properties(self, topic: str, properties: dict[str, str]) -> None:
        await self.request("PUT", _topic(topic, "properties"), properties)

    async def remove_topic_property(self, topic: str, key: str) -> None:
        await self.request("DELETE", _topic(topic, "properties"), params={"key": key})

    async def delete_topic(self, topic: str, force: bool = False) -> None:
        await self.request("DELETE", _topic(topic), params={"force": str(force).lower()})

    async def unload_topic(self, topic: str) -> None:
        await self.request("PUT", _topic(topic, "unload"))

    async def trigger_compaction(self, topic: str) -> None:
        await self.request("PUT", _topic(topic, "compaction"))

    async def compaction_status(self, topic: str) -> pb.CompactionStatus:
        status = await self.request("GET", _topic(topic, "compaction"))
        return pb.CompactionStatus(status=status["status"], last_error=status.get("lastError") or "")

    async def terminate_topic(self, topic: str) -> pb.MessageIdData:
        """See :meth:`magnetar.client.admin.AdminClient.terminate_topic`."""
        return _message_id(await self.request("POST", _topic(topic, "terminate")))

    async def terminate_partitioned_topic(self, topic: str) -> list[pb.MessageIdData]:
        """See :meth:`magnetar.client.admin.AdminClient.terminate_partitioned_topic`."""
        ids = await self.request("POST", _topic(topic, "terminate/partitions"))
        return [_message_id(ids[k]) for k in sorted(ids, key=int)]

    async def message_id_by_timestamp(self, topic: str, timestamp_ms: int) -> pb.MessageIdData:
        """See :meth:`magnetar.client.admin.AdminClient.message_id_by_timestamp`."""
        return _message_id(await self.request("GET", _topic(topic, f"messageid/{timestamp_ms}")))

    async def message_by_id(self, topic: str, ledger_id: int, entry_id: int) -> pb.PeekMessageResponse:
        """See :meth:`magnetar.client.admin.AdminClient.message_by_id` (read back from the
        answer's ``X-Pulsar-*`` headers: id, publish time, producer, sequence id,
        properties, key)."""
        return _peeked(await self._send("GET", _topic(topic, f"ledger/{ledger_id}/entry/{entry_id}")))

    async def peek_message(self, topic: str, subscription: str, position: int) -> pb.PeekMessageResponse:
        """See :meth:`magnetar.client.admin.AdminClient.peek_message` (NotFound: it has fewer)."""
        return _peeked(await self._send("GET", _topic(topic, "subscription", _seg(subscription), "position", str(position))))

    async def examine_message(self, topic: str, start: str, position: int) -> pb.PeekMessageResponse:
        """See :meth:`magnetar.client.admin.AdminClient.examine_message`."""
        params = {"initialPosition": start, "messagePosition": position}
        return _peeked(await self._send("GET", _topic(topic, "examinemessage"), params=params))

    async def expire_messages(self, topic: str, subscription: str, expire_time_s: int) -> None:
        await self.request("POST", _topic(topic, "subscription", _seg(subscription), "expireMessages", str(expire_time_s)))

    async def partitions(self, topic: str) -> int:
        """The partition count (0: not partitioned)."""
        return int((await self.request("GET", _topic(topic, "partitions")))["partitions"])

    async def update_partitions(self, topic: str, partitions: int) -> None:
        await self.request("POST", _topic(topic, "partitions"), partitions)

    async def delete_partitioned_topic(self, topic: str, force: bool = False) -> None:
        await self.request("DELETE", _topic(topic, "partitions"), params={"force": str(force).lower()})

    async def last_message_id(self, topic: str) -> pb.MessageIdData:
        return _message_id(await self.request("GET", _topic(topic, "lastMessageId")))

    async def expire_messages_all_subscriptions(self, topic: str, expire_time_s: int) -> None:
        await self.request("POST", _topic(topic, f"all_subscription/expireMessages/{expire_time_s}"))

    async def topic_stats(self, topic: str) -> pb.TopicStats:
        """Pulsar's stats and internal stats, as the broker's TopicStats."""
        stats = await self.request("GET", _topic(topic, "stats"))
        # A non-persistent topic has no managed ledger (and no internalStats route).
        internal = await self.request("GET", _topic(topic, "internalStats")) if TopicName.parse(topic).is_persistent else {}
        subs = [
            pb.SubscriptionStats(
                name=name, type=_TYPES.get(s.get("type", ""), pb.EXCLUSIVE), backlog=s.get("msgBacklog", 0),
                consumers=len(s.get("consumers", [])), unacked=s.get("unackedMessages", 0),
                msg_drop_counter=s.get("msgDropCounter", 0), msg_drop_rate=s.get("msgDropRate", 0.0),
            )
            for name, s in stats.get("subscriptions", {}).items()
        ]
        return pb.TopicStats(
            topic=topic, msg_in_counter=stats.get("msgInCounter", 0), bytes_in_counter=stats.get("bytesInCounter", 0),
            msg_out_counter=stats.get("msgOutCounter", 0), storage_size=stats.get("storageSize", 0),
            entries=internal.get("numberOfEntries", 0), ledgers=len(internal.get("ledgers", [])),
            producers=len(stats.get("publishers", [])), subscriptions=subs,
            msg_drop_counter=stats.get("msgDropCounter", 0), msg_drop_rate=stats.get("msgDropRate", 0.0),
        )

    # -- subscriptions -------------------------------------------------------------
    async def subscriptions(self, topic: str) -> list[str]:
        return sorted(await self.request("GET", _topic(topic, "subscriptions")))

    async def create_subscription(self, topic: str, subscription: str, message_id: MessageId = MessageId.latest) -> None:
        await self.request("PUT", _topic(topic, "subscription", _seg(subscription)), _position(message_id))

    async def delete_subscription(self, topic: str, subscription: str, force: bool = False) -> None:
        await self.request("DELETE", _topic(topic, "subscription", _seg(subscription)), params={"force": str(force).lower()})

    async def skip(self, topic: str, subscription: str, count: int) -> None:
        await self.request("POST", _topic(topic, "subscription", _seg(subscription), "skip", str(count)))

    async def clear_backlog(self, topic: str, subscription: str) -> None:
        await self.request("POST", _topic(topic, "subscription", _seg(subscription), "skip_all"))

    async def reset_cursor(self, topic: str, subscription: str, message_id: MessageId) -> None:
        await self.request("POST", _topic(topic, "subscription", _seg(subscription), "resetcursor"), _reset_data(message_id))

    async def reset_cursor_to_time(self, topic: str, subscription: str, timestamp_ms: int) -> None:
        await self.request("POST", _topic(topic, "subscription", _seg(subscription), "resetcursor", str(timestamp_ms)))

    async def subscription_properties(self, topic: str, subscription: str) -> dict[str, str]:
        return dict(await self.request("GET", _topic(topic, "subscription", _seg(subscription), "properties")))

    async def update_subscription_properties(self, topic: str, subscription: str, properties: dict[str, str]) -> None:
        await self.request("PUT", _topic(topic, "subscription", _seg(subscription), "properties"), properties)


    # -- schemas and the namespace's schema policies --------------------------------
    async def schema(self, topic: str, version: int | None = None) -> pb.TopicSchema:
        path = _schemas(topic, "schema") if version is None else _schemas(topic, "schema", str(version))
        return schema_from_json(await self.request("GET", path))

    async def all_schemas(self, topic: str) -> list[pb.TopicSchema]:
        got = await self.request("GET", _schemas(topic, "schemas"))
        return [schema_from_json(s) for s in got["getSchemaResponses"]]

    async def post_schema(self, topic: str, schema: pb.SchemaInfo) -> int:
        return int((await self.request("POST", _schemas(topic, "schema"), _payload(schema)))["version"]["version"])

    async def delete_schema(self, topic: str) -> int | None:
        version = int((await self.request("DELETE", _schemas(topic, "schema")))["version"])
        return None if version < 0 else version

    async def test_schema_compatibility(self, topic: str, schema: pb.SchemaInfo) -> pb.SchemaCompatibility:
        got = await self.request("POST", _schemas(topic, "compatibility"), _payload(schema))
        return pb.SchemaCompatibility(compatible=got["compatibility"], strategy=got["schemaCompatibilityStrategy"])

    async def schema_version(self, topic: str, schema: pb.SchemaInfo) -> int:
        return int((await self.request("POST", _schemas(topic, "version"), _payload(schema)))["version"])

    async def schema_compatibility_strategy(self, namespace: str) -> str:
        return str(await self.request("GET", _ns(namespace, "schemaCompatibilityStrategy")))

    async def set_schema_compatibility_strategy(self, namespace: str, strategy: str) -> None:
        await self.request("PUT", _ns(namespace, "schemaCompatibilityStrategy"), strategy)

    async def is_allow_auto_update_schema(self, namespace: str) -> bool:
        return bool(await self.request("GET", _ns(namespace, "isAllowAutoUpdateSchema")))

    async def set_is_allow_auto_update_schema(self, namespace: str, allowed: bool) -> None:
        await self.request("POST", _ns(namespace, "isAllowAutoUpdateSchema"), allowed)

    async def schema_validation_enforced(self, namespace: str) -> bool:
        return bool(await self.request("GET", _ns(namespace, "schemaValidationEnforced")))

    async def set_schema_validation_enforced(self, namespace: str, enforced: bool) -> None:
        await self.request("POST", _ns(namespace, "schemaValidationEnforced"), enforced)

def _seg(name: str) -> str:
    """One path segment, URL-encoded."""
    return quote(name, safe="")


def _ns(namespace: str, *rest: str) -> str:
    tenant, _, ns = namespace.partition("/")
    return "/".join([f"/admin/v2/namespaces/{_seg(tenant)}/{_seg(ns)}", *rest])


def _schemas(topic: str, *rest: str) -> str:
    return "/".join([f"/admin/v2/schemas/{topic_path(TopicName.parse(topic))}", *rest])


def _payload(schema: pb.SchemaInfo) -> dict[str, Any]:
    """A SchemaInfo as Pulsar's PostSchemaPayload."""
    return {"type": type_name(schema.type), "schema": definition_text(schema), "properties": dict(schema.properties)}


def _topic(topic: str, *rest: str) -> str:
    name = TopicName.parse(topic)
    return "/".join([f"/admin/v2/{name.domain}/{topic_path(name)}", *rest])


def topic_path(name: TopicName) -> str:
    """``tenant/namespace/topic`` with each segment URL-encoded, as REST paths name a topic."""
    return f"{_seg(name.tenant)}/{_seg(name.namespace_part)}/{_seg(name.local_name)}"


def _position(message_id: MessageId) -> Any:
    """Where a new subscription starts: "earliest", "latest" or Pulsar's ResetCursorData."""
    if message_id == MessageId.earliest:
        return "earliest"
    if message_id == MessageId.latest:
        return "latest"
    return _reset_data(message_id)


def _reset_data(message_id: MessageId) -> dict[str, int]:
    """Pulsar's ResetCursorData (earliest is -1:-1, latest Long.MAX_VALUE in both fields)."""
    return {"ledgerId": message_id.ledger_id(), "entryId": message_id.entry_id(),
            "partitionIndex": message_id.partition(), "batchIndex": message_id.batch_index()}


def _message_id(doc: dict[str, Any]) -> pb.MessageIdData:
    """Pulsar's MessageId JSON (``ledgerId``, ``entryId``, ``partitionIndex``)."""
    return pb.MessageIdData(
        ledger_id=doc["ledgerId"], entry_id=doc["entryId"], partition=doc.get("partitionIndex", -1), batch_index=-1,
    )


def _iso_ms(text: str) -> int:
    """ms since the epoch of an ISO 8601 time (0: none)."""
    return round(datetime.fromisoformat(text).timestamp() * 1000) if text else 0


def _peeked(response: httpx.Response) -> pb.PeekMessageResponse:
    """A message answered by the gateway, read back from its ``X-Pulsar-*`` headers: id,
    publish time, producer, sequence id, properties, key; the body is its payload."""
    h = response.headers
    mid = MessageId.parse(h["X-Pulsar-Message-ID"])
    found = pb.PeekMessageResponse(
        found=True, producer_name=h.get("X-Pulsar-producer-name", ""),
        publish_time_ms=_iso_ms(h.get("X-Pulsar-publish-time", "")),
        message_id=pb.MessageIdData(ledger_id=mid.ledger_id(), entry_id=mid.entry_id(),
                                    partition=mid.partition(), batch_index=mid.batch_index()),
    )  # fmt: skip
    msg = found.message
    msg.payload = response.content
    msg.sequence_id = int(h.get("X-Pulsar-sequence-id", "0"))
    msg.properties.update(json.loads(h.get("X-Pulsar-PROPERTY", "{}")))
    if "X-Pulsar-partition-key" in h:
        key = h["X-Pulsar-partition-key"]
        msg.partition_key = base64.b64decode(key).decode() if h.get("X-Pulsar-partition-key-b64-encoded") else key
        msg.has_partition_key = True
    return found
