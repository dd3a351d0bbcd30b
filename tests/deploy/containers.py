"""Real containers for the deployment tests: podman (with the project's containers.conf),
the images built by deploy/docker/build-images.sh, and docker-compose.yml brought up with
podman-compose under a project name of the test's own.

Nothing here pulls from a registry: the base image is made from Debian packages
(``build-images.sh base``, debootstrap) when it is missing.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "deploy" / "docker" / "build-images.sh"
COMPOSE_FILE = REPO / "docker-compose.yml"
CONTAINERS_CONF = REPO / "deploy" / "podman" / "containers.conf"
VENV_BIN = Path(sys.executable).parent


def engine_env() -> dict[str, str]:
    """This process's environment with podman's settings: the project's containers.conf
    unless the caller named another."""
    env = dict(os.environ)
    env.setdefault("CONTAINERS_CONF", str(CONTAINERS_CONF))
    return env


def tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run(argv: Sequence[str], *, timeout: float, check: bool = True, env: dict[str, str] | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command, output captured; a failure (when ``check``) is an AssertionError
    carrying the command and the end of its output."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              env=env or engine_env(), cwd=cwd or REPO)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        raise AssertionError(f"{' '.join(argv)} did not finish within {timeout:g} s:\n{tail(out)}") from None
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {proc.returncode}:\n{tail(proc.stdout + proc.stderr)}")
    return proc


def unusable_reason() -> str | None:
    """Why containers cannot run here (None: podman and podman-compose work)."""
    podman = shutil.which("podman")
    if podman is None:
        return "podman is not installed (make setup installs it from Debian packages)"
    if compose_command() is None:
        return "podman-compose is not installed (requirements.lock; make setup)"
    try:
        proc = subprocess.run([podman, "info", "--format", "{{.Host.OCIRuntime.Name}}"], capture_output=True,
                              text=True, timeout=60, env=engine_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"podman info failed: {exc}"
    if proc.returncode != 0:
        return f"podman does not work here: {tail(proc.stderr, 3)}"
    return None


def compose_command() -> list[str] | None:
    """podman-compose from the virtualenv (requirements.lock), else from PATH."""
    for candidate in (VENV_BIN / "podman-compose", shutil.which("podman-compose")):
        if candidate and Path(candidate).exists():
            return [str(candidate)]
    return None


def image_exists(name: str) -> bool:
    return subprocess.run(["podman", "image", "exists", name], env=engine_env(), timeout=60).returncode == 0


@dataclass
class Timings:
    """Wall-clock seconds of each phase, in order, printed as one table at the end."""

    phases: list[tuple[str, float]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - start)

    def add(self, name: str, seconds: float) -> None:
        with self.lock:
            self.phases.append((name, seconds))

    def table(self) -> str:
        rows = [f"  {name:<58} {seconds:7.1f} s" for name, seconds in self.phases]
        rows.append(f"  {'whole module (wall clock)':<58} {time.monotonic() - self.started:7.1f} s")
        return "\n".join(["timings (tests/deploy/test_compose.py):", *rows])


class Build:
    """One ``build-images.sh`` run in the background, its output in a log file.

    The build runs in a process group of its own, and only the watcher thread writes the
    log (it opens and closes it): :meth:`stop` ends the whole group (``podman build`` and
    its children hold the output pipe too), so after it no thread is left writing to a
    closed file and charging its error to whichever test runs next.
    """

    def __init__(self, what: str, env: dict[str, str], log: Path, timings: Timings, label: str,
                 *, argv: Sequence[str] | None = None) -> None:  # fmt: skip
        self.label = label
        self.log = log
        self.timings = timings
        self.started = time.monotonic()
        self.proc = subprocess.Popen(list(argv or ["bash", str(BUILD_SCRIPT), what]), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env={**engine_env(), **env}, cwd=REPO, text=True,
                                     errors="replace", start_new_session=True)  # fmt: skip
        self._watcher = threading.Thread(target=self._watch, name=f"build {what}", daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        """Copy the output to the log, each line with the seconds since the start; record the
        build's own duration when it ends (not when someone waits for it)."""
        assert self.proc.stdout is not None
        with self.proc.stdout, open(self.log, "w") as fh:
            for line in self.proc.stdout:
                fh.write(f"[{time.monotonic() - self.started:6.1f}s] {line}")
                fh.flush()
        self.proc.wait()
        self.timings.add(self.label, time.monotonic() - self.started)

    def _end_group(self) -> None:
        """SIGTERM the build's process group, SIGKILL what is left after 30 s."""
        for sig, grace in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                continue
            self._watcher.join(timeout=grace)
            if not self._watcher.is_alive():
                return

    def wait(self, timeout: float) -> None:
        """Raises AssertionError (with the log's end) when the build failed or took too long."""
        try:
            code = self.proc.wait(timeout=max(1.0, timeout - (time.monotonic() - self.started)))
        except subprocess.TimeoutExpired:
            self._end_group()
            code = None
        self._watcher.join(timeout=30)
        if self._watcher.is_alive():  # the script ended, a child of it still holds the pipe
            self._end_group()
        if code != 0:
            state = f"took longer than {timeout:g} s" if code is None else f"failed (exit {code})"
            raise AssertionError(f"{self.label} {state}:\n{tail(self.log.read_text(errors='replace'))}")

    def stop(self) -> None:
        """End the build and everything it started, when still running (a test that failed
        before needing it); returns once the watcher thread is gone."""
        if self.proc.poll() is None or self._watcher.is_alive():
            self._end_group()
        self._watcher.join(timeout=10)

    @property
    def running(self) -> bool:
        """The build or its output copy is still going."""
        return self.proc.poll() is None or self._watcher.is_alive()


class ComposeProject:
    """docker-compose.yml under a project name of its own, with an .env of the test's."""

    def __init__(self, name: str, env_file: Path) -> None:
        command = compose_command()
        assert command is not None, "podman-compose is missing"
        self.name = name
        self.env_file = env_file
        self.base = [*command, "--in-pod", "false", "-p", name, "-f", str(COMPOSE_FILE), "--env-file", str(env_file)]

    def compose(self, *args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run([*self.base, *args], timeout=timeout, check=check, cwd=self.env_file.parent)

    def up(self, *services: str) -> None:
        self.compose("up", "-d", *services)

    def containers(self) -> dict[str, str]:
        """Service name -> container name, for every container of the project."""
        out = run(["podman", "ps", "-a", "--filter", f"label=io.podman.compose.project={self.name}",
                   "--format", '{{.Names}} {{index .Labels "com.docker.compose.service"}}'], timeout=60).stdout
        return {service: name for name, service in (line.split() for line in out.splitlines() if line.strip())}

    def container(self, service: str) -> str:
        containers = self.containers()
        assert service in containers, f"no container for service {service} (have {sorted(containers)})"
        return containers[service]

    def state(self, service: str) -> str:
        return run(["podman", "inspect", "--format", "{{.State.Status}}", self.container(service)], timeout=60).stdout.strip()

    def logs(self, service: str, lines: int = 60) -> str:
        proc = run(["podman", "logs", "--tail", str(lines), self.container(service)], timeout=60, check=False)
        return proc.stdout + proc.stderr

    def wait_healthy(self, services: Sequence[str], timeout: float) -> None:
        """Run each service's compose healthcheck (``podman healthcheck run``: podman 4 runs
        them from systemd timers, absent in containers and CI machines) until all pass.

        Raises:
            AssertionError: a container stopped, or one was not healthy in time (its logs).
        """
        pending = set(services)
        deadline = time.monotonic() + timeout
        while pending:
            for service in sorted(pending):
                container = self.container(service)
                state = self.state(service)
                if state not in ("running", "created", "configured"):
                    raise AssertionError(f"{service} is {state}:\n{self.logs(service)}")
                if run(["podman", "healthcheck", "run", container], timeout=60, check=False).returncode == 0:
                    pending.discard(service)
            if pending and time.monotonic() > deadline:
                details = "\n".join(f"--- {s} ---\n{self.logs(s, 30)}" for s in sorted(pending))
                raise AssertionError(f"not healthy within {timeout:g} s: {sorted(pending)}\n{details}")
            if pending:
                time.sleep(1.0)

    def kill(self, service: str) -> None:
        run(["podman", "kill", self.container(service)], timeout=60)

    def dump_logs(self, lines: int = 40) -> str:
        return "\n".join(f"--- {service} ---\n{self.logs(service, lines)}" for service in sorted(self.containers()))

    def down(self) -> list[str]:
        """Remove the project's containers (with their anonymous volumes), named volumes and
        network, also when compose itself fails; returns what could not be removed."""
        label = f"label=io.podman.compose.project={self.name}"
        ids = run(["podman", "ps", "-aq", "--filter", label], timeout=60, check=False).stdout.split()
        # Every volume the containers mount: the project's named ones and the anonymous
        # ones of image VOLUMEs (ZooKeeper's /logs), which compose down leaves behind.
        volumes: set[str] = set()
        if ids:
            mounts = run(["podman", "inspect", "--format",
                          '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}', *ids],
                         timeout=60, check=False).stdout
            volumes.update(mounts.split())
            run(["podman", "rm", "-f", "-v", "-t", "5", *ids], timeout=120, check=False)
        self.compose("down", "-v", "-t", "5", timeout=120, check=False)
        volumes.update(run(["podman", "volume", "ls", "-q", "--filter", label], timeout=60, check=False).stdout.split())
        existing = set(run(["podman", "volume", "ls", "-q"], timeout=60, check=False).stdout.split())
        if volumes & existing:
            run(["podman", "volume", "rm", "-f", *sorted(volumes & existing)], timeout=60, check=False)
        networks = run(["podman", "network", "ls", "-q", "--filter", label], timeout=60, check=False).stdout.split()
        if networks:
            run(["podman", "network", "rm", "-f", *networks], timeout=60, check=False)
        left = run(["podman", "ps", "-aq", "--filter", label], timeout=60, check=False).stdout.split()
        left += sorted(volumes & set(run(["podman", "volume", "ls", "-q"], timeout=60, check=False).stdout.split()))
        left += run(["podman", "network", "ls", "-q", "--filter", label], timeout=60, check=False).stdout.split()
        return left
