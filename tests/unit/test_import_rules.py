"""The import rules of docs/architecture.md, read from the source (imports under
``if TYPE_CHECKING:`` are not run and do not count):

- kazoo only in ``metadata/``;
- gRPC only in the adapters (``server.py``, ``broker/admin_rpcs.py``, ``broker/topic_rpcs.py``,
  ``broker/namespace_rpcs.py``, ``broker/authorization_rpcs.py``, ``broker/permission_rpcs.py``, ``broker/deadletter/remote.py``, the CLI tools), the
  SDK's transport (``client/connection.py``, ``client/handler.py``), the bookie transport
  (``ledger/bookie_client.py``), ``common/grpcutil.py``, ``common/grpcauth.py``, ``common/healthcheck.py``,
  ``common/tls.py``
  and the test support;
- ``common/`` and ``metadata/`` import no service package;
- the broker core, imported on its own, does not load gRPC;
- the broker core imports no generated wire types (``magnetar.proto``): it has its own
  types for entries, subscription types, message ids and stats, and each door
  translates (only the entry codec, ``broker/entry.py``, reads the stored ``EntryBatch``).

``KNOWN`` lists the places that still break a rule (none now); each must still be real,
so the list only shrinks.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import magnetar

ROOT = Path(magnetar.__file__).parent
SERVICES = ("bookie", "broker", "auditor", "ledger", "client", "gateway")
GRPC_ALLOWED = {
    "admin.py", "shell.py", "clienttool.py", "broker/admin_rpcs.py", "broker/topic_rpcs.py", "broker/namespace_rpcs.py", "broker/authorization_rpcs.py", "broker/permission_rpcs.py",
    "broker/deadletter/remote.py", "client/connection.py", "ledger/bookie_client.py",
    "common/grpcutil.py", "common/grpcauth.py", "common/healthcheck.py", "common/tls.py",
}
KNOWN: set[tuple[str, str]] = set()


def _runtime_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    names = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _modules() -> dict[str, set[str]]:
    return {
        str(p.relative_to(ROOT)): _runtime_imports(p)
        for p in ROOT.rglob("*.py") if "proto" not in p.relative_to(ROOT).parts
    }


def _breaks() -> set[tuple[str, str]]:
    found = set()
    for rel, imports in _modules().items():
        top = {name.split(".")[0] for name in imports}
        if "kazoo" in top and not rel.startswith("metadata/"):
            found.add(("kazoo", rel))
        uses_grpc = bool(top & {"grpc", "grpc_health", "grpc_reflection"})
        adapter = rel.endswith("server.py") or rel.startswith("testing/") or rel in GRPC_ALLOWED
        if uses_grpc and not adapter:
            found.add(("grpc", rel))
        if rel.startswith(("common/", "metadata/")) and any(
            name.split(".")[:2] in (["magnetar", s] for s in SERVICES) for name in imports
        ):
            found.add(("service", rel))
    return found


def test_no_module_breaks_the_import_rules_beyond_the_known_ones() -> None:
    breaks = _breaks()
    assert breaks - KNOWN == set(), "new imports that break docs/architecture.md's rules"
    assert KNOWN - breaks == set(), "fixed: take these out of KNOWN (and docs/architecture.md)"


BROKER_ADAPTERS = {
    "broker/server.py", "broker/admin_rpcs.py", "broker/topic_rpcs.py", "broker/namespace_rpcs.py", "broker/authorization_rpcs.py", "broker/permission_rpcs.py", "broker/__main__.py",
    "broker/deadletter/remote.py",
}


def test_the_broker_core_loads_without_grpc() -> None:
    assert BROKER_ADAPTERS <= set(_modules()), "an adapter moved: update BROKER_ADAPTERS"
    core = sorted(
        "magnetar." + rel[:-3].replace("/", ".").removesuffix(".__init__")
        for rel in _modules()
        if rel.startswith("broker/") and rel not in BROKER_ADAPTERS
    )
    assert "magnetar.broker.topic" in core and "magnetar.broker.dispatch.shared" in core
    assert "magnetar.broker.service" in core and "magnetar.broker.deadletter.publisher" in core
    assert "magnetar.broker.deadletter" in core and "magnetar.broker.deadletter.moves" in core
    code = f"import importlib, sys\nfor m in {core!r}: importlib.import_module(m)\nprint('grpc' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


WIRE_ALLOWED = BROKER_ADAPTERS | {"broker/entry.py", "broker/process.py"}
"""Broker modules that may import ``magnetar.proto``: the doors (``broker/rpc/``,
``broker/protocol/``), process wiring and the entry codec (the stored format)."""


def _is_broker_door(rel: str) -> bool:
    return rel.startswith(("broker/rpc/", "broker/protocol/")) or rel in WIRE_ALLOWED


def test_the_broker_core_imports_no_wire_types() -> None:
    modules = _modules()
    core = {rel for rel in modules if rel.startswith("broker/") and not _is_broker_door(rel)}
    assert {"broker/topic.py", "broker/dispatch/base.py", "broker/deadletter/copies.py"} <= core
    wired = sorted(
        rel for rel in core
        if any(name == "magnetar.proto" or name.startswith("magnetar.proto.") for name in modules[rel])
    )
    assert wired == [], "broker core modules import magnetar.proto: use the core's types, translate at the door"
