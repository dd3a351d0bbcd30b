"""Real service processes for tests (bookies, brokers, auditors): ``python -m magnetar.<service>``
on a fixed loopback port."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, Self, TypeVar

from magnetar.auditor.config import AuditorConfig
from magnetar.bookie.config import BookieConfig
from magnetar.broker.config import BrokerConfig
from magnetar.common.childproc import ChildProcess
from magnetar.common.config import ServiceConfig
from magnetar.common.errors import InvalidArgument
from magnetar.common.healthcheck import grpc_health_problem, http_ready
from magnetar.common.netutil import free_port
from magnetar.common.tls import ClientTls
from magnetar.gateway.config import GatewayConfig

ENV_PREFIX = "MAGNETAR_BOOKIE_"


def config_env(
    config: Mapping[str, Any], config_cls: type[ServiceConfig] = BookieConfig, prefix: str = ENV_PREFIX
) -> dict[str, str]:
    """Turn ``{"flush_interval_s": 0.1}`` into ``{"MAGNETAR_BOOKIE_FLUSH_INTERVAL_S": "0.1"}``.

    Raises:
        InvalidArgument: a key is not a field of ``config_cls``.
    """
    fields = config_cls.model_fields
    env = {}
    for key, value in config.items():
        if key not in fields:
            raise InvalidArgument(
                f"{key!r} is not a setting of {config_cls.__name__}; known: {', '.join(sorted(fields))}"
            )
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, list | tuple | dict):
            text = json.dumps(value)  # pydantic-settings reads complex values as JSON
        else:
            text = str(value)
        env[prefix + key.upper()] = text
    return env


def probe_tls(config: Mapping[str, Any]) -> ClientTls | None:
    """How to probe a process started with ``config``: with TLS when it serves TLS,
    trusting its ``tls_trust_certs_file`` and showing its own certificate (issued for
    client use too) when it requires client certificates."""
    if not config.get("tls_enabled"):
        return None
    if config.get("tls_require_client_cert"):
        return ClientTls(config.get("tls_trust_certs_file", ""), config["tls_cert_file"], config["tls_key_file"])
    return ClientTls(config.get("tls_trust_certs_file", ""))


_HANDED_OUT: deque[int] = deque(maxlen=1024)


def _new_port() -> int:
    """A free loopback port not given to another process of this run lately: two
    free_port() calls can return the same port when the first process has not bound it
    yet, as when several are made and then started at once (:func:`start_all`)."""
    while (port := free_port()) in _HANDED_OUT:
        pass
    _HANDED_OUT.append(port)
    return port


class ServiceProcess:
    """One Magnetar service as a child process (``python -m magnetar.<module>``) on a
    fixed loopback port kept across restarts, ready once its gRPC health check serves."""

    module = ""
    config_cls: type[ServiceConfig] = ServiceConfig
    env_prefix = ""
    uses_data_dir = True
    last_probe_problem: str | None = None
    """Why the last readiness probe failed (None: it passed, or none ran yet)."""

    def __init__(
        self,
        zk_connect: str,
        zk_root: str,
        data_dir: Path,
        *,
        port: int | None = None,
        log_path: Path | None = None,
        extra_args: Sequence[str] = (),
        config: Mapping[str, Any] | None = None,
        name: str | None = None,
        host: str = "127.0.0.1",
        command_prefix: Sequence[str] = (),
    ) -> None:
        """Describe the bookie; nothing runs until :meth:`start`.

        Args:
            zk_connect: ZooKeeper connect string.
            zk_root: metadata root.
            data_dir: the bookie's data directory.
            port: gRPC port (default: a free one, picked now).
            log_path: output file (default: ``<data_dir>/../<name>.log``).
            extra_args: more command-line arguments.
            config: more settings, passed as ``MAGNETAR_<SERVICE>_<KEY>`` variables.
            name: name in messages (default ``<module>-PORT``).
            host: the address it binds and is reached at (a chaos test gives each
                process an address in a network namespace of its own).
            command_prefix: run the command through this, e.g. ``["nsenter",
                "--net=/run/netns/X", "--"]`` (it must exec the command, not fork it,
                so signals reach the service itself).
        """
        self.host = host
        self.port = port or _new_port()
        self.metrics_port = int((config or {}).get("metrics_port") or 0)
        """Its Prometheus ``/metrics`` port (0: not served)."""
        self.data_dir = Path(data_dir)
        self.name = name or f"{self.module}-{self.port}"
        argv = [
            *command_prefix, sys.executable, "-m", f"magnetar.{self.module}",
            "--zookeeper", zk_connect, "--zk-root", zk_root,
            "--host", host, "--port", str(self.port),
            *(["--data-dir", str(self.data_dir)] if self.uses_data_dir else []),
            *extra_args,
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith(self.env_prefix)}
        env.update(config_env(config or {}, self.config_cls, self.env_prefix))
        env["PYTHONUNBUFFERED"] = "1"
        self.probe_tls = probe_tls(config or {})
        """How the readiness probe calls this process (a test may replace it before start)."""
        log = Path(log_path) if log_path else self.data_dir.parent / f"{self.name}.log"
        self.process = ChildProcess(self.name, argv, log, env=env)

    @property
    def address(self) -> str:
        """``HOST:PORT`` (``127.0.0.1:PORT`` by default), also the bookie id."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        """The bookie's output file (all runs appended)."""
        return self.process.log_path

    @property
    def alive(self) -> bool:
        """True while the process runs."""
        return self.process.alive

    def log_tail(self, lines: int = 80) -> str:
        """The last lines of the bookie's output."""
        return self.process.log_tail(lines)

    def is_serving(self) -> bool:
        """True when the gRPC health check answers SERVING (else why not is kept in
        ``last_probe_problem`` for the error of :meth:`wait_serving`)."""
        self.last_probe_problem = grpc_health_problem(self.address, timeout_s=1.0, tls=self.probe_tls)
        return self.last_probe_problem is None

    def start(self, timeout: float = 30.0) -> Self:
        """Start and wait until the health check answers SERVING.

        Raises:
            Timeout: (ChildNotReady) it exited or was not serving in time; with its log tail.
        """
        self.launch()
        return self.wait_serving(timeout)

    def launch(self) -> Self:
        """Start the process without waiting for it (:meth:`wait_serving` does): several
        launched one after the other start up at the same time (from any thread: see
        :class:`ChildProcess`)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.process.start()
        return self

    def wait_serving(self, timeout: float = 30.0) -> Self:
        """Wait until the launched process's health check answers SERVING.

        Raises:
            Timeout: (ChildNotReady) it exited or was not serving in time (it is killed
                then); with its log tail.
        """
        self.last_probe_problem = None
        try:
            self.process.wait_ready(self.is_serving, timeout)
        except BaseException as exc:
            self.process.kill()
            if self.last_probe_problem:  # what the test process saw, beside the log
                exc.add_note(f"last probe of {self.address}: {self.last_probe_problem}")
            raise
        return self

    def kill(self) -> None:
        """SIGKILL and wait (a crash: nothing is flushed or unregistered)."""
        self.process.kill(signal.SIGKILL)

    def stop(self, timeout: float = 15.0) -> int | None:
        """Graceful stop: SIGTERM, SIGKILL after ``timeout`` s; return the exit code."""
        return self.process.terminate(timeout)

    def restart(self, timeout: float = 30.0, *, hard: bool = False) -> Self:
        """Stop (SIGKILL when ``hard``, else SIGTERM) and start again on the same port."""
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start(timeout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.address}, pid={self.process.pid})"


class BookieProcess(ServiceProcess):
    """A bookie; its bookie id (``127.0.0.1:PORT``) stays the same across restarts."""

    module = "bookie"
    config_cls = BookieConfig
    env_prefix = ENV_PREFIX


class BrokerProcess(ServiceProcess):
    """A broker; its broker id (``127.0.0.1:PORT``) stays the same across restarts.

    Pulsar's protocol is on, on free ports of its own (not 6650 and 6651, which tests
    running at once would share) unless the settings give ``protocol_port`` or
    ``protocol_tls_port``; so is the SDK's framed session (``session_port``): :attr:`pulsar_url`, and with TLS :attr:`pulsar_tls_url`."""

    module = "broker"
    config_cls = BrokerConfig
    env_prefix = "MAGNETAR_BROKER_"
    uses_data_dir = False

    def __init__(self, zk_connect: str, zk_root: str, data_dir: Path, *, config: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:  # fmt: skip
        config = dict(config or {})
        config.setdefault("protocol_port", _new_port())
        config.setdefault("protocol_tls_port", _new_port())
        config.setdefault("session_port", _new_port())
        self.session_port: int = config["session_port"]
        self.protocol_port: int = config["protocol_port"]
        self.protocol_tls_port: int = config["protocol_tls_port"] if config.get("tls_enabled") else 0
        super().__init__(zk_connect, zk_root, data_dir, config=config, **kwargs)

    @property
    def pulsar_url(self) -> str:
        """``pulsar://127.0.0.1:PORT`` ("" when its protocol port is off)."""
        return f"pulsar://{self.host}:{self.protocol_port}" if self.protocol_port else ""

    @property
    def pulsar_tls_url(self) -> str:
        """``pulsar+ssl://127.0.0.1:PORT`` ("" without TLS)."""
        return f"pulsar+ssl://{self.host}:{self.protocol_tls_port}" if self.protocol_tls_port else ""


class AuditorProcess(ServiceProcess):
    """An auditor replica; its id (``127.0.0.1:PORT``) is what the election shows."""

    module = "auditor"
    config_cls = AuditorConfig
    env_prefix = "MAGNETAR_AUDITOR_"
    uses_data_dir = False


class GatewayProcess(ServiceProcess):
    """The gateway; ready once ``/readyz`` answers 200 (ZooKeeper up, a broker registered)."""

    module = "gateway"
    config_cls = GatewayConfig
    env_prefix = "MAGNETAR_GATEWAY_"
    uses_data_dir = False

    @property
    def url(self) -> str:
        return f"{'https' if self.probe_tls else 'http'}://{self.address}"

    def is_serving(self) -> bool:
        return http_ready(f"{self.url}/readyz", tls=self.probe_tls)


P = TypeVar("P", bound=ServiceProcess)


class ServiceFactory(Generic[P]):
    """Starts processes of one kind for one test; :meth:`kill_all` at the end."""

    def __init__(
        self,
        kind: type[P],
        zk_connect: str,
        zk_root: str,
        base_dir: Path,
        on_create: Callable[[P], None] | None = None,
    ) -> None:
        """Args: on_create: called with each new process (the pytest plugin tracks its log)."""
        self.kind = kind
        self.zk_connect = zk_connect
        self.zk_root = zk_root
        self.base_dir = Path(base_dir)
        self.processes: list[P] = []
        self._on_create = on_create

    def create(self, *, extra_args: Sequence[str] = (), **config: Any) -> P:
        """A new process (not started) with its own directory under ``base_dir``."""
        name = f"{self.kind.module}-{len(self.processes)}"
        process = self.kind(
            self.zk_connect, self.zk_root, self.base_dir / name, extra_args=extra_args, config=config, name=name
        )
        self.processes.append(process)
        if self._on_create is not None:
            self._on_create(process)
        return process

    def __call__(self, *, timeout: float = 30.0, **config: Any) -> P:
        """Start a new process with the given settings and wait until it serves."""
        return self.create(**config).start(timeout)

    def start_many(self, count: int, *, timeout: float = 30.0, **config: Any) -> list[P]:
        """Start ``count`` new processes with the same settings at once (their start-ups
        overlap) and wait until each serves. A test's cluster comes up in about the time
        of one start-up instead of ``count``."""
        return start_all([self.create(**config) for _ in range(count)], timeout)

    def kill_all(self) -> None:
        """SIGKILL every process this factory made."""
        for process in self.processes:
            process.kill()


def start_all(processes: Sequence[P], timeout: float = 30.0) -> list[P]:
    """Launch every process, then wait until each serves (``timeout`` for each wait).

    Raises:
        Timeout: (ChildNotReady) one exited or was not serving in time; every one of
            them is killed then.
    """
    # Probed from this thread: health probes from worker threads, next to a test's
    # grpc.aio channels on its event loop, left those channels refusing to connect.
    try:
        for process in processes:
            process.launch()
        for process in processes:
            process.wait_serving(timeout)
    except BaseException:
        for process in processes:
            process.kill()
        raise
    return list(processes)


BookieFactory = ServiceFactory[BookieProcess]
