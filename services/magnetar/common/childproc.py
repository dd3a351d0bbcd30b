"""A child process with its output in a log file, a readiness wait and a clean stop.

Used by tests (real ZooKeeper, bookies, brokers) and by ``magnetar standalone``. On
Linux every child asks the kernel to SIGKILL it when its parent dies
(``PR_SET_PDEATHSIG``, set by util-linux `setpriv`), so a test run killed with -9
leaves no orphans behind.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar, TypeVar, cast

from magnetar.common.errors import MagnetarError, Timeout


def _cmdline(words: Sequence[str]) -> bytes:
    """``words`` as /proc/PID/cmdline shows them."""
    return b"".join(os.fsencode(w) + b"\0" for w in words)


def _wait_past_setpriv(proc: subprocess.Popen[bytes], argv: Sequence[str], launched: Sequence[str],
                       timeout_s: float = 2.0) -> None:
    """Return once the child runs ``argv`` itself: setpriv sets the death signal before it
    execs the program, so from then on the child cannot outlive this process. (Right after
    the fork the child still shows this process's command line, then setpriv's, which is
    ``launched``; then the program's: ``argv``, or for a script ``INTERPRETER SCRIPT ARGS``.)"""
    if not sys.platform.startswith("linux") or list(launched) == list(argv):
        return
    want, setpriv = _cmdline(argv), _cmdline(launched)
    try:
        own = Path("/proc/self/cmdline").read_bytes()
    except OSError:
        own = b""
    deadline = time.monotonic() + timeout_s
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            seen = cmdline.read_bytes()
        except OSError:
            return
        # Empty while the kernel swaps the program in (execve): not past setpriv yet.
        if seen == want or (seen and seen not in (own, setpriv)):
            return
        time.sleep(0.001)


class ChildNotReady(Timeout):
    """A child process did not become ready in time, or exited while starting."""

    code: ClassVar[str] = "CHILD_NOT_READY"

    def __init__(self, name: str, reason: str, returncode: int | None, log_path: Path, tail: str,
                 *, stalled: bool = False):
        exited = f"; it exited with code {returncode}" if returncode is not None else ""
        super().__init__(
            f"{name} {reason}{exited}. Its log is {log_path}; last lines:\n{tail}".rstrip()
        )
        self.name = name
        self.reason = reason
        self.exited = returncode is not None
        self.stalled = stalled
        self.returncode = returncode
        self.log_path = log_path
        self.tail = tail


def _with_death_signal(argv: list[str]) -> list[str]:
    """Prefix ``argv`` so the child is SIGKILLed when its parent dies (Linux).

    util-linux's ``setpriv --pdeathsig`` sets the signal and execs the program. No Python
    runs in the forked child (a ``preexec_fn`` would, and forking a process that has gRPC
    or other threads running and then running Python code before exec can deadlock or
    abort the child).
    """
    setpriv = shutil.which("setpriv")
    if not sys.platform.startswith("linux") or setpriv is None:
        return argv
    return [setpriv, "--pdeathsig", "KILL", "--", *argv]


_T = TypeVar("_T")


class _Spawner:
    """One thread for the whole process that forks every child.

    The kernel's parent-death signal fires when the *thread* that forked the child exits,
    not the process: a child started from a short-lived thread (an executor's worker,
    ``asyncio.to_thread``) was SIGKILLed when that thread ended, e.g. a test's broker
    restarted in a thread died with the test's event loop. This thread lives as long as
    the process, so a child dies with its parent process only, whichever thread asked."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: queue.SimpleQueue[tuple[Callable[[], object], queue.SimpleQueue[tuple[bool, object]]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def run(self, fn: Callable[[], _T]) -> _T:
        """``fn()`` on the spawner thread; its result, or its exception raised here."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._main, name="childproc-spawner", daemon=True)
                self._thread.start()
        answer: queue.SimpleQueue[tuple[bool, object]] = queue.SimpleQueue()
        self._requests.put((fn, answer))
        ok, value = answer.get()
        if not ok:
            assert isinstance(value, BaseException)
            raise value
        return cast(_T, value)

    def _main(self) -> None:
        while True:
            fn, answer = self._requests.get()
            try:
                answer.put((True, fn()))
            except BaseException as exc:  # handed to the caller, raised there
                answer.put((False, exc))


_SPAWNER = _Spawner()


class ChildProcess:
    """One external process, its stdout and stderr appended to ``log_path``.

    Children are forked by one long-lived thread (:class:`_Spawner`), so :meth:`start`
    may be called from any thread: the child's parent-death signal fires when this
    process ends, not when the calling thread does.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        *,
        own_process_group: bool = False,
    ) -> None:
        """Describe the process; nothing runs until :meth:`start`.

        Args:
            name: short name used in messages ("zookeeper", "bookie-0").
            argv: program and arguments.
            log_path: file the child's stdout and stderr are appended to.
            env: full environment of the child (default: this process's).
            cwd: working directory of the child.
            own_process_group: put the child in a process group of its own so a Ctrl-C
                in a terminal reaches only the parent, which then stops children in order.
        """
        self.name = name
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.own_process_group = own_process_group
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """Process id of the current (or last) run."""
        return self._proc.pid if self._proc else None

    @property
    def returncode(self) -> int | None:
        """Exit code once the process ended (negative: killed by that signal), else None."""
        return self._proc.poll() if self._proc else None

    @property
    def alive(self) -> bool:
        """True while the process runs."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the process (again, after it ended).

        Raises:
            MagnetarError: it is already running, or the program cannot be executed.
        """
        if self.alive:
            raise MagnetarError(f"{self.name} is already running (pid {self.pid})")
        if shutil.which(self.argv[0]) is None:  # setpriv would only fail after the fork
            raise MagnetarError(f"cannot start {self.name} ({self.argv[0]}): no such executable program")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
            log.write(f"=== {stamp} starting {self.name}: {' '.join(self.argv)}\n".encode())
            log.flush()
            launched = _with_death_signal(self.argv)

            def spawn() -> subprocess.Popen[bytes]:
                return subprocess.Popen(
                    launched,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    cwd=self.cwd,
                    process_group=0 if self.own_process_group else None,
                )

            try:
                self._proc = proc = _SPAWNER.run(spawn)
            except OSError as exc:
                raise MagnetarError(f"cannot start {self.name} ({self.argv[0]}): {exc}") from exc
        _wait_past_setpriv(proc, self.argv, launched)

    def log_size(self) -> int:
        """Bytes in the log so far (0 if there is none yet)."""
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def wait_ready(
        self,
        check: Callable[[], bool],
        timeout: float,
        interval: float = 0.1,
        *,
        stall_timeout: float | None = None,
    ) -> None:
        """Poll ``check`` until it returns True.

        A start on a loaded machine can be slow but still moving (a JVM on two busy
        cores took over 60 s to start ZooKeeper); ``stall_timeout`` tells such a start
        apart from a stuck one by the log: the wait ends early only when the log has not
        grown for that long, and otherwise lasts up to ``timeout``.

        Args:
            check: True once the process is ready.
            timeout: the longest wait in all, in seconds.
            interval: seconds between checks.
            stall_timeout: also give up when the log has not grown for this many
                seconds (None: only ``timeout`` applies).

        Raises:
            ChildNotReady: (a :class:`Timeout`) the process exited, its log stood still
                for ``stall_timeout`` seconds (``stalled``), or ``check`` did not pass
                within ``timeout`` seconds; the message carries the log tail.
        """
        started = time.monotonic()
        deadline = started + timeout
        size, progressed = self.log_size(), started
        while True:
            if not self.alive:
                raise self._not_ready("exited before it was ready")
            if check():
                return
            now = time.monotonic()
            if stall_timeout is not None:
                grown = self.log_size()
                if grown != size:
                    size, progressed = grown, now
                elif now - progressed >= stall_timeout:
                    raise self._not_ready(
                        f"made no progress for {stall_timeout:g} s (its log did not grow)", stalled=True
                    )
            if now >= deadline:
                raise self._not_ready(f"was not ready within {timeout:g} s")
            time.sleep(interval)

    def _not_ready(self, reason: str, *, stalled: bool = False) -> ChildNotReady:
        return ChildNotReady(self.name, reason, self.returncode, self.log_path, self.log_tail(), stalled=stalled)

    def kill(self, sig: int = signal.SIGKILL, wait: bool | None = None) -> None:
        """Send ``sig`` (default SIGKILL); a no-op when the process is not running.

        Args:
            sig: the signal; SIGSTOP/SIGCONT pause and resume.
            wait: wait for the exit (default: only for SIGKILL).
        """
        if not self.alive or self._proc is None:
            return
        try:
            self._proc.send_signal(sig)
        except ProcessLookupError:
            pass
        if wait if wait is not None else sig == signal.SIGKILL:
            self._proc.wait()

    def terminate(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL; return the exit code."""
        if self._proc is None:
            return None
        if self.alive:
            self.kill(signal.SIGTERM, wait=False)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill(signal.SIGKILL)
        return self._proc.wait()

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the process to exit and return its exit code.

        Raises:
            Timeout: still running after ``timeout`` seconds.
            MagnetarError: it was never started.
        """
        if self._proc is None:
            raise MagnetarError(f"{self.name} was never started")
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            raise Timeout(f"{self.name} still runs after {timeout:g} s") from exc

    def log_tail(self, lines: int = 80) -> str:
        """The last ``lines`` lines of the log ('' if there is none yet)."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - 256 * 1024))
                data = fh.read()
        except FileNotFoundError:
            return ""
        return "\n".join(data.decode(errors="replace").splitlines()[-lines:])

    def __repr__(self) -> str:
        return f"ChildProcess({self.name!r}, pid={self.pid}, returncode={self.returncode})"
