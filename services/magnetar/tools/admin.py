"""``magnetar admin``: tenants, namespaces, topics, schemas and clusters over the broker's admin RPCs.

Shaped like ``pulsar-admin``: lists print one name a line, create/delete print
nothing, ``topics stats`` and ``namespaces get-retention`` print JSON with
pulsar-admin's field names. The namespace policy verbs (``get-``/``set-``/``remove-``
retention, message-ttl, backlog-quota, deduplication, delayed-delivery, publish-rate,
dispatch-rate, dead-letter-policy and the schema policies) are made from the policy
catalogue (:mod:`magnetar.tools.admin_policies`). Errors are one line on stderr and exit 1; bad usage exits 2.

It is a command line over :class:`magnetar.client.admin.AdminClient` (the brokers' gRPC
admin RPCs): a topic's calls go to the broker that owns it (looked up first); on a
partitioned topic subscription calls go to every partition's owner (``topics
subscriptions`` prints the union). ``--url`` takes a service URL
(``magnetar://h1:6660,h2:6660`` or ``host:port``). With ``--admin-url
http://host:8080`` the same commands go to the gateway's REST API instead
(:class:`magnetar.client.rest_admin.RestAdmin`), with the same output.

The gateway's own resources have their own commands, always over REST (``--admin-url``,
default http://127.0.0.1:8080): ``bookies list``, ``ledgers get``, ``dlq list|peek|replay|purge``,
``clusters get``, ``brokers list|healthcheck``, ``broker-stats load-report``,
``auditor status|audit``.

Each verb declares the gateway operations it does (``operations=`` on its parser,
:mod:`magnetar.tools.admin_parser`); ``tests/unit/test_cli_parity.py`` fails when a
gateway operation has no verb.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from magnetar.client.admin import AdminClient
from magnetar.client.rest_admin import RestAdmin, topic_path
from magnetar.common.bundles import parse_boundary
from magnetar.common.errors import InvalidArgument, MagnetarError
from magnetar.common.message_id import MessageId
from magnetar.common.names import TopicName
from magnetar.common.tls import add_tls_flags, tls_from_flags
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.tools import toolauth
from magnetar.tools.admin_cluster import (
    add_broker_and_auditor_commands,
    run_cluster_via_gateway,
    via_gateway,
)
from magnetar.tools.admin_clusters import GROUP as CLUSTERS
from magnetar.tools.admin_clusters import add_cluster_commands, run_clusters
from magnetar.tools.admin_inspect import (
    add_namespace_inspect_commands,
    add_topic_inspect_commands,
    run_namespace_inspect,
    run_topic_inspect,
)
from magnetar.tools.admin_namespaces import add_namespace_op_commands, run_namespace_op
from magnetar.tools.admin_parser import VerbParser, add_permission_verbs, comma_names
from magnetar.tools.admin_partitioned import add_partitioned_commands, run_partitioned
from magnetar.tools.admin_policies import (
    add_policy_commands,
    add_topic_policy_commands,
    run_policy_command,
    run_topic_policy_command,
)
from magnetar.tools.admin_schemas import (
    add_schema_commands,
    run_schemas,
)
from magnetar.tools.admin_topic_permissions import (
    add_topic_permission_commands,
    run_topic_permissions,
)
from magnetar.tools.admin_topics import add_topic_message_commands, run_topic_messages

DEFAULT_URL = "127.0.0.1:6660"
DEFAULT_ADMIN_URL = "http://127.0.0.1:8080"
Admin = AdminClient | RestAdmin
_DURATION = re.compile(r"([0-9]+)([smhdw])", re.ASCII)
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_SUBSCRIPTION_TYPES = {0: "Exclusive", 1: "Shared", 2: "Failover", 3: "Key_Shared"}


def stats_to_dict(stats: pb.TopicStats) -> dict[str, Any]:
    """pulsar-admin's ``topics stats`` shape for a TopicStats message (of a
    non-persistent topic with ``msgDropRate``, as NonPersistentTopicStats)."""
    if stats.topic.startswith("non-persistent://"):
        out = _stats_dict(stats)
        out["msgDropRate"], out["msgDropCounter"] = stats.msg_drop_rate, stats.msg_drop_counter
        for sub in stats.subscriptions:
            out["subscriptions"][sub.name].update(msgDropRate=sub.msg_drop_rate, msgDropCounter=sub.msg_drop_counter)
        return out
    return _stats_dict(stats)


def _stats_dict(stats: pb.TopicStats) -> dict[str, Any]:
    return {
        "msgInCounter": stats.msg_in_counter,
        "bytesInCounter": stats.bytes_in_counter,
        "msgOutCounter": stats.msg_out_counter,
        "storageSize": stats.storage_size,
        "entries": stats.entries,
        "ledgers": stats.ledgers,
        "producers": stats.producers,
        "subscriptions": {
            sub.name: {
                "type": _SUBSCRIPTION_TYPES.get(sub.type, str(sub.type)),
                "msgBacklog": sub.backlog,
                "consumers": sub.consumers,
                "unackedMessages": sub.unacked,
            }
            for sub in stats.subscriptions
        },
    }


def reset_time_ms(text: str, now_ms: int) -> int:
    """``--time`` of reset-cursor: ms since the epoch (``1700000000000``) or a duration
    ago (``30s``, ``10m``, ``1h``, ``2d``, ``1w``).

    Raises:
        InvalidArgument: neither.
    """
    text = text.strip()
    if text.isascii() and text.isdigit():
        return int(text)
    match = _DURATION.fullmatch(text)
    if match is None:
        raise InvalidArgument(
            f"invalid --time {text!r}: give ms since the epoch or a duration ago such as 30s, 10m, 1h, 2d, 1w"
        )
    return max(0, now_ms - int(match.group(1)) * _UNIT_MS[match.group(2)])


def _print_names(names: Iterable[str]) -> None:
    for name in names:
        print(name)


def _print_json(doc: object) -> None:
    print(json.dumps(doc, indent=2))


async def _run_subscriptions(admin: Admin, args: argparse.Namespace) -> bool:
    """The subscription commands; False when ``args`` is none of them."""
    action, topic = args.action, args.name
    sub = getattr(args, "subscription", "")
    if action == "subscriptions":
        _print_names(await admin.subscriptions(topic))
    elif action == "create-subscription":
        await admin.create_subscription(topic, sub, MessageId.parse(args.message_id))
    elif action == "unsubscribe":
        await admin.delete_subscription(topic, sub, force=args.force)
    elif action == "skip":
        if args.count < 1:
            raise InvalidArgument(f"-n/--count must be at least 1, got {args.count}")
        await admin.skip(topic, sub, args.count)
    elif action == "clear-backlog":
        await admin.clear_backlog(topic, sub)
    elif action == "reset-cursor" and args.message_id is not None:
        await admin.reset_cursor(topic, sub, MessageId.parse(args.message_id))
    elif action == "reset-cursor":
        await admin.reset_cursor_to_time(topic, sub, reset_time_ms(args.time, int(time.time() * 1000)))
    else:
        return False
    return True


async def _run_namespaces(admin: Admin, args: argparse.Namespace) -> None:
    action, namespace = args.action, args.name
    if (await run_policy_command(admin, args) or await _run_permissions(admin, args)
            or await run_namespace_inspect(admin, args)):
        pass
    elif await run_namespace_op(admin, args):
        pass
    elif action == "unload":
        await admin.unload_namespace(namespace, args.bundle or "")
    elif action == "bundles":
        _print_json({o.bundle: o.broker_address or None for o in await admin.bundles(namespace)})
    elif action == "split-bundle":
        _print_names(await admin.split_bundle(namespace, args.bundle, args.split_algorithm_name or "", args.unload,
                                              [parse_boundary(b) for b in args.split_boundaries or ()]))
    elif action == "create":
        clusters = args.clusters or []
        await admin.create_namespace(namespace, pb.NamespacePolicies(replication_clusters=clusters) if clusters else None)
    elif action == "delete":
        await admin.delete_namespace(namespace)
    else:
        _print_names(await admin.namespaces(namespace))


async def _run_permissions(admin: Admin, args: argparse.Namespace) -> bool:
    """The permission commands (JSON as pulsar-admin prints them); False when ``args`` is
    none of them."""
    action, namespace = args.action, args.name
    if action == "grant-permission":
        await admin.grant_permission(namespace, args.role, args.actions)
    elif action == "revoke-permission":
        await admin.revoke_permission(namespace, args.role)
    elif action == "permissions":
        _print_json(await admin.permissions(namespace))
    elif action == "grant-subscription-permission":
        await admin.grant_subscription_permission(namespace, args.subscription, args.roles)
    elif action == "revoke-subscription-permission":
        await admin.revoke_subscription_permission(namespace, args.subscription, args.role)
    elif action == "subscription-permission":
        _print_json(await admin.subscription_permissions(namespace))
    else:
        return False
    return True


def _permission_commands(namespaces: argparse._SubParsersAction[Any]) -> None:
    """pulsar-admin's namespaces grant/revoke-permission, permissions, and their
    subscription counterparts."""
    add_permission_verbs(namespaces, "TENANT/NAMESPACE", (
        "give a role actions on a namespace (replacing what it had)",
        "take every action on a namespace away from a role",
        "print each role's actions on a namespace as JSON",
    ), ("Namespaces_grantPermissionOnNamespace", "Namespaces_revokePermissionsOnNamespace",
        "Namespaces_getPermissions"))
    p = namespaces.add_parser("grant-subscription-permission", operations=("Namespaces_grantPermissionOnSubscription",),
                              help="let only these roles (among those with consume) consume a subscription")
    p.add_argument("name", metavar="TENANT/NAMESPACE")
    p.add_argument("--subscription", required=True, metavar="SUB", help="the subscription name")
    p.add_argument("--roles", required=True, type=comma_names, metavar="ROLE,ROLE", help="roles to add to its list")
    p = namespaces.add_parser("revoke-subscription-permission", help="remove a role from a subscription's list",
                              operations=("Namespaces_revokePermissionOnSubscription",))
    p.add_argument("name", metavar="TENANT/NAMESPACE")
    p.add_argument("--subscription", required=True, metavar="SUB", help="the subscription name")
    p.add_argument("--role", required=True, help="the client role")
    namespaces.add_parser("subscription-permission", operations=("Namespaces_getPermissionOnSubscription",),
                          help="print each limited subscription's roles as JSON").add_argument(
        "name", metavar="TENANT/NAMESPACE")


async def _run_gateway(rest: RestAdmin, args: argparse.Namespace) -> None:
    """The gateway's own resources (bookies, ledgers, dead letters): JSON out."""
    group, action = args.group, args.action
    if group == "bookies":
        _print_json(await rest.request("GET", "/admin/v2/bookies"))
    elif group == "ledgers":
        _print_json(await rest.request("GET", f"/admin/v2/ledgers/{args.ledger_id}"))
    elif group == "whoami":
        query = {"topic": args.topic, "subscription": args.subscription, "namespace": args.namespace}
        _print_json(await rest.request("GET", "/admin/v2/whoami", params={k: v for k, v in query.items() if v}))
    elif group == "messages":
        path = f"/admin/v2/peek/{topic_path(TopicName.parse(args.name))}/subscription/{quote(args.subscription, safe='')}"
        _print_json(await rest.request("GET", path, params={"count": args.count}))
    elif action == "list":
        _print_json(await rest.request("GET", f"/admin/v2/dlq/{args.name}"))
    else:
        path = "/admin/v2/dlq/" + topic_path(TopicName.parse(args.name))
        if action == "peek":
            _print_json(await rest.request("GET", f"{path}/messages", params={"limit": args.limit}))
        elif action == "replay":
            body = {"count": args.count, "messageIds": args.message_ids, "target": args.target}
            _print_json(await rest.request("POST", f"{path}/replay", {k: v for k, v in body.items() if v}))
        else:
            _print_json(await rest.request("POST", f"{path}/purge", {"messageIds": args.message_ids} if args.message_ids else None))


async def _compact(admin: Admin, topic: str) -> None:
    """Trigger compaction of ``topic``, of each partition of a partitioned one (as
    pulsar-admin's ``topics compact``)."""
    if isinstance(admin, RestAdmin):  # the gateway fans out itself
        await admin.trigger_compaction(topic)
        return
    count = 0 if TopicName.parse(topic).is_partition else await admin.partitions(topic)
    for target in [str(TopicName.parse(topic).partition(i)) for i in range(count)] or [topic]:
        await admin.trigger_compaction(target)


async def _run(admin: Admin, args: argparse.Namespace) -> None:
    group, action = args.group, args.action
    if group == "tenants":
        if action == "create":
            roles, clusters = args.admin_roles or [], args.allowed_clusters
            if roles or clusters:  # no clusters named: every cluster there is (as pulsar-admin)
                clusters = clusters or await admin.clusters()
                await admin.create_tenant(args.name, pb.TenantInfo(admin_roles=roles, allowed_clusters=clusters))
            else:
                await admin.create_tenant(args.name)
        elif action == "get":
            info = await admin.tenant(args.name)
            _print_json({"adminRoles": list(info.admin_roles), "allowedClusters": list(info.allowed_clusters)})
        elif action == "update":
            info = await admin.tenant(args.name)  # what is not named is kept
            roles = info.admin_roles if args.admin_roles is None else args.admin_roles
            clusters = args.allowed_clusters or info.allowed_clusters
            await admin.update_tenant(args.name, pb.TenantInfo(admin_roles=roles, allowed_clusters=clusters))
        elif action == "delete":
            await admin.delete_tenant(args.name)
        else:
            _print_names(await admin.tenants())
    elif group == "namespaces":
        await _run_namespaces(admin, args)
    elif group == "schemas":
        await run_schemas(admin, args)
    elif group == CLUSTERS:
        await run_clusters(admin, args)
    elif (await run_topic_policy_command(admin, args) or await _run_subscriptions(admin, args)
          or await run_topic_messages(admin, args) or await run_partitioned(admin, args)
          or await run_topic_inspect(admin, args) or await run_topic_permissions(admin, args)):
        pass
    elif action == "create":
        await admin.create_topic(args.name)
    elif action == "create-partitioned-topic":
        await admin.create_topic(args.name, args.partitions)
    elif action == "delete":
        await admin.delete_topic(args.name, force=args.force)
    elif action == "unload":
        await admin.unload_topic(args.name)
    elif action == "compact":
        await _compact(admin, args.name)
    elif action == "compaction-status":
        status = await admin.compaction_status(args.name)
        _print_json({"status": status.status, "lastError": status.last_error})
    elif action == "list":  # both domains, as pulsar-admin's (non-persistent: those loaded now)
        _print_names(await admin.topics(args.name) + await admin.non_persistent_topics(args.name))
    else:
        _print_json(stats_to_dict(await admin.topic_stats(args.name)))


def build_parser() -> argparse.ArgumentParser:
    parser = VerbParser(prog="magnetar admin", description="Administer tenants, namespaces, topics.")
    parser.add_argument("--url", default=DEFAULT_URL, help=f"service URL or broker host:port (default {DEFAULT_URL})")
    parser.add_argument("--admin-url", help="the gateway's URL (http://host:8080): use its REST API instead of gRPC")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per call (default 10)")
    toolauth.add_arguments(parser)
    add_tls_flags(parser)
    groups = parser.add_subparsers(
        dest="group", required=True, metavar="{tenants,namespaces,topics,schemas,clusters,brokers,broker-stats,bookies,ledgers,auditor,dlq}"
    )

    def group(name: str, actions: dict[str, tuple[str, str | None, str | tuple[str, ...]]]) -> argparse._SubParsersAction[Any]:
        """``actions``: each verb's help, its argument's metavar and the gateway operation(s) it does."""
        sub = groups.add_parser(name, help=f"manage {name}").add_subparsers(dest="action", required=True)
        for action, (help_text, metavar, operation) in actions.items():
            p = sub.add_parser(action, help=help_text, operations=(operation,) if isinstance(operation, str) else operation)
            if metavar is not None:
                p.add_argument("name", metavar=metavar)
        return sub

    tenants = group("tenants", {"delete": ("delete a tenant", "TENANT", "TenantsBase_deleteTenant"),
                                "list": ("list tenants", None, "TenantsBase_getTenants"),
                                "get": ("print a tenant's admin roles and allowed clusters as JSON", "TENANT",
                                        "TenantsBase_getTenantAdmin")})
    for action, help_text, operation in (
        ("create", "create a tenant", "TenantsBase_createTenant"),
        ("update", "change a tenant's admin roles or allowed clusters (the others are kept)", "TenantsBase_updateTenant"),
    ):
        p = tenants.add_parser(action, help=help_text, operations=(operation,))
        p.add_argument("name", metavar="TENANT")
        p.add_argument("-r", "--admin-roles", type=comma_names, metavar="ROLE,ROLE",
                       help="the roles that administer the tenant (an empty string: none)")
        p.add_argument("-c", "--allowed-clusters", type=comma_names, metavar="CLUSTER,CLUSTER",
                       help="the clusters its namespaces may use (default: every cluster)")
    namespaces = group("namespaces", {
        "delete": ("delete a namespace", "TENANT/NAMESPACE", "Namespaces_deleteNamespace"),
        "list": ("list a tenant's namespaces", "TENANT", "Namespaces_getTenantNamespaces"),
        "bundles": ("print each bundle's owner as JSON", "TENANT/NAMESPACE", "Namespaces_getBundlesData")})
    p = namespaces.add_parser("create", help="create a namespace", operations=("Namespaces_createNamespace",))
    p.add_argument("name", metavar="TENANT/NAMESPACE")
    p.add_argument("-c", "--clusters", type=comma_names, metavar="CLUSTER,CLUSTER",
                   help="its replication clusters (existing clusters its tenant is allowed on)")
    add_policy_commands(namespaces)
    add_namespace_op_commands(namespaces)
    _permission_commands(namespaces)
    add_namespace_inspect_commands(namespaces)
    p = namespaces.add_parser("unload", help="unload a namespace's bundles from their brokers (the next lookup takes them)",
                              operations=("Namespaces_unloadNamespace", "Namespaces_unloadNamespaceBundle"))
    p.add_argument("name", metavar="TENANT/NAMESPACE")
    p.add_argument("-b", "--bundle", metavar="RANGE", help="only this bundle, e.g. 0x00000000_0x40000000")
    p = namespaces.add_parser("split-bundle", help="split a bundle on its owner and print the bundles made",
                              operations=("Namespaces_splitNamespaceBundle",))
    p.add_argument("name", metavar="TENANT/NAMESPACE")
    p.add_argument("-b", "--bundle", metavar="RANGE", required=True, help="the bundle, e.g. 0x00000000_0x40000000")
    p.add_argument("-u", "--unload", action="store_true", help="unload both halves after the split")
    p.add_argument("--split-algorithm-name", metavar="NAME",
                   help="range_equally_divide (default), topic_count_equally_divide, specified_positions_divide")
    p.add_argument("--split-boundaries", type=comma_names, metavar="0xHASH,0xHASH",
                   help="where specified_positions_divide splits")
    topics = group("topics", {
        "create": ("create a non-partitioned topic", "TOPIC",
                   ("PersistentTopics_createNonPartitionedTopic", "NonPersistentTopics_createNonPartitionedTopic")),
        "unload": ("unload a topic from its broker (clients reconnect)", "TOPIC",
                   ("PersistentTopics_unloadTopic", "NonPersistentTopics_unloadTopic")),
        "list": ("list a namespace's topics (persistent, and non-persistent ones loaded now)", "TENANT/NAMESPACE",
                 ("PersistentTopics_getList", "NonPersistentTopics_getList")),
        "stats": ("print a topic's stats as JSON (non-persistent://: with msgDropRate)", "TOPIC",
                  ("PersistentTopics_getStats", "NonPersistentTopics_getStats")),
        "compact": ("compact a topic (each partition): the latest message of each key", "TOPIC",
                    "PersistentTopics_compact"),
        "compaction-status": ("print the status of a topic's (partition's) last compaction", "TOPIC",
                              "PersistentTopics_compactionStatus"),
        "subscriptions": ("list a topic's subscriptions", "TOPIC", "PersistentTopics_getSubscriptions")})
    add_topic_message_commands(topics)
    add_partitioned_commands(topics)
    add_topic_inspect_commands(topics)
    add_topic_policy_commands(topics)
    add_topic_permission_commands(topics)
    p = topics.add_parser("delete", help="delete a topic", operations=("PersistentTopics_deleteTopic", "NonPersistentTopics_deleteTopic"))
    p.add_argument("name", metavar="TOPIC")
    p.add_argument("-f", "--force", action="store_true",
                   help="also with producers or consumers connected (they fail with TopicNotFound)")
    p = topics.add_parser("create-partitioned-topic", help="create a partitioned topic",
                          operations=("PersistentTopics_createPartitionedTopic", "NonPersistentTopics_createPartitionedTopic"))
    p.add_argument("name", metavar="TOPIC")
    p.add_argument("-p", "--partitions", type=int, required=True, help="number of partitions")

    def subscription_command(action: str, help_text: str, *operations: str) -> argparse.ArgumentParser:
        p = topics.add_parser(action, help=help_text, operations=operations)
        p.add_argument("name", metavar="TOPIC")
        p.add_argument("-s", "--subscription", required=True, metavar="SUB", help="subscription name")
        return p

    p = subscription_command("create-subscription", "create a subscription", "PersistentTopics_createSubscription")
    p.add_argument("-m", "--message-id", "--messageId", dest="message_id", default="latest", metavar="ID",
                   help="where it starts: ledgerId:entryId[:partition], earliest or latest (default)")
    p = subscription_command("unsubscribe", "delete a subscription", "PersistentTopics_deleteSubscription")
    p.add_argument("-f", "--force", action="store_true", help="disconnect its consumers first")
    p = subscription_command("skip", "acknowledge the next N messages (entries) of a subscription",
                             "PersistentTopics_skipMessages")
    p.add_argument("-n", "--count", type=int, required=True, metavar="N", help="how many")
    subscription_command("clear-backlog", "acknowledge a subscription's whole backlog", "PersistentTopics_skipAllMessages")
    p = subscription_command("reset-cursor", "move a subscription to a time or a message id",
                             "PersistentTopics_resetCursor", "PersistentTopics_resetCursorOnPosition")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("-t", "--time", metavar="TIME", help="ms since the epoch, or a duration ago: 30s, 10m, 1h, 2d, 1w")
    where.add_argument("-m", "--message-id", "--messageId", dest="message_id", metavar="ID",
                       help="ledgerId:entryId[:partition], earliest or latest")
    add_schema_commands(groups)
    add_cluster_commands(groups)
    add_broker_and_auditor_commands(groups)
    _gateway_commands(groups)
    return parser


GATEWAY_GROUPS = ("bookies", "ledgers", "dlq", "whoami", "messages")
"""Groups whose every verb goes to the gateway (see also :data:`admin_cluster.GATEWAY_ONLY`)."""


def _gateway_commands(groups: argparse._SubParsersAction[Any]) -> None:
    """The gateway's own resources (REST only)."""
    bookies = groups.add_parser("bookies", help="bookies (via the gateway)").add_subparsers(dest="action", required=True)
    bookies.add_parser("list", help="registered bookies with state and free space, as JSON",
                       operations=("Magnetar_getBookies",))
    ledgers = groups.add_parser("ledgers", help="ledgers (via the gateway)").add_subparsers(dest="action", required=True)
    ledgers.add_parser("get", help="a ledger's metadata as JSON", operations=("Magnetar_getLedgerMetadata",)).add_argument("ledger_id", type=int, metavar="LEDGER_ID")
    dlq = groups.add_parser("dlq", help="dead-letter queues (via the gateway)").add_subparsers(dest="action", required=True)
    dlq.add_parser("list", help="a namespace's DLQ topics: backlog, oldest message, counts by REAL_TOPIC",
                   operations=("Magnetar_getDeadLetterTopics",)).add_argument(
        "name", metavar="TENANT/NAMESPACE")
    p = dlq.add_parser("peek", help="a DLQ's first messages with their provenance, without acknowledging them",
                       operations=("Magnetar_peekDeadLetters",))
    p.add_argument("name", metavar="DLQ_TOPIC")
    p.add_argument("-n", "--limit", type=int, default=10, help="how many (default 10)")
    p = dlq.add_parser("replay", help="move a DLQ's messages back to their REAL_TOPIC (or --target), exactly once",
                       operations=("Magnetar_replayDeadLetters",))
    p.add_argument("name", metavar="DLQ_TOPIC")
    p.add_argument("-n", "--count", type=int, help="only the first N")
    p.add_argument("--message-ids", type=lambda t: [i for i in t.split(",") if i], metavar="ID,ID",
                   help="only these message ids")
    p.add_argument("--target", metavar="TOPIC", help="publish to this topic instead of each REAL_TOPIC")
    p = dlq.add_parser("purge", help="acknowledge (drop) a DLQ's whole backlog, or --message-ids only",
                       operations=("Magnetar_purgeDeadLetters",))
    p.add_argument("name", metavar="DLQ_TOPIC")
    p.add_argument("--message-ids", type=lambda t: [i for i in t.split(",") if i], metavar="ID,ID",
                   help="only these message ids")
    p = groups.add_parser("whoami", help="your role, and what it may do on a topic, subscription or namespace (JSON)",
                          operations=("Magnetar_whoami",))
    p.add_argument("--topic")
    p.add_argument("--subscription", help="a subscription of --topic")
    p.add_argument("--namespace", metavar="TENANT/NAMESPACE")
    messages = groups.add_parser("messages", help="messages (via the gateway)").add_subparsers(dest="action", required=True)
    p = messages.add_parser("peek", help="a subscription's first unacknowledged messages, decoded with the topic's schema (JSON)",
                            operations=("Magnetar_peekMessages",))
    p.add_argument("name", metavar="TOPIC")
    p.add_argument("-s", "--subscription", required=True)
    p.add_argument("-n", "--count", type=int, default=10, help="how many (default 10, at most 100)")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "partitions", 1) < 1:
        print("magnetar admin: --partitions must be at least 1", file=sys.stderr)
        return 2
    try:
        asyncio.run(_main(args))
    except MagnetarError as exc:
        print(f"magnetar admin: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


async def _main(args: argparse.Namespace) -> None:
    header = toolauth.authorization(args)
    if args.group in GATEWAY_GROUPS or via_gateway(args):
        rest = RestAdmin(args.admin_url or DEFAULT_ADMIN_URL, args.timeout, tls=tls_from_flags(args), authorization=header)
        async with rest:
            await (_run_gateway(rest, args) if args.group in GATEWAY_GROUPS else run_cluster_via_gateway(rest, args))
        return
    tls = tls_from_flags(args, args.url)
    admin: Admin = (
        RestAdmin(args.admin_url, args.timeout, tls=tls, authorization=header) if args.admin_url
        else AdminClient(args.url, args.timeout, tls=tls, authorization=(lambda: header) if header else None)
    )
    async with admin:
        await _run(admin, args)


if __name__ == "__main__":
    sys.exit(main())
