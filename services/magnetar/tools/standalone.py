"""``magnetar standalone``: ZooKeeper, bookies, a broker, an auditor and the gateway as
child processes of one command.

Components start in tiers (ZooKeeper, the bookies, the broker and the auditor, then the
gateway) and stop in reverse order on SIGINT/SIGTERM. Every child runs in
a process group of its own, so a Ctrl-C in the terminal reaches only this process,
which then stops the children in order. Children's output goes to <data-dir>/logs/.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Protocol

from magnetar.common import tokens
from magnetar.common.childproc import ChildNotReady, ChildProcess
from magnetar.common.errors import MagnetarError
from magnetar.common.healthcheck import grpc_health_serving, http_ready
from magnetar.common.netutil import can_connect, port_is_free
from magnetar.common.tls import ClientTls
from magnetar.common.zkserver import ZooKeeperServer

HOST = "127.0.0.1"
# A component's start may take minutes on a busy machine (ZooKeeper's JVM took over 60 s
# on two loaded cores) but its log keeps growing; one whose log stands still for
# STALL_TIMEOUT_S is stuck. READY_TIMEOUT_S bounds the wait for each component in all.
READY_TIMEOUT_S = 600.0
STALL_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0


class Component(Protocol):
    """A process standalone mode runs."""

    name: str
    address: str
    log_path: Path

    def launch(self) -> None: ...

    def wait_ready(self, timeout: float, stall_timeout: float | None) -> None: ...

    def stop(self, timeout: float) -> None: ...

    @property
    def alive(self) -> bool: ...

    @property
    def returncode(self) -> int | None: ...


class _ZooKeeper:
    def __init__(self, server: ZooKeeperServer) -> None:
        self.server = server
        self.name = "zookeeper"
        self.address = server.connect_string
        self.log_path = server.log_path
        self.launch = server.launch
        self.wait_ready = server.wait_ready
        self.stop = server.stop

    @property
    def alive(self) -> bool:
        return self.server.alive

    @property
    def returncode(self) -> int | None:
        return self.server.returncode


class _Service:
    """A ``python -m magnetar.<service>`` child, ready when ``ready()`` says so."""

    def __init__(self, name: str, address: str, process: ChildProcess, ready: Callable[[], bool]):
        self.name = name
        self.address = address
        self.process = process
        self.log_path = process.log_path
        self._ready = ready

    def launch(self) -> None:
        self.process.start()

    def wait_ready(self, timeout: float, stall_timeout: float | None) -> None:
        self.process.wait_ready(self._ready, timeout, stall_timeout=stall_timeout)

    def stop(self, timeout: float) -> None:
        self.process.terminate(timeout)

    @property
    def alive(self) -> bool:
        return self.process.alive

    @property
    def returncode(self) -> int | None:
        return self.process.returncode


class _Failure(Exception):
    """Ends the run with exit code 1 and this one-line message."""


class _StopRequested(BaseException):
    """Raised from the SIGINT/SIGTERM handler."""


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Options of ``magnetar standalone`` (added to ``parser`` when given)."""
    parser = parser or argparse.ArgumentParser(
        prog="magnetar standalone",
        description="Run ZooKeeper, bookies, a broker, an auditor and the gateway on this machine; Ctrl-C stops them.",
    )
    parser.add_argument("--data-dir", default="./data", help="where all data and logs go")
    parser.add_argument("--bookies", type=int, default=3, help="number of bookies (default 3)")
    parser.add_argument("--zookeeper", help="use this ZooKeeper HOST:PORT instead of a private one")
    parser.add_argument("--zk-port", type=int, default=2181, help="private ZooKeeper's port")
    parser.add_argument("--zk-root", default="/magnetar", help="root znode (default /magnetar)")
    parser.add_argument(
        "--bookie-port", type=int, default=3181,
        help="first bookie's port; the next get +1, +2 … skipping the auditor's port",
    )  # fmt: skip
    parser.add_argument("--port", type=int, default=6660, help="the broker's gRPC port, magnetar:// (default 6660)")
    parser.add_argument("--protocol-port", type=int, default=6650,
                        help="the broker's port for Pulsar's protocol, pulsar:// (default 6650; 0: off)")
    parser.add_argument("--protocol-tls-port", type=int, default=6651,
                        help="with TLS: the broker's port for pulsar+ssl:// (default 6651; 0: off)")
    parser.add_argument("--auditor-port", type=int, default=3182, help="the auditor's port (default 3182)")
    parser.add_argument("--gateway-port", type=int, default=8080, help="the gateway's HTTP port (default 8080)")
    parser.add_argument(
        "--replicas", type=int, default=None,
        help="copies of each entry, E=Qw=Qa (default: 2, or 1 with a single bookie)",
    )
    parser.add_argument("--tls-cert-file", default="",
                        help="TLS on every port: the PEM certificate every component serves (and shows as client)")
    parser.add_argument("--tls-key-file", default="", help="the PEM key of --tls-cert-file")
    parser.add_argument("--tls-trust-certs-file", default="", help="the PEM CA bundle components trust (with TLS)")
    parser.add_argument(
        "--token-secret-key", default="", metavar="FILE",
        help="token authentication on every component, and authorization on the broker, with this HS256 "
             "secret key (make one with `magnetar tokens create-secret-key --output FILE`; tokens with "
             "`magnetar tokens create --subject ROLE --secret-key FILE`)",
    )  # fmt: skip
    parser.add_argument(
        "--superuser-roles", default="admin", metavar="ROLE[,ROLE...]",
        help="with --token-secret-key: the roles that may do everything (default admin); the components "
             "call each other with a token of the first, written to <data-dir>/service.token",
    )  # fmt: skip
    return parser


def _tls_env(args: argparse.Namespace) -> dict[str, str]:
    """The children's TLS settings: every port TLS, every call between them TLS, when
    ``--tls-cert-file`` is given; none otherwise."""
    if not args.tls_cert_file:
        return {}
    env: dict[str, str] = {}
    for service in ("BOOKIE", "BROKER", "AUDITOR", "GATEWAY"):
        prefix = f"MAGNETAR_{service}_"
        env |= {
            f"{prefix}TLS_ENABLED": "true", f"{prefix}TLS_CERT_FILE": args.tls_cert_file,
            f"{prefix}TLS_KEY_FILE": args.tls_key_file, f"{prefix}TLS_TRUST_CERTS_FILE": args.tls_trust_certs_file,
        }  # fmt: skip
        if service != "BOOKIE":  # the bookie calls no one
            env[f"{prefix}TLS_CLIENT_ENABLED"] = "true"
    return env


def superuser_roles(args: argparse.Namespace) -> list[str]:
    """``--superuser-roles`` as a list (empty names dropped)."""
    return [role.strip() for role in args.superuser_roles.split(",") if role.strip()]


def _auth_env(args: argparse.Namespace, data_dir: Path) -> dict[str, str]:
    """The children's authentication settings, when ``--token-secret-key`` is given: every
    door takes tokens signed with that key, the broker authorizes, and the broker, the
    auditor and the gateway call bookies and brokers with a token of the first superuser
    role, minted here and kept in ``<data-dir>/service.token`` (mode 600)."""
    if not args.token_secret_key:
        return {}
    key_file = str(Path(args.token_secret_key).absolute())
    roles = superuser_roles(args)
    token_file = data_dir / "service.token"
    data_dir.mkdir(parents=True, exist_ok=True)
    token_file.touch(mode=0o600)
    token_file.write_text(tokens.create_token(roles[0], tokens.load_secret_key(key_file)) + "\n")
    env: dict[str, str] = {}
    for service in ("BOOKIE", "BROKER", "AUDITOR", "GATEWAY"):
        prefix = f"MAGNETAR_{service}_"
        env |= {
            f"{prefix}AUTHENTICATION_ENABLED": "true", f"{prefix}AUTHENTICATION_PROVIDERS": json.dumps(["token"]),
            f"{prefix}TOKEN_SECRET_KEY_FILE": key_file, f"{prefix}SUPERUSER_ROLES": json.dumps(roles),
        }  # fmt: skip
        if service != "BOOKIE":  # the bookie calls no one
            env[f"{prefix}BROKER_CLIENT_AUTH_TOKEN_FILE"] = str(token_file)
    env["MAGNETAR_BROKER_AUTHORIZATION_ENABLED"] = "true"
    return env


def bookie_ports(first: int, count: int, avoid: int) -> list[int]:
    """``count`` consecutive ports from ``first``, stepping over ``avoid`` (the auditor's:
    with the defaults the bookies get 3181, 3183, 3184 and the auditor keeps 3182)."""
    ports: list[int] = []
    port = first
    while len(ports) < count:
        if port != avoid:
            ports.append(port)
        port += 1
    return ports


def _components(args: argparse.Namespace, data_dir: Path) -> list[list[Component]]:
    """The tiers to start, in order."""
    logs = data_dir / "logs"
    tiers: list[list[Component]] = []
    zk_connect = args.zookeeper
    if not zk_connect:
        server = ZooKeeperServer(
            data_dir / "zookeeper", args.zk_port, HOST,
            log_path=logs / "zookeeper.log", own_process_group=True,
        )  # fmt: skip
        tiers.append([_ZooKeeper(server)])
        zk_connect = server.connect_string
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **_tls_env(args), **_auth_env(args, data_dir)}
    probe_tls = ClientTls(args.tls_trust_certs_file) if args.tls_cert_file else None
    grpc_ready = partial(grpc_health_serving, tls=probe_tls)
    bookies: list[Component] = []
    for i, port in enumerate(bookie_ports(args.bookie_port, args.bookies, args.auditor_port)):
        name, address = f"bookie-{i}", f"{HOST}:{port}"
        argv = [
            sys.executable, "-m", "magnetar.bookie", "--zookeeper", zk_connect,
            "--zk-root", args.zk_root, "--host", HOST, "--port", str(port),
            "--data-dir", str(data_dir / name),
        ]  # fmt: skip
        process = ChildProcess(name, argv, logs / f"{name}.log", env=env, own_process_group=True)
        bookies.append(_Service(name, address, process, partial(grpc_ready, address)))
    tiers.append(bookies)
    replicas = args.replicas or min(2, args.bookies)
    broker_env = {
        **env,
        "MAGNETAR_BROKER_ENSEMBLE_SIZE": str(replicas),
        "MAGNETAR_BROKER_WRITE_QUORUM": str(replicas),
        "MAGNETAR_BROKER_ACK_QUORUM": str(replicas),
        "MAGNETAR_BROKER_PROTOCOL_PORT": str(args.protocol_port),
        "MAGNETAR_BROKER_PROTOCOL_TLS_PORT": str(args.protocol_tls_port),
    }
    address = f"{HOST}:{args.port}"
    argv = [
        sys.executable, "-m", "magnetar.broker", "--zookeeper", zk_connect,
        "--zk-root", args.zk_root, "--host", HOST, "--port", str(args.port),
    ]  # fmt: skip
    process = ChildProcess("broker", argv, logs / "broker.log", env=broker_env, own_process_group=True)
    services: list[Component] = [_Service("broker", address, process, partial(grpc_ready, address))]
    address = f"{HOST}:{args.auditor_port}"
    argv = [
        sys.executable, "-m", "magnetar.auditor", "--zookeeper", zk_connect,
        "--zk-root", args.zk_root, "--host", HOST, "--port", str(args.auditor_port),
    ]  # fmt: skip
    process = ChildProcess("auditor", argv, logs / "auditor.log", env=env, own_process_group=True)
    services.append(_Service("auditor", address, process, partial(grpc_ready, address)))
    tiers.append(services)
    address = f"{HOST}:{args.gateway_port}"
    argv = [
        sys.executable, "-m", "magnetar.gateway", "--zookeeper", zk_connect,
        "--zk-root", args.zk_root, "--host", HOST, "--port", str(args.gateway_port),
    ]  # fmt: skip
    process = ChildProcess("gateway", argv, logs / "gateway.log", env=env, own_process_group=True)
    scheme = "https" if probe_tls else "http"
    ready = partial(http_ready, f"{scheme}://{address}/readyz", tls=probe_tls)
    tiers.append([_Service("gateway", address, process, ready)])
    return tiers


def _check_ports(args: argparse.Namespace) -> None:
    wanted = [] if args.zookeeper else [("ZooKeeper", args.zk_port, "--zk-port")]
    ports = bookie_ports(args.bookie_port, args.bookies, args.auditor_port)
    wanted += [(f"bookie-{i}", port, "--bookie-port") for i, port in enumerate(ports)]
    wanted += [("the broker", args.port, "--port"), ("the auditor", args.auditor_port, "--auditor-port"),
               ("the gateway", args.gateway_port, "--gateway-port")]
    if args.protocol_port:
        wanted.append(("Pulsar's protocol", args.protocol_port, "--protocol-port"))
    if args.protocol_tls_port and args.tls_cert_file:
        wanted.append(("Pulsar's protocol over TLS", args.protocol_tls_port, "--protocol-tls-port"))
    for what, port, flag in wanted:
        if not port_is_free(HOST, port):
            raise _Failure(
                f"port {port} on {HOST} (for {what}) is already in use: stop whatever uses it "
                f"(another standalone?) or choose other ports with {flag}"
            )
    if args.zookeeper and not can_connect(args.zookeeper):
        raise _Failure(
            f"cannot reach ZooKeeper at {args.zookeeper}: start it, or leave out --zookeeper "
            "to run a private one"
        )


def _client_urls(args: argparse.Namespace) -> list[str]:
    """Where clients point: Pulsar applications at pulsar:// (pulsar+ssl://) or the
    gateway's http(s)://, Magnetar's SDK and tools at magnetar://."""
    tls = bool(args.tls_cert_file)
    urls = []
    if args.protocol_port:
        urls.append(f"pulsar://{HOST}:{args.protocol_port}")
    if tls and args.protocol_tls_port:
        urls.append(f"pulsar+ssl://{HOST}:{args.protocol_tls_port}")
    urls.append(f"{'https' if tls else 'http'}://{HOST}:{args.gateway_port}")
    lines = [
        f"{'pulsar':<10} {' '.join(urls)} (Pulsar clients)",
        f"{'magnetar':<10} magnetar{'+ssl' if tls else ''}://{HOST}:{args.port} (Magnetar's SDK and tools)",
        f"{'console':<10} {'https' if tls else 'http'}://{HOST}:{args.gateway_port}/console/",
    ]
    if args.token_secret_key:
        lines.append(
            f"{'auth':<10} tokens signed with {args.token_secret_key}; superusers {', '.join(superuser_roles(args))} "
            f"(a token: magnetar tokens create --subject ROLE --secret-key {args.token_secret_key})"
        )
    return lines


def _not_ready_message(exc: ChildNotReady) -> str:
    last = next((line for line in reversed(exc.tail.splitlines()) if line.strip()), "")
    hint = f' (last log line: "{last.strip()[:200]}")' if last else ""
    if exc.exited:
        return f"{exc.name} exited with code {exc.returncode} while starting; see {exc.log_path}{hint}"
    if exc.stalled:
        return (
            f"{exc.name} {exc.reason} while starting; see {exc.log_path}{hint}. It is stuck, not "
            "slow: fix what its log shows, or stop what holds it (a busy disk, a paused process) and retry"
        )
    return (
        f"{exc.name} {exc.reason} while starting although its log kept growing; see {exc.log_path}{hint}. "
        "The machine is too busy to start it: retry when it is less loaded"
    )


def _run(args: argparse.Namespace) -> None:
    if args.bookies < 1:
        raise _Failure("--bookies must be at least 1")
    if args.replicas is not None and not 1 <= args.replicas <= args.bookies:
        raise _Failure(f"--replicas must be between 1 and the number of bookies ({args.bookies})")
    if bool(args.tls_cert_file) != bool(args.tls_key_file):
        raise _Failure("--tls-cert-file and --tls-key-file go together")
    if args.token_secret_key:
        if not superuser_roles(args):
            raise _Failure("--superuser-roles names no role: the components need one to call each other")
        tokens.load_secret_key(args.token_secret_key)  # InvalidArgument: missing, unreadable or empty
    _check_ports(args)
    data_dir = Path(args.data_dir).absolute()
    tiers = _components(args, data_dir)
    started: list[Component] = []
    try:
        for tier in tiers:
            for component in tier:
                component.launch()
                started.append(component)
            for component in tier:
                component.wait_ready(READY_TIMEOUT_S, STALL_TIMEOUT_S)
        for component in started:
            print(f"{component.name:<10} {component.address}", flush=True)
        if args.zookeeper:
            print(f"{'zookeeper':<10} {args.zookeeper} (external)", flush=True)
        for line in _client_urls(args):
            print(line, flush=True)
        print(f"data and logs under {data_dir}", flush=True)
        print("Magnetar standalone is running; Ctrl-C to stop.", flush=True)
        while True:
            time.sleep(0.5)
            for component in started:
                if not component.alive:
                    raise _Failure(
                        f"{component.name} stopped unexpectedly (exit code "
                        f"{component.returncode}); see {component.log_path}"
                    )
    except ChildNotReady as exc:
        raise _Failure(_not_ready_message(exc)) from exc
    finally:
        # Stop in reverse order: bookies first (they unregister), ZooKeeper last.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        for component in reversed(started):
            component.stop(STOP_TIMEOUT_S)


def _request_stop(signum: int, frame: FrameType | None) -> None:
    raise _StopRequested()


def main(argv: Sequence[str] | None = None) -> int:
    """Run standalone mode until SIGINT/SIGTERM; 0 on a requested stop, 1 on failure."""
    args = build_parser().parse_args(argv)
    previous = {sig: signal.signal(sig, _request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        _run(args)
    except _StopRequested:
        print("Magnetar standalone stopped.", flush=True)
        return 0
    except (_Failure, MagnetarError) as exc:
        print(f"magnetar standalone: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
