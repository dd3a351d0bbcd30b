"""``magnetar admin namespaces`` operations on every topic of a namespace, with
pulsar-admin's names: ``clear-backlog NS [-s SUB]`` and ``unsubscribe NS -s SUB``
(Pulsar's ``POST .../clearBacklog[/{subscription}]`` and ``.../unsubscribe/{subscription}``;
through either door: the broker's per-bundle RPCs or the gateway's routes)."""

from __future__ import annotations

import argparse
from typing import Any

from magnetar.client.admin import AdminClient
from magnetar.client.rest_admin import RestAdmin


def add_namespace_op_commands(namespaces: argparse._SubParsersAction[Any]) -> None:
    p = namespaces.add_parser(
        "clear-backlog", help="clear the backlog of every subscription (or one) on every topic of a namespace",
        operations=("Namespaces_clearNamespaceBacklog", "Namespaces_clearNamespaceBacklogForSubscription"))
    p.add_argument("name", metavar="TENANT/NAMESPACE")
    p.add_argument("-s", "--sub", dest="subscription", metavar="SUBSCRIPTION", default="",
                   help="only this subscription")
    p.add_argument("-f", "--force", action="store_true", help="accepted (pulsar-admin asks to confirm without it)")
    p = namespaces.add_parser(
        "unsubscribe", help="delete a subscription on every topic of a namespace (refused, nothing deleted, while "
                            "consumers are connected to it)", operations=("Namespaces_unsubscribeNamespace",))
    p.add_argument("name", metavar="TENANT/NAMESPACE")
    p.add_argument("-s", "--sub", dest="subscription", metavar="SUBSCRIPTION", required=True)


async def run_namespace_op(admin: AdminClient | RestAdmin, args: argparse.Namespace) -> bool:
    """Run a namespace operation; False when ``args`` is none of them.

    Raises: MagnetarError: what the broker or gateway answered.
    """
    if args.action == "clear-backlog":
        await admin.clear_namespace_backlog(args.name, args.subscription)
    elif args.action == "unsubscribe":
        await admin.unsubscribe_namespace(args.name, args.subscription)
    else:
        return False
    return True
