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
