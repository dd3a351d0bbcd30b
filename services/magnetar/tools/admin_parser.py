"""The argparse tree of ``magnetar admin`` and the gateway operations its verbs do.

Each verb names the gateway's REST operations it does (their ``operationId`` in the
gateway's ``/openapi.json``, Pulsar's swagger names) with one keyword where it is
defined::

    topics.add_parser("stats", help="...", operations=("PersistentTopics_getStats",))

:class:`VerbParser` takes the keyword (every parser of the tree is one: argparse makes
subparsers of their parent's class). ``tests/unit/test_cli_parity.py`` reads the tree
with :func:`verb_operations` and fails when an operation of the gateway has no verb and
is not in :data:`EXEMPT`, or when a verb names an operation the gateway does not have:
``magnetar admin`` does everything the gateway does.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

EXEMPT: dict[str, str] = {
    "healthz_healthz_get": "the gateway's own liveness probe: `magnetar health` checks services",
    "readyz_readyz_get": "the gateway's own readiness probe: `magnetar health` checks services",
    "Topics_produceOnPersistentTopic": "the REST producer, a client not an admin call: `magnetar produce`",
}
"""Gateway operations no ``magnetar admin`` verb does, with the reason (the WebSocket API
is no REST operation: `magnetar produce`/`consume` are its counterparts)."""


def comma_names(text: str) -> list[str]:
    """``a,b`` → ``["a", "b"]`` (blanks dropped): the argparse type of list options."""
    return [name.strip() for name in text.split(",") if name.strip()]


def add_permission_verbs(
    group: argparse._SubParsersAction[Any], target: str, helps: tuple[str, str, str], operations: tuple[str, str, str],
) -> None:
    """pulsar-admin's ``grant-permission --role R --actions A,B``, ``revoke-permission
    --role R`` and ``permissions`` of one level (``target``: the positional's metavar;
    ``helps`` and ``operations`` in that order)."""
    p = group.add_parser("grant-permission", help=helps[0], operations=(operations[0],))
    p.add_argument("name", metavar=target)
    p.add_argument("--role", required=True, help="the client role")
    p.add_argument("--actions", required=True, type=comma_names, metavar="ACTION,ACTION",
                   help="produce, consume, functions, sources, sinks, packages")
    p = group.add_parser("revoke-permission", help=helps[1], operations=(operations[1],))
    p.add_argument("name", metavar=target)
    p.add_argument("--role", required=True, help="the client role")
    group.add_parser("permissions", help=helps[2], operations=(operations[2],)).add_argument("name", metavar=target)


class VerbParser(argparse.ArgumentParser):
    """An ArgumentParser that records ``operations``: the gateway operationIds the verb
    does."""

    def __init__(self, *args: Any, operations: Iterable[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.operations = tuple(operations)


def verb_operations(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[str, tuple[str, ...]]:
    """Each operationId declared in the tree under ``parser`` → the verb doing it
    (``("topics", "stats")``); the first verb when several declare one."""
    found: dict[str, tuple[str, ...]] = {}
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for name, sub in action.choices.items():
            for operation in getattr(sub, "operations", ()):
                found.setdefault(operation, (*path, name))
            for operation, verb in verb_operations(sub, (*path, name)).items():
                found.setdefault(operation, verb)
    return found
