"""``magnetar admin``: tenants, namespaces and topics over the broker's admin RPCs.

Shaped like ``pulsar-admin``: lists print one name a line, create/delete print
nothing, ``topics stats`` prints JSON with pulsar-admin's field names. Errors are one
line on stderr and exit 1; bad usage exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import grpc

from magnetar.common.errors import MagnetarError
from magnetar.common.grpcutil import CHANNEL_OPTIONS, from_rpc_error
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1.broker_pb2_grpc import BrokerStub

DEFAULT_URL = "127.0.0.1:6650"
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


def _print_names(reply: pb.NameList) -> None:
    for name in reply.names:
        print(name)


def _run(stub: BrokerStub, args: argparse.Namespace, timeout: float) -> None:
    group, action = args.group, args.action
    if group == "tenants":
        if action == "create":
            stub.CreateTenant(pb.CreateTenantRequest(tenant=args.name), timeout=timeout)
        elif action == "delete":
            stub.DeleteTenant(pb.DeleteTenantRequest(tenant=args.name), timeout=timeout)
        else:
            _print_names(stub.ListTenants(pb.ListTenantsRequest(), timeout=timeout))
    elif group == "namespaces":
        if action == "create":
            stub.CreateNamespace(pb.CreateNamespaceRequest(namespace=args.name), timeout=timeout)
        elif action == "delete":
            stub.DeleteNamespace(pb.DeleteNamespaceRequest(namespace=args.name), timeout=timeout)
        else:
            _print_names(stub.ListNamespaces(pb.ListNamespacesRequest(tenant=args.name), timeout=timeout))
    elif action == "create":
        stub.CreateTopic(pb.CreateTopicRequest(topic=args.name, partitions=0), timeout=timeout)
    elif action == "create-partitioned-topic":
        stub.CreateTopic(pb.CreateTopicRequest(topic=args.name, partitions=args.partitions), timeout=timeout)
    elif action == "delete":
        stub.DeleteTopic(pb.DeleteTopicRequest(topic=args.name), timeout=timeout)
    elif action == "list":
        _print_names(stub.ListTopics(pb.ListTopicsRequest(namespace=args.name), timeout=timeout))
    else:
        stats = stub.GetTopicStats(pb.TopicStatsRequest(topic=args.name), timeout=timeout)
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
    group("namespaces", {"create": ("create a namespace", "TENANT/NAMESPACE"),
                         "delete": ("delete a namespace", "TENANT/NAMESPACE"),
                         "list": ("list a tenant's namespaces", "TENANT")})
    topics = group("topics", {"create": ("create a non-partitioned topic", "TOPIC"),
                              "delete": ("delete a topic", "TOPIC"),
                              "list": ("list a namespace's topics", "TENANT/NAMESPACE"),
                              "stats": ("print a topic's stats as JSON", "TOPIC")})
    p = topics.add_parser("create-partitioned-topic", help="create a partitioned topic")
    p.add_argument("name", metavar="TOPIC")
    p.add_argument("-p", "--partitions", type=int, required=True, help="number of partitions")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.group == "tenants" and args.action == "list":
        args.name = None
    if getattr(args, "partitions", 1) < 1:
        print("magnetar admin: --partitions must be at least 1", file=sys.stderr)
        return 2
    target = broker_target(args.url)
    try:
        with grpc.insecure_channel(target, options=CHANNEL_OPTIONS) as channel:
            try:
                _run(BrokerStub(channel), args, args.timeout)
            except grpc.RpcError as exc:
                raise from_rpc_error(exc, target) from exc
    except MagnetarError as exc:
        print(f"magnetar admin: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
