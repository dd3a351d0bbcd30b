"""``magnetar admin topics`` permission verbs with pulsar-admin's names: ``permissions``
(each role's actions on the topic, JSON), ``grant-permission --role R --actions
produce,consume`` and ``revoke-permission --role R``. Over gRPC (``--url``) or the
gateway's REST API (``--admin-url``) with the same output."""

from __future__ import annotations

import argparse
import json
from typing import Any

from magnetar.client.admin import AdminClient
from magnetar.client.rest_admin import RestAdmin
from magnetar.tools.admin_parser import add_permission_verbs

ACTIONS = ("permissions", "grant-permission", "revoke-permission")


def add_topic_permission_commands(topics: argparse._SubParsersAction[Any]) -> None:
    add_permission_verbs(topics, "TOPIC", (
        "give a role actions on one topic (in addition to its namespace grant)",
        "take a role's grant on one topic away (its namespace grant stays)",
        "print each role's actions on a topic (namespace and topic grants) as JSON",
    ), ("PersistentTopics_grantPermissionsOnTopic", "PersistentTopics_revokePermissionsOnTopic",
        "PersistentTopics_getPermissionsOnTopic"))


async def run_topic_permissions(admin: AdminClient | RestAdmin, args: argparse.Namespace) -> bool:
    """Run the verb if it is one of these; False otherwise."""
    if args.action not in ACTIONS:
        return False
    if args.action == "permissions":
        print(json.dumps(await admin.topic_permissions(args.name), indent=2, sort_keys=True))
    elif args.action == "grant-permission":
        await admin.grant_topic_permission(args.name, args.role, args.actions)
    else:
        await admin.revoke_topic_permission(args.name, args.role)
    return True
