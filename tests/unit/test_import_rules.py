"""The import rules of docs/architecture.md, read from the source (imports under
``if TYPE_CHECKING:`` are not run and do not count):

- kazoo only in ``metadata/``;
- gRPC only in the services' gRPC doors (``broker/rpc/``, ``bookie/rpc/``,
  ``auditor/rpc/``), their process wiring (``*/process.py``: the health servicer), the
  CLI tools, the SDK's transport (``client/connection.py``), the bookie transport
  (``ledger/bookie_client.py``), ``common/grpcutil.py``, ``common/grpcauth.py``,
  ``common/grpcserver.py``, ``common/healthcheck.py``, ``common/tls.py`` and the test
  support;
- a gRPC servicer is defined only in a door (``*/rpc/``), and only
  ``common/grpcserver.py`` makes a gRPC server (one start-up for every service);
- ``common/`` and ``metadata/`` import no service package;
- the broker core, imported on its own, does not load gRPC.

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
    "admin.py", "shell.py", "clienttool.py",
    "broker/process.py", "bookie/process.py", "auditor/process.py",
    "client/connection.py", "ledger/bookie_client.py",
    "common/grpcutil.py", "common/grpcauth.py", "common/grpcserver.py", "common/healthcheck.py", "common/tls.py",
}
GRPC_SERVER_MAKER = "common/grpcserver.py"
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


def _is_door(rel: str) -> bool:
    """A module of a service's gRPC door: ``<service>/rpc/...``."""
    return rel.split("/")[1:2] == ["rpc"]


def _sources() -> dict[str, ast.Module]:
    return {
        str(p.relative_to(ROOT)): ast.parse(p.read_text(), str(p))
        for p in ROOT.rglob("*.py") if "proto" not in p.relative_to(ROOT).parts
    }


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
        adapter = _is_door(rel) or rel.startswith("testing/") or rel in GRPC_ALLOWED
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


def test_servicers_are_defined_in_the_doors_and_one_module_makes_grpc_servers() -> None:
    servicers, server_makers = set(), set()
    for rel, tree in _sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Attribute) and b.attr.endswith("Servicer") for b in node.bases
            ):
                servicers.add((rel, node.name))
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("grpc.aio.server", "aio.server", "grpc.server"):
                server_makers.add(rel)
    assert {"BrokerServicer", "BookieServicer", "AuditorServicer"} <= {name for _, name in servicers}
    assert {(rel, name) for rel, name in servicers if not _is_door(rel)} == set(), "a servicer outside */rpc/"
    assert server_makers == {GRPC_SERVER_MAKER}, "gRPC servers are made by common/grpcserver.py only"


BROKER_DOORS = ("broker/rpc/",)
BROKER_PROCESS = {"broker/process.py", "broker/__main__.py"}


def test_the_broker_core_loads_without_grpc() -> None:
    modules = set(_modules())
    assert BROKER_PROCESS <= modules and "broker/rpc/servicer.py" in modules, "moved: update BROKER_DOORS/BROKER_PROCESS"
    core = sorted(
        "magnetar." + rel[:-3].replace("/", ".").removesuffix(".__init__")
        for rel in modules
        if rel.startswith("broker/") and not rel.startswith(BROKER_DOORS) and rel not in BROKER_PROCESS
    )
    assert "magnetar.broker.topic" in core and "magnetar.broker.dispatch.shared" in core
    assert "magnetar.broker.service" in core and "magnetar.broker.deadletter.publisher" in core
    assert "magnetar.broker.deadletter" in core and "magnetar.broker.deadletter.moves" in core
    code = f"import importlib, sys\nfor m in {core!r}: importlib.import_module(m)\nprint('grpc' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
