"""``magnetar admin clusters`` verbs with pulsar-admin's names and options: ``list``,
``get`` (JSON with Pulsar's ClusterData names), ``create`` and ``update`` (``--url``,
``--url-secure``, ``--broker-url``, ``--broker-url-secure``) and ``delete``. Each runs
over gRPC (``--url`` before the group) or the gateway's REST API (``--admin-url``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from magnetar.client.admin import AdminClient
from magnetar.client.rest_admin import RestAdmin, cluster_json
from magnetar.proto.v1 import broker_pb2 as pb

GROUP = "clusters"


def add_cluster_commands(groups: argparse._SubParsersAction[Any]) -> None:
    clusters = groups.add_parser(GROUP, help="manage clusters").add_subparsers(dest="action", required=True)
    clusters.add_parser("list", help="list the clusters (this one and the registered ones)",
                        operations=("ClustersBase_getClusters",))
    clusters.add_parser("get", help="print a cluster's service URLs as JSON",
                        operations=("ClustersBase_getCluster",)).add_argument("name", metavar="CLUSTER")
    clusters.add_parser("delete", help="delete a registered cluster (no namespace may replicate to it)",
                        operations=("ClustersBase_deleteCluster",)).add_argument(
        "name", metavar="CLUSTER")
    for action, help_text, operation in (
        ("create", "register a cluster with its service URLs", "ClustersBase_createCluster"),
        ("update", "replace a cluster's service URLs (those not given are unset)", "ClustersBase_updateCluster"),
    ):
        p = clusters.add_parser(action, help=help_text, operations=(operation,))
        p.add_argument("name", metavar="CLUSTER")
        # dest: the admin command's own --url (the broker to call) keeps its meaning
        p.add_argument("--url", dest="service_url", default="", metavar="URL", help="service URL: http://host:port")
        p.add_argument("--url-secure", dest="service_url_tls", default="", metavar="URL",
                       help="TLS service URL: https://host:port")
        p.add_argument("--broker-url", dest="broker_service_url", default="", metavar="URL",
                       help="broker service URL: pulsar://host:port")
        p.add_argument("--broker-url-secure", dest="broker_service_url_tls", default="", metavar="URL",
                       help="TLS broker service URL: pulsar+ssl://host:port")


async def run_clusters(admin: AdminClient | RestAdmin, args: argparse.Namespace) -> None:
    action = args.action
    if action == "list":
        print("\n".join(sorted(await admin.clusters())))
    elif action == "get":
        print(json.dumps(cluster_json(await admin.cluster(args.name)), indent=2))
    elif action == "delete":
        await admin.delete_cluster(args.name)
    else:
        data = pb.ClusterData(service_url=args.service_url, service_url_tls=args.service_url_tls,
                              broker_service_url=args.broker_service_url,
                              broker_service_url_tls=args.broker_service_url_tls)
        if action == "create":
            await admin.create_cluster(args.name, data)
        else:
            await admin.update_cluster(args.name, data)
