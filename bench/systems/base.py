"""What every system in ``make bench-compare`` implements, and the pieces they share.

The work is the same for every system (all clients are Python, asyncio, in the bench's
process; the server processes bound to 127.0.0.1 on free ports, data in a temporary
directory, started and stopped by PID):

* :meth:`System.throughput` — ``messages`` messages of ``size`` bytes. Produce phase: one
  producer sends them all; produce msgs/s is ``messages`` over first send to last
  acknowledgement. ``batched=True`` sends them the way that system's users send in bulk
  (Magnetar batching, Redis pipelined XADD, JetStream async publish, RabbitMQ
  publisher-confirm streams); ``batched=False`` sends one message per request with at most
  ``window`` unacknowledged. Consume phase, after the produce phase: one consumer reads
  the backlog from the start and acknowledges every message; consume msgs/s is
  ``messages`` over first to last receipt.
* :meth:`System.latency` — one message per request (no batching) paced at ``rate``
  msgs/s for ``warmup_s`` (not recorded) then ``seconds``, with one consumer attached the
  whole time. Each message carries its send time; ``publish`` is send → acknowledgement
  (receipt), ``end_to_end`` send → delivery to the consumer.

Shared pieces: :func:`in_flight` (at most ``window`` requests awaiting),
:class:`ConsumeClock` (consume msgs/s as defined above), :class:`ServerProcess` (a peer's
server: own process group, log file, killed with the bench, stopped by PID) and
:func:`ensure_debian_packages`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass
class Throughput:
    messages: int
    produce_msgs_s: float
    consume_msgs_s: float
    received: int

    def to_json(self) -> dict[str, float]:
        return asdict(self)


@dataclass
class Percentiles:
    count: int
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Percentiles:
        """Nearest-rank percentiles of ``seconds`` (in ms)."""
        lat = sorted(seconds)
        if not lat:
            return cls(0, math.nan, math.nan, math.nan, math.nan)

        def rank(q: float) -> float:
            return lat[max(0, math.ceil(q * len(lat)) - 1)] * 1000

        return cls(len(lat), rank(0.50), rank(0.99), rank(0.999), lat[-1] * 1000)


@dataclass
class Latency:
    rate: int
    sent: int
    publish: Percentiles
    end_to_end: Percentiles
    received: int = 0

    def to_json(self) -> dict[str, object]:
        return asdict(self)


class System(Protocol):
    name: str
    """As the table shows it, e.g. "Redis Streams"."""

    def describe(self) -> str:
        """Version and the settings that matter (fsync, replication), one line."""
        ...

    async def start(self, workdir: Path) -> None:
        """Install if missing, start the servers (data under ``workdir``), wait until ready."""
        ...

    async def stop(self) -> None:
        """Stop every process started, by PID (SIGTERM, then SIGKILL)."""
        ...

    async def throughput(self, *, size: int, messages: int, batched: bool, window: int) -> Throughput: ...

    async def latency(self, *, size: int, rate: int, seconds: float, warmup_s: float) -> Latency: ...


@dataclass
class PacedRun:
    """Send at ``rate`` msgs/s: ``send(i)`` returns an awaitable acknowledgement; the
    send → acknowledgement time of every message sent after ``warmup`` messages is
    recorded in ``publish``. The send time (``time.time_ns()``) goes in the payload's first
    8 bytes (:func:`stamp`), so a consumer can record end to end with :func:`age`."""

    rate: int
    total: int
    warmup: int
    publish: list[float] = field(default_factory=list)

    async def run(self, send: Callable[[int], Awaitable[object]]) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        pending: set[asyncio.Task[None]] = set()

        async def one(i: int, t0: float) -> None:
            await send(i)
            if i >= self.warmup:
                self.publish.append(time.perf_counter() - t0)

        for i in range(self.total):
            due = start + i / self.rate
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.ensure_future(one(i, time.perf_counter()))
            pending.add(task)
            task.add_done_callback(pending.discard)
        if pending:
            await asyncio.gather(*pending)


def stamp(size: int) -> bytes:
    """A payload of ``size`` bytes starting with the current time in ns."""
    return time.time_ns().to_bytes(8, "big") + b"x" * (size - 8)


def age(payload: bytes) -> float:
    """Seconds since :func:`stamp` made ``payload``."""
    return (time.time_ns() - int.from_bytes(payload[:8], "big")) / 1e9


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_debian_packages(packages: Sequence[str], binary: str) -> str:
    """The path of ``binary``; installs ``packages`` with apt-get when it is missing.

    Debian's postinst scripts start the packaged services (redis-server, rabbitmq-server,
    epmd): a ``policy-rc.d`` that answers 101 forbids that for the length of the install (an
    existing one is put back afterwards), and any daemon of :data:`PACKAGED_DAEMONS` that
    appeared during the install all the same is killed, so no system service is left behind
    holding a well-known port.

    Raises:
        RuntimeError: apt-get failed (its last line is in the message).
    """
    found = _find(binary)
    if found:
        return found
    print(f">> installing {' '.join(packages)} (Debian packages) for {binary}", flush=True)
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    before = set(_pids())
    install = "apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends " + " ".join(packages)
    script = (
        "p=/usr/sbin/policy-rc.d; b=$p.bench-compare.$$; [ -e $p ] && mv $p $b; "
        "restore() { trap - EXIT; rm -f $p; if [ -e $b ]; then mv $b $p; fi; }; "
        "trap restore EXIT; trap 'exit 130' INT TERM; "
        "printf '#!/bin/sh\\nexit 101\\n' > $p && chmod +x $p && "
        f"({install} || (apt-get update -q -o DPkg::Lock::Timeout=600 && {install})); exit $?"
    )
    proc = subprocess.run([*sudo, "sh", "-c", script], env=env, capture_output=True, text=True)
    for pid, name in _pids().items():
        if pid not in before and name in PACKAGED_DAEMONS and _is_orphan(pid):
            print(f">> the install started {name} (pid {pid}) all the same: killing it", flush=True)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
        raise RuntimeError(f"apt-get install {' '.join(packages)} failed: {last[0]}")
    found = _find(binary)
    if found is None:
        raise RuntimeError(f"{' '.join(packages)} installed, yet there is no {binary}")
    return found


PACKAGED_DAEMONS = frozenset({"redis-server", "nats-server", "beam.smp", "epmd", "rabbitmq-server"})
"""Process names (``/proc/PID/comm``) of the services the peers' packages bring."""


def _pids() -> dict[int, str]:
    pids: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                pids[int(entry.name)] = (entry / "comm").read_text().strip()
    return pids


def _is_orphan(pid: int) -> bool:
    """A daemon started by an init script was re-parented to PID 1 (not one of ours)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[1] == "1"


def _find(binary: str) -> str | None:
    return shutil.which(binary) or next(
        (p for p in (f"/usr/sbin/{binary}", f"/usr/lib/rabbitmq/bin/{binary}") if os.access(p, os.X_OK)), None
    )


def wait_port(port: int, timeout_s: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Wait until 127.0.0.1:``port`` accepts connections.

    Raises:
        RuntimeError: ``proc`` exited first, or ``timeout_s`` passed.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode} before listening on {port}")
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listened on 127.0.0.1:{port} within {timeout_s:.0f} s")


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM, wait ``grace_s``, then SIGKILL."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class ServerProcess:
    """One peer server process: started in a process group of its own (a Ctrl-C in the
    terminal reaches only the bench, which then stops it), its output in ``log``, and
    SIGKILLed by the kernel should the bench die without stopping it (util-linux
    ``setpriv --pdeathsig``: the signal fires when the starting *thread* exits, so start it
    from the main thread, not an executor)."""

    def __init__(self, name: str, argv: Sequence[str], log: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:  # fmt: skip
        self.name = name
        self.argv = list(argv)
        self.log = log
        self.env = env
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> ServerProcess:
        setpriv = shutil.which("setpriv")
        prefix = [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([*prefix, *self.argv], stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd,
                                         start_new_session=True)  # fmt: skip
        return self

    def wait_port(self, port: int, timeout_s: float) -> None:
        """:func:`wait_port`, with the end of the server's log in the error."""
        try:
            wait_port(port, timeout_s, self.proc)
        except RuntimeError as exc:
            raise RuntimeError(f"{self.name}: {exc}; the end of {self.log}:\n{self.log_tail()}") from None

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM, ``grace_s``, SIGKILL, by PID; then SIGKILL whatever the server left in
        its process group (helpers such as Erlang's ``erl_child_setup``)."""
        if self.proc is None:
            return
        stop_process(self.proc, grace_s)
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)


async def in_flight(count: int, window: int, send: Callable[[], Awaitable[object]]) -> None:
    """Await ``send()`` ``count`` times with at most ``window`` awaiting at once: ``window``
    workers, each sending its next message as soon as its last one is acknowledged. The
    first failure cancels the rest and is raised."""
    remaining = count

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await send()

    async with asyncio.TaskGroup() as group:
        for _ in range(min(window, count)):
            group.create_task(worker())


@dataclass
class ConsumeClock:
    """First to last receipt, the way :class:`Throughput` counts consume msgs/s: the clock
    starts when the first message is in hand and stops after the last acknowledgement."""

    received: int = 0
    first: float = 0.0
    last: float = 0.0

    def got(self, n: int = 1) -> None:
        if self.received == 0:
            self.first = time.perf_counter()
        self.received += n

    def done(self) -> None:
        self.last = time.perf_counter()

    def rate(self) -> float:
        return max(self.received - 1, 0) / max(self.last - self.first, 1e-9)
