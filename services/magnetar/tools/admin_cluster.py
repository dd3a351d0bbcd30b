"""``magnetar admin brokers``, ``broker-stats`` and ``auditor``: the cluster as a whole, with
pulsar-admin's names (``brokers list|healthcheck``, ``broker-stats load-report|topics``),
``broker-stats rates-history`` and
Magnetar's own ``auditor status|audit`` and ``zookeeper status``
(``clusters`` is :mod:`magnetar.tools.admin_clusters`).

They read what only the gateway knows (the live brokers in ZooKeeper, the auditor's
leader): they go to the gateway's REST API (``--admin-url``, default
http://127.0.0.1:8080) whichever door is chosen, as ``bookies``, ``ledgers`` and ``dlq``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from magnetar.client.rest_admin import RestAdmin, _seg

GATEWAY_ONLY = {("brokers", "list"), ("brokers", "healthcheck"), ("broker-stats", "load-report"), ("auditor", "status"),
                ("auditor", "audit"), ("broker-stats", "topics"), ("broker-stats", "rates-history"),
                ("zookeeper", "status")}
"""The verbs that go to the gateway over either door."""


def via_gateway(args: argparse.Namespace) -> bool:
    return (args.group, args.action) in GATEWAY_ONLY


async def run_cluster_via_gateway(rest: RestAdmin, args: argparse.Namespace) -> None:
    """The verbs of :data:`GATEWAY_ONLY`: JSON out (``healthcheck``: ``ok``)."""
    verb = (args.group, args.action)
    if verb == ("brokers", "list"):
        cluster = args.cluster or (await rest.clusters())[0]
        for address in await rest.request("GET", f"/admin/v2/brokers/{_seg(cluster)}"):
            print(address)
    elif verb == ("brokers", "healthcheck"):
        response = await rest._send("GET", "/admin/v2/brokers/health")
        print(response.text.strip())
    elif verb == ("broker-stats", "load-report"):
        _print_json(await rest.request("GET", "/admin/v2/broker-stats/load-report",
                                       params={"broker": args.broker} if args.broker else None))
    elif verb == ("broker-stats", "topics"):
        tenant, _, namespace = args.namespace.partition("/")
        _print_json(await rest.request("GET", f"/admin/v2/namespaces/{_seg(tenant)}/{_seg(namespace)}/topicStats"))
    elif verb == ("broker-stats", "rates-history"):
        _print_json(await rest.request("GET", "/admin/v2/broker-stats/rates-history"))
    elif verb == ("zookeeper", "status"):
        _print_json(await rest.request("GET", "/admin/v2/zookeeper"))
    elif verb == ("auditor", "status"):
        _print_json(await rest.request("GET", "/admin/v2/auditor", params={"maxLedgers": args.max_ledgers}))
    else:
        _print_json(await rest.request("POST", "/admin/v2/auditor/audit"))


def add_broker_and_auditor_commands(groups: argparse._SubParsersAction[Any]) -> None:
    brokers = groups.add_parser("brokers", help="brokers (via the gateway)").add_subparsers(dest="action", required=True)
    brokers.add_parser("list", help="list the cluster's live brokers (host:port), one a line",
                       operations=("BrokersBase_getActiveBrokers",)).add_argument(
        "cluster", nargs="?", metavar="CLUSTER", help="default: the gateway's cluster")
    brokers.add_parser("healthcheck", help="produce and read back a message through the brokers; prints ok",
                       operations=("BrokersBase_healthCheck",))
    stats = groups.add_parser("broker-stats", help="brokers' load (via the gateway)").add_subparsers(
        dest="action", required=True)
    stats.add_parser("load-report", help="a broker's load report (the load manager's) as JSON",
                     operations=("BrokerStatsBase_getLoadReport",)).add_argument(
        "--broker", metavar="HOST:PORT", help="default: the first live broker")
    stats.add_parser("topics", help="the stats of every loaded topic of a namespace, from every live broker, as JSON",
                     operations=("Magnetar_getNamespaceTopicStats",)).add_argument(
        "namespace", metavar="TENANT/NAMESPACE")
    stats.add_parser("rates-history", help="the cluster's message rates over the last 15 minutes and each broker's "
                     "load, as JSON", operations=("Magnetar_getRatesHistory",))
    zookeeper = groups.add_parser("zookeeper", help="ZooKeeper (via the gateway)").add_subparsers(
        dest="action", required=True)
    zookeeper.add_parser("status", help="the gateway's session and each server's mode, version, latency and node "
                         "count (srvr), as JSON", operations=("Magnetar_getZooKeeperStatus",))
    auditor = groups.add_parser("auditor", help="the auditor (via the gateway)").add_subparsers(dest="action", required=True)
    auditor.add_parser("status", help="the auditor's leader, under-replicated ledgers and replication progress as JSON",
                       operations=("Magnetar_getAuditorStatus",)).add_argument(
        "--max-ledgers", type=int, default=1000, metavar="N", help="list at most N under-replicated ledgers (default 1000)")
    auditor.add_parser("audit", help="run the auditor's check of every closed ledger now; prints its report as JSON",
                       operations=("Magnetar_triggerAudit",))


def _print_json(doc: object) -> None:
    print(json.dumps(doc, indent=2))
