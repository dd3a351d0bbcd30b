"""A real ZooKeeper server run as a child process (tests and ``magnetar standalone``).

It runs the Debian package's jar: ``java -cp /usr/share/java/zookeeper.jar:…
org.apache.zookeeper.server.ZooKeeperServerMain <data_dir>/zoo.cfg``; the jar's
manifest names its own dependencies (netty, jute, slf4j-api …), so the class path
only adds an slf4j binding.
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

from magnetar.common.childproc import ChildNotReady, ChildProcess
from magnetar.common.errors import MagnetarError
from magnetar.common.netutil import free_port

JAVA_DIR = Path("/usr/share/java")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
_BIND_RETRIES = 3
# A JVM that starts ZooKeeper on two busy cores took up to 70 s in measurements, logging
# all along; one that writes no log line for a minute is stuck, not slow.
READY_TIMEOUT_S = 300.0
STALL_TIMEOUT_S = 60.0
# slf4j-simple prints no time by default; with it a slow start shows where it was slow.
_LOG_TIMES = [
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS",
]


def default_classpath(java_dir: Path = JAVA_DIR) -> str:
    """The ZooKeeper jar plus the first slf4j binding found (simple, else nop).

    Raises:
        MagnetarError: ZooKeeper is not installed.
    """
    jar = java_dir / "zookeeper.jar"
    if not jar.exists():
        raise MagnetarError(
            f"ZooKeeper is not installed ({jar} is missing): run `make setup` "
            "or `apt-get install zookeeper`"
        )
    parts = [str(jar)]
    for binding in ("slf4j-simple.jar", "slf4j-nop.jar"):
        if (java_dir / binding).exists():
            parts.append(str(java_dir / binding))
            break
    return ":".join(parts)


def four_letter_word(host: str, port: int, command: str, timeout_s: float = 1.0) -> str:
    """Send a four-letter command ("ruok", "srvr", "mntr") and return the answer.

    Raises:
        OSError: the server could not be reached.
    """
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(command.encode())
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    """One standalone ZooKeeper server with a private data directory.

    The port (picked once when 0 is given) and the data directory are kept across
    :meth:`stop`/:meth:`start`, so a restarted server has the same address and data.
    """

    def __init__(
        self,
        data_dir: Path,
        port: int = 0,
        host: str = "127.0.0.1",
        force_sync: bool = True,
        log_path: Path | None = None,
        *,
        java: str | None = None,
        classpath: str | None = None,
        max_heap: str = "1g",
        tick_time_ms: int = 2000,
        own_process_group: bool = False,
    ) -> None:
        """Describe the server; nothing runs until :meth:`start`.

        Args:
            data_dir: snapshots, transaction logs and zoo.cfg go here.
            port: client port; 0 picks a free one.
            host: the address the server binds (clientPortAddress).
            force_sync: fsync the transaction log on every write (off in tests: faster).
            log_path: where the server's output goes (default: <data_dir>/zookeeper.log).
            java: the java binary (default: found on PATH).
            classpath: class path (default: :func:`default_classpath`).
            max_heap: the JVM's -Xmx. ZooKeeper keeps its last 500 transactions in
                memory whatever their size; cursor documents (up to 900 KB, a few hundred
                KB with many scattered acks) written every second outgrew 256 MB
                (OutOfMemoryError in bench/delayed.py), hence 1 GB.
            tick_time_ms: ZooKeeper's tick; session timeouts range from 2 to 300 ticks
                (tests use a short tick so a killed process's registration expires fast).
            own_process_group: see :class:`ChildProcess` (``magnetar standalone`` sets it).
        """
        self.data_dir = Path(data_dir).absolute()
        self.host = host
        self.force_sync = force_sync
        self._auto_port = port == 0
        self.port = port or free_port(host)
        self._log_path = Path(log_path) if log_path else self.data_dir / "zookeeper.log"
        self._java = java
        self._classpath = classpath
        self._max_heap = max_heap
        self._tick_time_ms = tick_time_ms
        self._own_process_group = own_process_group
        self._process: ChildProcess | None = None

    @property
    def connect_string(self) -> str:
        """``host:port`` for clients."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        """The server's log file."""
        return self._log_path

    @property
    def process(self) -> ChildProcess | None:
        """The child process, once started."""
        return self._process

    @property
    def alive(self) -> bool:
        """True while the server process runs."""
        return self._process is not None and self._process.alive

    @property
    def returncode(self) -> int | None:
        """Exit code once the server process ended, else None."""
        return self._process.returncode if self._process else None

    def log_tail(self, lines: int = 80) -> str:
        """The last lines of the server's log."""
        return self._process.log_tail(lines) if self._process else ""

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"dataDir={self.data_dir}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            "admin.enableServer=false",
            f"tickTime={self._tick_time_ms}",
            "maxSessionTimeout=600000",
            "4lw.commands.whitelist=ruok,srvr,mntr",
            "maxClientCnxns=0",
        ]
        if not self.force_sync:
            lines.append("forceSync=no")
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text("\n".join(lines) + "\n")
        return cfg

    def _argv(self, cfg: Path) -> list[str]:
        java = self._java or shutil.which("java")
        if not java:
            raise MagnetarError("java is not installed: run `make setup` or install a JRE")
        classpath = self._classpath or default_classpath()
        return [java, f"-Xmx{self._max_heap}", *_LOG_TIMES, "-cp", classpath, MAIN_CLASS, str(cfg)]

    def is_ready(self) -> bool:
        """True when the server answers ``ruok`` with ``imok`` and serves requests.

        ``ruok`` answers as soon as the port is open; ``srvr`` reports "not currently
        serving requests" until the database is loaded, so both are asked. On a busy
        machine an answer can take over a second (measured), hence the 2 s allowed.
        """
        try:
            if four_letter_word(self.host, self.port, "ruok", 2.0) != "imok":
                return False
            return "Mode:" in four_letter_word(self.host, self.port, "srvr", 2.0)
        except OSError:
            return False

    def launch(self) -> None:
        """Write zoo.cfg and start the process without waiting (see :meth:`wait_ready`).

        Raises:
            MagnetarError: java or ZooKeeper is not installed, or it is running already.
        """
        cfg = self._write_config()
        self._process = ChildProcess(
            "zookeeper", self._argv(cfg), self._log_path, own_process_group=self._own_process_group
        )
        self._process.start()

    def wait_ready(self, timeout: float = READY_TIMEOUT_S, stall_timeout: float | None = STALL_TIMEOUT_S) -> None:
        """Wait until the launched server answers ``ruok`` and serves requests.

        A slow start goes on while its log grows (see :meth:`ChildProcess.wait_ready`).

        Args:
            timeout: the longest wait in all, in seconds.
            stall_timeout: give up when the log has not grown for this many seconds.

        Raises:
            Timeout: (:class:`ChildNotReady`) it exited, stalled or did not answer in
                time; the message carries the end of its log.
        """
        if self._process is None:
            raise MagnetarError("ZooKeeper was not launched")
        self._process.wait_ready(self.is_ready, timeout, stall_timeout=stall_timeout)

    def start(self, timeout: float = READY_TIMEOUT_S, stall_timeout: float | None = STALL_TIMEOUT_S) -> None:
        """Start the server and wait until it answers ``ruok`` and serves requests.

        A port picked automatically that another process took meanwhile is replaced by
        a new free one.

        Args:
            timeout: the longest wait in all, in seconds.
            stall_timeout: give up when the log has not grown for this many seconds.

        Raises:
            Timeout: (:class:`ChildNotReady`) it exited, stalled or did not answer in
                time; the message carries the end of its log.
            MagnetarError: java or ZooKeeper is not installed.
        """
        for attempt in range(_BIND_RETRIES):
            self.launch()
            try:
                self.wait_ready(timeout, stall_timeout)
                return
            except ChildNotReady as exc:
                self.kill()
                lost_race = "Address already in use" in exc.tail
                if not (lost_race and self._auto_port and attempt + 1 < _BIND_RETRIES):
                    raise
                self.port = free_port(self.host)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
        if self._process is not None:
            self._process.terminate(timeout)

    def kill(self) -> None:
        """SIGKILL the server and wait for it to exit."""
        if self._process is not None:
            self._process.kill()

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ZooKeeperServer({self.connect_string}, data_dir={self.data_dir})"
