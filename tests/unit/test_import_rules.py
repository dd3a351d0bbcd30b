"""The import rules of docs/architecture.md, read from the source (for the first four,
imports under ``if TYPE_CHECKING:`` are not run and do not count):

- kazoo only in ``metadata/``;
- gRPC only in the services' gRPC doors (``broker/rpc/``, ``bookie/rpc/``,
  ``auditor/rpc/``), their process wiring (``*/process.py``: the health servicer), the
  CLI tools, the SDK's transports (``client/connection.py``, ``client/session.py``), the bookie transport
  (``ledger/bookie_client.py``), ``common/grpcutil.py``, ``common/grpcauth.py``,
  ``common/grpcserver.py``, ``common/healthcheck.py``, ``common/tls.py`` and the test
  support;
- a gRPC servicer is defined only in a door (``*/rpc/``), and only
  ``common/grpcserver.py`` makes a gRPC server (one start-up for every service);
- ``common/`` and ``metadata/`` import no service package;
- the broker core, imported on its own, does not load gRPC;
- the layer order, lowest first: common < protocol (Pulsar's wire codec) < metadata < ledger < managedledger < services
  (bookie, broker, auditor, client; between them only the edges of ``SERVICE_EDGES``) <
  gateway and the command-line tools < testing; imports under ``if TYPE_CHECKING:``
  count here (see ``LAYERS`` below for why);
- no import cycle among magnetar's modules, imports under ``if TYPE_CHECKING:`` included;
- the package root holds only the SDK's public face (``__init__.py``, ``exceptions.py``)
  and packages: the command-line tools live in ``tools/``.
- the broker core imports no generated wire types (``magnetar.proto``): it has its own
  types for entries, subscription types, message ids and stats, and each door
  translates (only the entry codec, ``broker/entry.py``, reads the stored ``EntryBatch``).

``KNOWN`` lists the places that still break one of the first three rules (none now); each
must still be real, so the list only shrinks.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import magnetar

ROOT = Path(magnetar.__file__).parent
SERVICES = ("bookie", "broker", "auditor", "ledger", "client", "gateway")
GRPC_ALLOWED = {
    "tools/admin.py", "tools/shell.py", "tools/clienttool.py",
    "broker/process.py", "bookie/process.py", "auditor/process.py",
    "client/connection.py", "client/session.py", "ledger/bookie_client.py",
    "common/grpcutil.py", "common/grpcauth.py", "common/grpcserver.py", "common/healthcheck.py", "common/tls.py",
}
GRPC_SERVER_MAKER = "common/grpcserver.py"
KNOWN: set[tuple[str, str]] = set()
SDK_FACE = {"__init__.py", "exceptions.py"}
"""The modules at the package root: what ``import magnetar`` is (the SDK's names and errors)."""


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


BROKER_DOORS = ("broker/rpc/", "broker/session/")
BROKER_PROCESS = {"broker/process.py", "broker/__main__.py"}


def test_the_package_root_holds_only_the_sdks_public_face() -> None:
    strays = sorted(
        p.name for p in ROOT.iterdir()
        if p.name not in SDK_FACE and p.name != "__pycache__" and not (p / "__init__.py").is_file()
    )
    assert strays == [], "the package root is the SDK's public face: put these in a package (tools/ for a command)"


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


# -- the layer order and import cycles -------------------------------------------------
#
# The layers, lowest first (docs/architecture.md): a module imports only from its own
# layer or lower ones. Imports under ``if TYPE_CHECKING:`` count like the others here: a
# module that names an upper one's type is written against it even if it never loads it
# (a type-only need is met by a Protocol declared where it is used, as ``DispatchContext``
# and ``SubscriptionTopic`` are). Importing a module is not importing its parent packages.
#
# The package root, ``magnetar/__init__.py``, is the SDK's facade (``magnetar.Client``,
# loaded lazily) and counts as the client; as Python runs it before any module of the
# package, naming it (``from magnetar import __version__``) adds no edge, and it may load
# nothing at runtime but the lowest layer (``common/`` and ``exceptions.py``), so that
# loading any module loads no service with it.

LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("common", frozenset({"common", "exceptions.py", "schema"})),  # schema: pulsar-client's value encoders
    ("protocol", frozenset({"protocol"})),  # Pulsar's wire codec: common/ and its generated messages only
    ("metadata", frozenset({"metadata"})),
    ("ledger", frozenset({"ledger"})),
    ("managedledger", frozenset({"managedledger"})),
    ("services", frozenset({"bookie", "broker", "auditor", "client", "asyncio"})),
    ("gateway / tools", frozenset({"gateway", "tools"})),  # and the command-line modules at the root
    ("testing", frozenset({"testing"})),
)
SERVICES_RANK = [name for name, _ in LAYERS].index("services")
TOOLS_RANK = [name for name, _ in LAYERS].index("gateway / tools")
"""A module at the package root not named in ``LAYERS`` is a command-line tool."""
REQUIRED = ("common", "metadata", "ledger", "managedledger", "bookie", "broker", "auditor", "client", "gateway", "testing")

SERVICE_OF = {"asyncio": "client"}
"""``magnetar.asyncio`` is the SDK's asyncio face."""
SERVICE_EDGES: dict[tuple[str, str], str] = {
    ("broker", "client"): "the remote move publisher (broker/rpc/remote_moves.py) stores retry and "
    "dead-letter copies on topics other brokers serve through the SDK",
}
"""The only imports allowed between the service packages (bookie, broker, auditor, client)."""


def _module_name(rel: Path) -> str:
    parts = ["magnetar", *rel.with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _graph() -> dict[str, dict[str, bool]]:
    """Module -> the magnetar modules it imports -> True when only under TYPE_CHECKING."""
    files = {
        _module_name(p.relative_to(ROOT)): p for p in ROOT.rglob("*.py") if "proto" not in p.relative_to(ROOT).parts
    }

    def resolve(name: str) -> str | None:
        while name and name not in files:  # a name imported from a module: the module
            name = name.rpartition(".")[0]
        return name if name not in ("", "magnetar") else None  # the root: see above

    graph: dict[str, dict[str, bool]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        type_only = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for stmt in node.body
            for n in ast.walk(stmt)
        }
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        edges: dict[str, bool] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], *([base] if base else [])])
                names = [f"{base}.{a.name}" for a in node.names]  # a submodule, or a name of ``base``
            else:
                continue
            for name in names:
                target = resolve(name) if name.split(".")[0] == "magnetar" else None
                if target is not None and target != module:
                    edges[target] = edges.get(target, True) and id(node) in type_only
        graph[module] = edges
    return graph


def _rel(module: str) -> str:
    parts = module.split(".")[1:]
    return "/".join(parts) if parts else "__init__.py"


def _rank(module: str) -> int:
    parts = module.split(".")[1:]
    if not parts:
        return SERVICES_RANK  # the root: the SDK's facade
    top = parts[0] if len(parts) > 1 or (ROOT / parts[0]).is_dir() else parts[0] + ".py"
    for rank, (_, members) in enumerate(LAYERS):
        if top in members:
            return rank
    if top.endswith(".py"):
        return TOOLS_RANK
    raise AssertionError(f"{top} has no layer: add it to LAYERS (and docs/architecture.md)")


def _service(module: str) -> str:
    parts = module.split(".")[1:]
    top = parts[0] if parts else "client"
    return SERVICE_OF.get(top, top)


def test_every_layer_package_exists() -> None:
    missing = [name for name in REQUIRED if not (ROOT / name / "__init__.py").is_file()]
    assert missing == [], f"packages of LAYERS that do not exist: {missing}"


def test_modules_import_only_their_own_layer_or_lower_ones() -> None:
    upward, across = [], []
    for module, edges in _graph().items():
        for target, type_only in edges.items():
            kind = " (TYPE_CHECKING)" if type_only else ""
            if _rank(target) > _rank(module):
                upward.append(f"{_rel(module)} -> {_rel(target)}{kind}: "
                              f"{LAYERS[_rank(module)][0]} imports {LAYERS[_rank(target)][0]}")
            elif _rank(target) == _rank(module) == SERVICES_RANK and _service(module) != _service(target):
                if (_service(module), _service(target)) not in SERVICE_EDGES:
                    across.append(f"{_rel(module)} -> {_rel(target)}{kind}")
    assert upward == [], "imports of an upper layer:\n" + "\n".join(sorted(upward))
    assert across == [], "imports between service packages not in SERVICE_EDGES:\n" + "\n".join(sorted(across))


def test_the_package_root_loads_only_the_lowest_layer() -> None:
    runtime = {target for target, type_only in _graph()["magnetar"].items() if not type_only}
    assert runtime, "the root imports nothing: has it moved?"
    assert {t for t in runtime if _rank(t) != 0} == set()


def test_the_service_edges_are_all_used() -> None:
    used = {
        (_service(m), _service(t))
        for m, edges in _graph().items() for t in edges
        if _rank(m) == _rank(t) == SERVICES_RANK and _service(m) != _service(t)
    }
    assert set(SERVICE_EDGES) - used == set(), "no longer used: take these out of SERVICE_EDGES (and the docs)"


def _cycles(graph: dict[str, dict[str, bool]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module
    (Tarjan's algorithm), as the modules in import order with the first repeated."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while (w := stack.pop()) != v:
                on_stack.discard(w)
                component.add(w)
            on_stack.discard(v)
            component.add(v)
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for component in components:
        start = min(component)
        paths = {start: [start]}
        queue = [start]
        while queue:  # breadth first: the shortest way back to start
            v = queue.pop(0)
            for w in sorted(graph[v]):
                if w == start:
                    cycles.append([*paths[v], start])
                    queue = []
                    break
                if w in component and w not in paths:
                    paths[w] = [*paths[v], w]
                    queue.append(w)
    return cycles


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b": False}, "b": {"c": True}, "c": {"a": False, "d": False}, "d": {}}
    assert _cycles(graph) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b": False}, "b": {}}) == []


def test_no_import_cycle_among_magnetar_modules() -> None:
    graph = _graph()

    def show(cycle: list[str]) -> str:  # an import under TYPE_CHECKING drawn as -TYPE_CHECKING->
        steps = [f" -{'TYPE_CHECKING' if graph[m][n] else ''}-> {n}" for m, n in zip(cycle, cycle[1:], strict=False)]
        return cycle[0] + "".join(steps)

    cycles = _cycles(graph)
    assert cycles == [], "import cycles (TYPE_CHECKING imports count):\n" + "\n".join(map(show, cycles))


WIRE_ALLOWED = {"broker/entry.py", "broker/process.py", "broker/__main__.py"}
"""Broker modules that may import ``magnetar.proto``: the doors (``broker/rpc/``,
``broker/protocol/``, ``broker/session/``), process wiring and the entry codec (the stored format)."""


def _is_broker_door(rel: str) -> bool:
    return rel.startswith(("broker/rpc/", "broker/protocol/", "broker/session/")) or rel in WIRE_ALLOWED


def test_the_broker_core_imports_no_wire_types() -> None:
    modules = _modules()
    core = {rel for rel in modules if rel.startswith("broker/") and not _is_broker_door(rel)}
    assert {"broker/topic.py", "broker/dispatch/base.py", "broker/deadletter/copies.py"} <= core
    wired = sorted(
        rel for rel in core
        if any(name == "magnetar.proto" or name.startswith("magnetar.proto.") for name in modules[rel])
    )
    assert wired == [], "broker core modules import magnetar.proto: use the core's types, translate at the door"
