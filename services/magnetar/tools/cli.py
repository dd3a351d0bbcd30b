"""The ``magnetar`` command: one entry point for every service and tool.

Each command names ``module`` (its ``main(argv)`` runs) or ``module:function``.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "standalone": ("magnetar.tools.standalone", "ZooKeeper, bookies, a broker and an auditor on this machine (data under ./data)"),
    "broker": ("magnetar.broker.__main__", "run one broker"),
    "bookie": ("magnetar.bookie.__main__", "run one bookie (storage node)"),
    "auditor": ("magnetar.auditor.__main__", "run one auditor replica (re-replicates lost bookies' data)"),
    "gateway": ("magnetar.gateway.__main__", "run the gateway: Pulsar's admin REST API and WebSocket API (port 8080)"),
    "admin": ("magnetar.tools.admin", "tenants, namespaces, topics, schemas, clusters, brokers (like pulsar-admin)"),
    "produce": ("magnetar.tools.clienttool:produce_main", "send messages to a topic (like pulsar-client produce)"),
    "consume": ("magnetar.tools.clienttool:consume_main", "receive messages from a topic (like pulsar-client consume)"),
    "tokens": ("magnetar.tools.tokenstool", "create keys and JWT tokens, show and validate tokens (like pulsar tokens)"),
    "health": ("magnetar.tools.healthtool", "exit 0 when a service answers its health check (container probes)"),
    "shell": ("magnetar.tools.shell", "bookie and ledger tools (listbookies, simpletest, ledgermetadata, recover, ...)"),
}


def _usage() -> str:
    lines = ["usage: magnetar COMMAND [options]   (magnetar COMMAND --help for details)", "", "commands:"]
    lines += [f"  {name:<12} {text}" for name, (_, text) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if argv[0] not in COMMANDS:
        print(f"magnetar: unknown command {argv[0]!r}\n{_usage()}", file=sys.stderr)
        return 2
    module_name, _, function = COMMANDS[argv[0]][0].partition(":")
    entry = getattr(importlib.import_module(module_name), function or "main")
    return int(entry(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
