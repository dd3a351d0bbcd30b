"""``magnetar admin``: tenants, namespaces and topics over the broker's admin RPCs.

Shaped like ``pulsar-admin``: lists print one name a line, create/delete print
nothing, ``topics stats`` and ``namespaces get-retention`` print JSON with
pulsar-admin's field names. Errors are one line on stderr and exit 1; bad usage exits 2.

A topic's calls go to the broker that owns it (looked up first); on a partitioned topic
subscription calls go to every partition's owner (``topics subscriptions`` prints the
union).
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import grpc

from magnetar.broker.subscription_admin import admin_targets
from magnetar.common.errors import InvalidArgument, MagnetarError, NotOwner
from magnetar.common.grpcutil import CHANNEL_OPTIONS, from_rpc_error
from magnetar.common.message_id import MessageId
from magnetar.common.retry import RetryPolicy
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1.broker_pb2_grpc import BrokerStub

DEFAULT_URL = "127.0.0.1:6650"
_DURATION = re.compile(r"([0-9]+)([smhdw])", re.ASCII)
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_OWNER_RETRY = RetryPolicy(max_tries=3, delay_s=0.0)  # a moved topic: look it up again at once
R = TypeVar("R")
_SUBSCRIPTION_TYPES = {0: "Exclusive", 1: "Shared", 2: "Failover", 3: "Key_Shared"}


def broker_target(url: str) -> str:
    """``magnetar://host:port`` or ``host:port`` → ``host:port`` (the first of several)."""
    if "://" in url:
        url = url.split("://", 1)[1]
    return url.split(",")[0].rstrip("/")


def stats_to_dict(stats: pb.TopicStats) -> dict[str, Any]:
    """pulsar-admin's ``topics stats`` shape for a TopicStats message."""
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


def message_id_arg(text: str) -> pb.MessageIdData:
    """``ledgerId:entryId[:partition[:batch]]``, ``earliest`` or ``latest``.

    Raises:
        InvalidArgument: none of these.
    """
    return MessageId.parse(text).to_proto()


def _print_names(names: Iterable[str]) -> None:
    for name in names:
        print(name)


class Brokers:
    """gRPC stubs by broker address; topic calls go to the topic's owner."""

    def __init__(self, url: str, timeout: float) -> None:
        self.target = broker_target(url)
        self.timeout = timeout
        self._channels: dict[str, grpc.Channel] = {}

    def stub(self, address: str | None = None) -> BrokerStub:
        address = address or self.target
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        return BrokerStub(channel)

    def call(self, fn: Callable[[BrokerStub], R], address: str | None = None) -> R:
        """``fn(stub)`` on the broker at ``address`` (default: --url), errors typed."""
        try:
            return fn(self.stub(address))
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, address or self.target) from exc

    def on_owner(self, topic: str, fn: Callable[[BrokerStub], R], lookup_first: bool = True) -> R:
        """``fn(stub)`` on the broker owning ``topic``, looked up again if it moves;
        without ``lookup_first`` the --url broker is tried first (it may own it)."""
        if not lookup_first:
            try:
                return self.call(fn)
            except NotOwner:
                pass
        # Only a NotOwner from the owner's call is retried; one from the lookup is not.
        backoff = _OWNER_RETRY.backoff()
        while True:
            owner = self.call(lambda s: s.Lookup(pb.LookupRequest(topic=topic), timeout=self.timeout)).broker_address
            try:
                return self.call(fn, owner or None)
            except NotOwner:
                delay = backoff.failed()
                if delay is None:
                    raise
                if delay:
                    time.sleep(delay)

    def on_partitions(
        self, topic: str, fn: Callable[[BrokerStub, str], R],
        message_id: pb.MessageIdData | None = None, whole_topic: bool = False,
    ) -> list[R]:
        """``fn(stub, partition)`` on each target partition's owner (the topic itself when
        not partitioned)."""
        partitions = self.call(
            lambda s: s.GetPartitionedTopicMetadata(pb.PartitionedTopicMetadataRequest(topic=topic), timeout=self.timeout)
        ).partitions
        targets = admin_targets(topic, partitions, message_id, whole_topic)
        return [self.on_owner(target, _bind(fn, target)) for target in targets]

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()


def _bind(fn: Callable[[BrokerStub, str], R], topic: str) -> Callable[[BrokerStub], R]:
    return lambda stub: fn(stub, topic)


def _run_topic_subscriptions(brokers: Brokers, args: argparse.Namespace, timeout: float) -> bool:
    """The subscription commands; False when ``args`` is none of them."""
    action, topic = args.action, args.name
    sub = getattr(args, "subscription", "")
    if action == "subscriptions":
        lists = brokers.on_partitions(topic, lambda s, t: s.ListSubscriptions(pb.ListSubscriptionsRequest(topic=t), timeout=timeout))
        _print_names(sorted({name for reply in lists for name in reply.names}))
    elif action == "create-subscription":
        mid = message_id_arg(args.message_id)
        brokers.on_partitions(topic, lambda s, t: s.CreateSubscription(
            pb.CreateSubscriptionRequest(topic=t, subscription=sub, message_id=mid), timeout=timeout,
        ), mid, whole_topic=True)
    elif action == "unsubscribe":
        brokers.on_partitions(topic, lambda s, t: s.DeleteSubscription(
            pb.DeleteSubscriptionRequest(topic=t, subscription=sub, force=args.force), timeout=timeout,
        ))
    elif action in ("skip", "clear-backlog"):
        count = getattr(args, "count", 0)
        if action == "skip" and count < 1:
            raise InvalidArgument(f"-n/--count must be at least 1, got {count}")
        brokers.on_partitions(topic, lambda s, t: s.SkipMessages(
            pb.SkipMessagesRequest(topic=t, subscription=sub, count=count, all=action == "clear-backlog"), timeout=timeout,
        ))
    elif action == "reset-cursor" and args.message_id is not None:
        mid = message_id_arg(args.message_id)
        brokers.on_partitions(topic, lambda s, t: s.ResetCursor(
            pb.ResetCursorRequest(topic=t, subscription=sub, message_id=mid), timeout=timeout,
        ), mid)
    elif action == "reset-cursor":
        at = reset_time_ms(args.time, int(time.time() * 1000))
        brokers.on_partitions(topic, lambda s, t: s.ResetCursor(
            pb.ResetCursorRequest(topic=t, subscription=sub, timestamp_ms=at), timeout=timeout,
        ))
    else:
        return False
    return True


def unload_bundles(brokers: Brokers, namespace: str, bundle: str, timeout: float) -> list[str]:
    """Unload one bundle (or every owned bundle) of ``namespace`` on its owner; returns
    the bundles unloaded. An unowned bundle has nothing to unload."""
    owners = brokers.call(lambda s: s.LookupBundle(pb.LookupBundleRequest(namespace=namespace, bundle=bundle), timeout=timeout))
    done = []
    for owner in owners.bundles:
        if owner.broker_address:
            request = pb.UnloadNamespaceBundleRequest(namespace=namespace, bundle=owner.bundle)
            brokers.call(functools.partial(_unload_bundle, request=request, timeout=timeout), owner.broker_address)
            done.append(owner.bundle)
    return done


def _unload_bundle(stub: BrokerStub, request: pb.UnloadNamespaceBundleRequest, timeout: float) -> pb.AdminResponse:
    return stub.UnloadNamespaceBundle(request, timeout=timeout)


def _run(brokers: Brokers, args: argparse.Namespace, timeout: float) -> None:
    stub = brokers.stub()
    group, action = args.group, args.action
    if group == "tenants":
        if action == "create":
            stub.CreateTenant(pb.CreateTenantRequest(tenant=args.name), timeout=timeout)
        elif action == "delete":
            stub.DeleteTenant(pb.DeleteTenantRequest(tenant=args.name), timeout=timeout)
        else:
            _print_names(stub.ListTenants(pb.ListTenantsRequest(), timeout=timeout).names)
    elif group == "namespaces":
        if action == "set-retention":
            policies = pb.RetentionPolicies(retention_time_minutes=args.time, retention_size_mb=args.size)
            stub.SetRetention(pb.SetRetentionRequest(namespace=args.name, policies=policies), timeout=timeout)
        elif action == "get-retention":
            got = stub.GetRetention(pb.GetRetentionRequest(namespace=args.name), timeout=timeout)
            print(json.dumps({"retentionTimeInMinutes": got.retention_time_minutes, "retentionSizeInMB": got.retention_size_mb}, indent=2))
        elif action == "set-dead-letter-policy":
            if args.max_redeliver_count is not None and not 1 <= args.max_redeliver_count < 2**32:
                raise InvalidArgument(f"--max-redeliver-count must be >= 1, not {args.max_redeliver_count}")
            policy = pb.DeadLetterPolicy(
                max_redeliver_count=args.max_redeliver_count or 0, retry_letter_topic=args.retry_letter_topic or "",
                dead_letter_topic=args.dead_letter_topic or "", initial_subscription_name=args.initial_subscription_name or "",
            )
            stub.SetDeadLetterPolicy(pb.SetDeadLetterPolicyRequest(namespace=args.name, policy=policy), timeout=timeout)
        elif action == "get-dead-letter-policy":
            got = stub.GetDeadLetterPolicy(pb.GetDeadLetterPolicyRequest(namespace=args.name), timeout=timeout)
            print(json.dumps({
                "maxRedeliverCount": got.max_redeliver_count or None, "retryLetterTopic": got.retry_letter_topic or None,
                "deadLetterTopic": got.dead_letter_topic or None, "initialSubscriptionName": got.initial_subscription_name or None,
            }, indent=2))
        elif action == "unload":
            unload_bundles(brokers, args.name, args.bundle or "", timeout)
        elif action == "bundles":
            owners = stub.LookupBundle(pb.LookupBundleRequest(namespace=args.name), timeout=timeout).bundles
            print(json.dumps({o.bundle: o.broker_address or None for o in owners}, indent=2))
        elif action == "create":
            stub.CreateNamespace(pb.CreateNamespaceRequest(namespace=args.name), timeout=timeout)
        elif action == "delete":
            stub.DeleteNamespace(pb.DeleteNamespaceRequest(namespace=args.name), timeout=timeout)
        else:
            _print_names(stub.ListNamespaces(pb.ListNamespacesRequest(tenant=args.name), timeout=timeout).names)
    elif _run_topic_subscriptions(brokers, args, timeout):
        pass
    elif action == "create":
        stub.CreateTopic(pb.CreateTopicRequest(topic=args.name, partitions=0), timeout=timeout)
    elif action == "create-partitioned-topic":
        stub.CreateTopic(pb.CreateTopicRequest(topic=args.name, partitions=args.partitions), timeout=timeout)
    elif action == "delete":
        request = pb.DeleteTopicRequest(topic=args.name, force=args.force)
        brokers.on_owner(args.name, lambda s: s.DeleteTopic(request, timeout=timeout), lookup_first=False)
    elif action == "unload":
        brokers.on_partitions(args.name, lambda s, t: s.UnloadTopic(pb.UnloadTopicRequest(topic=t), timeout=timeout))
    elif action == "list":
        _print_names(stub.ListTopics(pb.ListTopicsRequest(namespace=args.name), timeout=timeout).names)
    else:
        stats = brokers.on_owner(
            args.name, lambda s: s.GetTopicStats(pb.TopicStatsRequest(topic=args.name), timeout=timeout), lookup_first=False,
        )
        print(json.dumps(stats_to_dict(stats), indent=2))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="magnetar admin", description="Administer tenants, namespaces, topics.")
    parser.add_argument("--url", default=DEFAULT_URL, help=f"broker host:port (default {DEFAULT_URL})")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per call (default 10)")
    groups = parser.add_subparsers(dest="group", required=True, metavar="{tenants,namespaces,topics}")

    def group(name: str, actions: dict[str, tuple[str, str | None]]) -> argparse._SubParsersAction[Any]:
        sub = groups.add_parser(name, help=f"manage {name}").add_subparsers(dest="action", required=True)
        for action, (help_text, metavar) in actions.items():
            p = sub.add_parser(action, help=help_text)
            if metavar is not None:
                p.add_argument("name", metavar=metavar)
        return sub

    group("tenants", {"create": ("create a tenant", "TENANT"), "delete": ("delete a tenant", "TENANT"),
                      "list": ("list tenants", None)})
    namespaces = group("namespaces", {"create": ("create a namespace", "TENANT/NAMESPACE"),
                                      "delete": ("delete a namespace", "TENANT/NAMESPACE"),
                                      "list": ("list a tenant's namespaces", "TENANT"),
                                      "bundles": ("print each bundle's owner as JSON", "TENANT/NAMESPACE"),
                                      "get-retention": ("print a namespace's retention as JSON", "TENANT/NAMESPACE"),
                                      "get-dead-letter-policy": ("print a namespace's retry/DLQ defaults as JSON",
                                                                 "TENANT/NAMESPACE")})
    p = namespaces.add_parser(
        "set-dead-letter-policy",
        help="set a namespace's retry/DLQ defaults ({topic} and {subscription} are replaced; no option: remove them)",
    )
    p.add_argument("name", metavar="TENANT/NAMESPACE")
    p.add_argument("--max-redeliver-count", type=int, metavar="N", help="retries / redeliveries before the DLQ (>= 1)")
    p.add_argument("--retry-letter-topic", metavar="NAME", help="e.g. {topic}-{subscription}-RETRY")
    p.add_argument("--dead-letter-topic", metavar="NAME", help="e.g. {topic}-{subscription}-DLQ")
    p.add_argument("--initial-subscription-name", metavar="NAME", help="the DLQ's subscription, e.g. {subscription}-DLQ-sub")
    p = namespaces.add_parser("unload", help="unload a namespace's bundles from their brokers (the next lookup takes them)")
    p.add_argument("name", metavar="TENANT/NAMESPACE")
    p.add_argument("-b", "--bundle", metavar="RANGE", help="only this bundle, e.g. 0x00000000_0x40000000")
    p = namespaces.add_parser("set-retention", help="set how much acknowledged data a namespace's topics keep")
    p.add_argument("name", metavar="TENANT/NAMESPACE")
    p.add_argument("-t", "--time", type=int, required=True, metavar="MIN", help="minutes (-1: unlimited, 0: none)")
    p.add_argument("-s", "--size", type=int, required=True, metavar="MB", help="megabytes (-1: unlimited, 0: none)")
    topics = group("topics", {"create": ("create a non-partitioned topic", "TOPIC"),
                              "unload": ("unload a topic from its broker (clients reconnect)", "TOPIC"),
                              "list": ("list a namespace's topics", "TENANT/NAMESPACE"),
                              "stats": ("print a topic's stats as JSON", "TOPIC"),
                              "subscriptions": ("list a topic's subscriptions", "TOPIC")})
    p = topics.add_parser("delete", help="delete a topic")
    p.add_argument("name", metavar="TOPIC")
    p.add_argument("-f", "--force", action="store_true",
                   help="also with producers or consumers connected (they fail with TopicNotFound)")
    p = topics.add_parser("create-partitioned-topic", help="create a partitioned topic")
    p.add_argument("name", metavar="TOPIC")
    p.add_argument("-p", "--partitions", type=int, required=True, help="number of partitions")

    def subscription_command(action: str, help_text: str) -> argparse.ArgumentParser:
        p = topics.add_parser(action, help=help_text)
        p.add_argument("name", metavar="TOPIC")
        p.add_argument("-s", "--subscription", required=True, metavar="SUB", help="subscription name")
        return p

    p = subscription_command("create-subscription", "create a subscription")
    p.add_argument("-m", "--message-id", "--messageId", dest="message_id", default="latest", metavar="ID",
                   help="where it starts: ledgerId:entryId[:partition], earliest or latest (default)")
    p = subscription_command("unsubscribe", "delete a subscription")
    p.add_argument("-f", "--force", action="store_true", help="disconnect its consumers first")
    p = subscription_command("skip", "acknowledge the next N messages (entries) of a subscription")
    p.add_argument("-n", "--count", type=int, required=True, metavar="N", help="how many")
    subscription_command("clear-backlog", "acknowledge a subscription's whole backlog")
    p = subscription_command("reset-cursor", "move a subscription to a time or a message id")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("-t", "--time", metavar="TIME", help="ms since the epoch, or a duration ago: 30s, 10m, 1h, 2d, 1w")
    where.add_argument("-m", "--message-id", "--messageId", dest="message_id", metavar="ID",
                       help="ledgerId:entryId[:partition], earliest or latest")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.group == "tenants" and args.action == "list":
        args.name = None
    if getattr(args, "partitions", 1) < 1:
        print("magnetar admin: --partitions must be at least 1", file=sys.stderr)
        return 2
    brokers = Brokers(args.url, args.timeout)
    try:
        try:
            _run(brokers, args, args.timeout)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, brokers.target) from exc
        finally:
            brokers.close()
    except MagnetarError as exc:
        print(f"magnetar admin: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
