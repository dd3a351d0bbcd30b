"""``magnetar admin`` verbs that look into a namespace or a topic, with pulsar-admin's
names: ``namespaces policies|topics``, ``topics lookup``, ``stats-internal``,
``last-message-id``, ``examine-message``, ``peek-messages`` and ``expire-messages`` (one
subscription). Each runs over gRPC (``--url``) or the gateway's REST API
(``--admin-url``) with the same output: ``namespaces policies`` and ``stats-internal``
print the gateway's JSON (Pulsar's Policies, PersistentTopicInternalStats), over gRPC made
by the gateway's own conversion; messages print as ``get-message-by-id`` prints one."""

from __future__ import annotations

import argparse
import json
from typing import Any

from magnetar.client.admin import AdminClient
from magnetar.client.rest_admin import RestAdmin, _ns, _topic, topic_path
from magnetar.common.errors import InvalidArgument, NotFound
from magnetar.common.names import TopicName
from magnetar.tools.admin_topics import expire_seconds, message_json

NAMESPACE_ACTIONS = ("policies", "topics")
TOPIC_ACTIONS = ("lookup", "stats-internal", "last-message-id", "examine-message", "peek-messages", "expire-messages")


def _print_json(doc: object) -> None:
    print(json.dumps(doc, indent=2))


async def run_namespace_inspect(admin: AdminClient | RestAdmin, args: argparse.Namespace) -> bool:
    """``namespaces policies|topics``; False when ``args`` is neither."""
    if args.action == "policies":
        if isinstance(admin, RestAdmin):
            _print_json(await admin.request("GET", _ns(args.name)))
        else:
            # pydantic models: imported for this verb only
            from magnetar.gateway.policy_models import Policies

            clusters = await admin.clusters()  # the rate maps are keyed by the cluster (one: the brokers')
            policies = Policies.of(await admin.namespace_policies(args.name), clusters[0] if len(clusters) == 1 else "",
                                   await admin.get_permissions(args.name))
            _print_json(policies.model_dump(mode="json"))
    elif args.action == "topics":
        for name in await _namespace_topics(admin, args.name):
            print(name)
    else:
        return False
    return True


async def _namespace_topics(admin: AdminClient | RestAdmin, namespace: str) -> list[str]:
    """Pulsar's ``namespaces topics``: a partitioned topic by its partitions' names."""
    if isinstance(admin, RestAdmin):
        return list(await admin.request("GET", _ns(namespace, "topics")))
    out: list[str] = []
    for name in await admin.topics(namespace):
        topic = TopicName.parse(name)
        count = 0 if topic.is_partition else await admin.partitions(name)
        out.extend([str(topic.partition(i)) for i in range(count)] or [name])
    return out


async def run_topic_inspect(admin: AdminClient | RestAdmin, args: argparse.Namespace) -> bool:
    """The topic verbs of this module; False when ``args`` is none of them."""
    action, topic = args.action, getattr(args, "name", "")
    if action == "lookup":
        print(await _broker_url(admin, topic))
    elif action == "stats-internal":
        _print_json(await _internal_stats(admin, topic))
    elif action == "last-message-id":
        mid = await admin.last_message_id(topic)
        _print_json({"ledgerId": mid.ledger_id, "entryId": mid.entry_id, "partitionIndex": mid.partition})
    elif action == "examine-message":
        _at_least_one("-m/--messagePosition", args.position)
        _print_json(message_json(await admin.examine_message(topic, args.initial_position, args.position)))
    elif action == "peek-messages":
        _at_least_one("-n/--count", args.count)
        _print_json([message_json(m) for m in await _peek(admin, topic, args.subscription, args.count)])
    elif action == "expire-messages":
        await admin.expire_messages(topic, args.subscription, expire_seconds(args.expire_time))
    else:
        return False
    return True


def _at_least_one(flag: str, value: int) -> None:
    if value < 1:
        raise InvalidArgument(f"{flag} must be at least 1, got {value}")


async def _broker_url(admin: AdminClient | RestAdmin, topic: str) -> str:
    """pulsar-admin's ``topics lookup``: the owner's Pulsar URL (its ``magnetar://``
    address when it serves no Pulsar protocol)."""
    if isinstance(admin, RestAdmin):
        return str((await admin.request("GET", f"/lookup/v2/topic/persistent/{topic_path(TopicName.parse(topic))}"))
                   ["brokerUrl"])
    owner = await admin.lookup_owner(topic)
    return owner.pulsar_url or f"magnetar://{owner.address}"


async def _internal_stats(admin: AdminClient | RestAdmin, topic: str) -> Any:
    if isinstance(admin, RestAdmin):
        return await admin.request("GET", _topic(topic, "internalStats"))
    from magnetar.gateway import topic_stats  # pydantic models: only for this verb

    return topic_stats.internal_stats(await admin.internal_stats(topic)).model_dump(mode="json")


async def _peek(admin: AdminClient | RestAdmin, topic: str, subscription: str, count: int) -> list[Any]:
    """Up to ``count`` messages the subscription has not acknowledged, from the first.

    Raises:
        NotFound: it has none (Pulsar's "Message not found").
    """
    if isinstance(admin, AdminClient):
        found = await admin.peek_messages(topic, subscription, 1, count)
        if not found:
            raise NotFound("Message not found")
        return found
    out = [await admin.peek_message(topic, subscription, 1)]
    for position in range(2, count + 1):
        try:
            out.append(await admin.peek_message(topic, subscription, position))
        except NotFound:
            break
    return out


def add_namespace_inspect_commands(namespaces: argparse._SubParsersAction[Any]) -> None:
    namespaces.add_parser("policies", help="print a namespace's policies as JSON (Pulsar's Policies; null: not set)",
                          operations=("Namespaces_getPolicies",)).add_argument("name", metavar="TENANT/NAMESPACE")
    namespaces.add_parser("topics", help="list a namespace's topics (a partitioned topic by its partitions)",
                          operations=("Namespaces_getTopics",)).add_argument("name", metavar="TENANT/NAMESPACE")


def add_topic_inspect_commands(topics: argparse._SubParsersAction[Any]) -> None:
    def command(action: str, help_text: str, operation: str) -> argparse.ArgumentParser:
        p = topics.add_parser(action, help=help_text, operations=(operation,))
        p.add_argument("name", metavar="TOPIC")
        return p

    command("lookup", "print the URL of the broker serving a topic", "TopicLookup_lookupTopicAsync")
    command("stats-internal", "print a topic's (partition's) managed ledger figures as JSON: ledgers, cursors, "
            "counters", "PersistentTopics_getInternalStats")
    command("last-message-id", "print the id of a topic's (partition's) last stored message as JSON",
            "PersistentTopics_getLastMessageId")
    p = command("examine-message", "print the Nth message from a topic's first or last one as JSON (acknowledged "
                "or not)", "PersistentTopics_examineMessage")
    p.add_argument("-i", "--initialPosition", "--initial-position", dest="initial_position", default="latest",
                   choices=("latest", "earliest"), help="count from the last message (default) or the first")
    p.add_argument("-m", "--messagePosition", "--message-position", dest="position", type=int, default=1,
                   metavar="N", help="1 (default): the first or last message")
    p = command("peek-messages", "print the first N messages a subscription has not acknowledged as JSON, "
                "acknowledging nothing", "PersistentTopics_peekNthMessage")
    p.add_argument("-s", "--subscription", required=True, metavar="SUB", help="subscription name")
    p.add_argument("-n", "--count", type=int, default=1, metavar="N", help="how many (default 1)")
    p = command("expire-messages", "on one subscription, acknowledge every message published more than a time ago",
                "PersistentTopics_expireTopicMessages")
    p.add_argument("-s", "--subscription", required=True, metavar="SUB", help="subscription name")
    p.add_argument("-t", "--expireTime", "--expire-time", dest="expire_time", required=True, metavar="TIME",
                   help="seconds, or a duration: 30s, 10m, 1h, 2d, 1w")
