"""Run the real ``magnetar`` command from tests, and parse the shell's outputs.

:func:`magnetar` starts the command as a child process. :class:`WarmMagnetar` runs many
commands at less cost: one interpreter imports the command's modules once, then forks a
child per command (its own process, exit code, stdout and stderr at the file-descriptor
level, its own interpreter shutdown), so a test of fifty commands does not pay fifty
interpreter start-ups and imports (about 0.3 CPU-s each); :func:`warm_magnetar` is
:func:`magnetar` through one such interpreter shared by the run.
"""

from __future__ import annotations

import atexit
import base64
import json
import locale
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, Any

MAGNETAR = str(Path(sys.executable).with_name("magnetar"))
WARM_IMPORTS = ("httpcore", "h11", "certifi", "anyio._backends._asyncio")
"""What httpx imports on a client's first use (the REST door's ``RestAdmin``): imported
by the warm interpreter too, else each child imports them again (0.15 CPU-s)."""


def magnetar(*args: str, timeout: float = 60.0, check: bool = False) -> subprocess.CompletedProcess[str]:
    """``magnetar ARGS…`` as a child process; returns its exit code, stdout and stderr."""
    return subprocess.run(
        [MAGNETAR, *args], capture_output=True, text=True, timeout=timeout, check=check
    )


class WarmMagnetar:
    """``magnetar`` commands forked from a warm interpreter, one at a time.

    Each :meth:`run` is what :func:`magnetar` does (a child process with the environment
    this object was started with, stdin empty, stdout and stderr captured), except that
    the child is a fork of an interpreter that already imported ``magnetar.tools.cli`` and the
    modules of ``commands``. Calls from several threads are served one after another: a
    test that wants two commands at once uses two of these.
    """

    def __init__(self, *commands: str) -> None:
        self.commands = commands or ("admin",)
        self._server: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def start(self) -> WarmMagnetar:
        # -P: the current directory is not put first on sys.path (the console script's
        # first entry is the virtualenv's bin folder, which holds no module either).
        self._server = subprocess.Popen(
            [sys.executable, "-P", "-m", "magnetar.testing.shell", *self.commands],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self._server.stdout is not None
        ready = self._server.stdout.readline()
        if ready.strip() != "ready":
            self.close()
            raise RuntimeError(f"the warm magnetar interpreter did not start: {ready!r}")
        return self

    def run(self, *args: str, timeout: float = 60.0, check: bool = False) -> subprocess.CompletedProcess[str]:
        """``magnetar ARGS…`` in a forked child; as :func:`magnetar`, it raises
        ``subprocess.TimeoutExpired`` (the child killed) or, with ``check``,
        ``subprocess.CalledProcessError``."""
        server = self._server
        assert server is not None and server.stdin is not None and server.stdout is not None, "not started"
        with self._lock:
            server.stdin.write(json.dumps({"argv": list(args), "timeout": timeout}) + "\n")
            server.stdin.flush()
            line = server.stdout.readline()
        if not line:
            raise RuntimeError(f"the warm magnetar interpreter exited ({server.poll()})")
        reply = json.loads(line)
        argv = [MAGNETAR, *args]
        stdout, stderr = (_text(base64.b64decode(reply[k])) for k in ("stdout", "stderr"))
        if reply["timed_out"]:
            raise subprocess.TimeoutExpired(argv, timeout, stdout, stderr)
        done = subprocess.CompletedProcess(argv, reply["returncode"], stdout, stderr)
        if check:
            done.check_returncode()
        return done

    def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        assert server.stdin is not None
        server.stdin.close()  # end of requests: it exits
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if server.stdout is not None:
            server.stdout.close()

    def __enter__(self) -> WarmMagnetar:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


_shared: WarmMagnetar | None = None
_shared_lock = threading.Lock()


def warm_magnetar(*args: str, timeout: float = 60.0, check: bool = False) -> subprocess.CompletedProcess[str]:
    """What :func:`magnetar` does, forked from one warm interpreter (``admin`` and
    ``shell`` imported) that the run starts on first use and stops at its exit. Commands
    are served one at a time: a test running two at once (one waits for the other)
    uses :func:`magnetar` or a :class:`WarmMagnetar` of its own."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared._server is None or _shared._server.poll() is not None:
            _shared = WarmMagnetar("admin", "shell").start()
            atexit.register(_shared.close)
        warm = _shared
    return warm.run(*args, timeout=timeout, check=check)


def _text(data: bytes) -> str:
    """Bytes as ``subprocess.run(text=True)`` decodes them (locale encoding, universal newlines)."""
    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


def _serve(commands: list[str]) -> None:
    """The warm interpreter: a JSON request per line on stdin, a JSON reply per line on
    stdout. A command's child gets /dev/null as fd 0 and files as fds 1 and 2, runs
    ``magnetar.tools.cli.main`` as the console script does and leaves by ``sys.exit`` (so
    the interpreter's own shutdown runs, as in a process of its own)."""
    import gc
    import importlib
    import select
    import signal
    import tempfile

    requests: IO[str] = os.fdopen(os.dup(0), "r")
    replies: IO[str] = os.fdopen(os.dup(1), "w")
    own_stderr = os.dup(2)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    # What importing prints (a warning, say) a command's own process would print first:
    # kept, and put before each command's output.
    preamble = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
    os.dup2(preamble[0].fileno(), 1)
    os.dup2(preamble[1].fileno(), 2)
    try:
        from magnetar.tools import cli

        for module in [cli.COMMANDS[c][0].partition(":")[0] for c in commands] + list(WARM_IMPORTS):
            importlib.import_module(module)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(null, 1)  # nothing of the server's own goes where a reply goes
        os.dup2(own_stderr, 2)
        os.close(null)
        os.close(own_stderr)
    before = []
    for f in preamble:
        f.seek(0)
        before.append(f.read())
        f.close()
    # What is imported stays out of every child's garbage collections (and their copies of
    # its pages): two thirds of a child's CPU time (120 to 40 ms a command, measured).
    gc.collect()
    gc.freeze()
    replies.write("ready\n")
    replies.flush()
    for line in requests:
        request: dict[str, Any] = json.loads(line)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # the command's process
                requests.close()
                replies.close()
                os.setpgid(0, 0)  # what it starts is killed with it on a timeout
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.argv = [MAGNETAR, *request["argv"]]
                sys.exit(cli.main())
            try:
                os.setpgid(pid, pid)  # as the child does: whichever runs first
            except OSError:
                pass
            pidfd = os.pidfd_open(pid)
            try:
                timed_out = not select.select([pidfd], [], [], request["timeout"])[0]
                if timed_out:
                    os.killpg(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
            finally:
                os.close(pidfd)
            captured = []
            for first, f in zip(before, (out, err), strict=True):
                f.seek(0)
                captured.append(base64.b64encode(first + f.read()).decode())
        replies.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status), "timed_out": timed_out,
                                  "stdout": captured[0], "stderr": captured[1]}) + "\n")  # fmt: skip
        replies.flush()


def parse_readledger(stdout: str) -> dict[int, tuple[int, str]]:
    """``E<TAB>length<TAB>first 20 bytes`` lines → {entry id: (length, head)}."""
    out: dict[int, tuple[int, str]] = {}
    for line in stdout.splitlines():
        entry, length, head = line.split("\t", 2)
        out[int(entry)] = (int(length), head)
    return out


if __name__ == "__main__":
    _serve(sys.argv[1:])


def cli_ok(result: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a command that succeeded (exit 0, nothing on stderr)."""
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout


def cli_fails(result: subprocess.CompletedProcess[str], command: str = "admin") -> str:
    """The one stderr line of a ``magnetar <command>`` that failed cleanly (exit 1, no
    traceback)."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"magnetar {command}: ")
    return lines[0]
