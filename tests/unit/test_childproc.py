"""ChildProcess: readiness, exit reporting, kill/terminate, log tail, parent-death signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from magnetar.common.childproc import (
    ChildNotReady,
    ChildProcess,
    _cmdline,
    _wait_past_setpriv,
    _with_death_signal,
)
from magnetar.common.errors import MagnetarError, Timeout


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def test_start_ready_and_kill(tmp_path: Path) -> None:
    code = "print('RE' + 'ADY', flush=True); import time; time.sleep(60)"
    child = ChildProcess("sleeper", python(code), tmp_path / "out.log")
    child.start()
    child.wait_ready(lambda: "READY" in child.log_tail(), timeout=10)
    assert child.alive and child.returncode is None
    with pytest.raises(MagnetarError, match="already running"):
        child.start()
    child.kill()
    assert not child.alive
    assert child.returncode == -signal.SIGKILL


def test_wait_ready_reports_exit_code_and_log(tmp_path: Path) -> None:
    child = ChildProcess(
        "crasher", python("import sys; print('disk on fire'); sys.exit(3)"), tmp_path / "c.log"
    )
    child.start()
    with pytest.raises(ChildNotReady) as info:
        child.wait_ready(lambda: False, timeout=10)
    err = info.value
    assert isinstance(err, Timeout)
    assert err.exited and err.returncode == 3
    assert "disk on fire" in err.tail and "disk on fire" in str(err)
    assert "exited with code 3" in str(err)


def test_wait_ready_times_out_while_running(tmp_path: Path) -> None:
    child = ChildProcess("slow", python("import time; time.sleep(60)"), tmp_path / "s.log")
    child.start()
    try:
        with pytest.raises(ChildNotReady) as info:
            child.wait_ready(lambda: False, timeout=0.3)
        assert not info.value.exited and info.value.returncode is None
        assert "not ready within 0.3 s" in str(info.value)
    finally:
        child.kill()


def test_terminate_escalates_to_sigkill(tmp_path: Path) -> None:
    code = """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print('IGN' + 'ORING', flush=True)
        time.sleep(60)
    """
    child = ChildProcess("stubborn", python(code), tmp_path / "t.log")
    child.start()
    child.wait_ready(lambda: "IGNORING" in child.log_tail(), timeout=10)
    started = time.monotonic()
    assert child.terminate(timeout=0.5) == -signal.SIGKILL
    assert time.monotonic() - started < 5


def test_terminate_graceful(tmp_path: Path) -> None:
    child = ChildProcess("polite", python("import time; time.sleep(60)"), tmp_path / "p.log")
    child.start()
    assert child.terminate(timeout=10) == -signal.SIGTERM


def test_log_appends_across_restarts_and_tail_limits_lines(tmp_path: Path) -> None:
    child = ChildProcess(
        "counter", python("for i in range(200): print(f'line {i}')"), tmp_path / "n.log"
    )
    for _ in range(2):
        child.start()
        assert child.wait(timeout=10) == 0
    text = (tmp_path / "n.log").read_text()
    assert text.count("starting counter") == 2
    tail = child.log_tail(5).splitlines()
    assert tail == [f"line {i}" for i in range(195, 200)]
    assert ChildProcess("none", ["true"], tmp_path / "missing.log").log_tail() == ""


def test_wait(tmp_path: Path) -> None:
    child = ChildProcess("sleeper", python("import time; time.sleep(60)"), tmp_path / "w.log")
    with pytest.raises(MagnetarError, match="never started"):
        child.wait()
    child.start()
    with pytest.raises(Timeout, match="still runs"):
        child.wait(0.1)
    child.kill()
    assert child.wait() == -signal.SIGKILL


def test_missing_program_is_a_clear_error(tmp_path: Path) -> None:
    child = ChildProcess("ghost", ["/nonexistent/prog"], tmp_path / "g.log")
    with pytest.raises(MagnetarError, match="cannot start ghost"):
        child.start()


def _running(pid: int) -> bool:
    """Alive and not a zombie: an orphan killed by the death signal is reaped by PID 1,
    and a PID 1 that is no real init (a container's) may leave it a zombie for a while."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_child_dies_with_its_parent(tmp_path: Path) -> None:
    # An intermediate process starts a grandchild through ChildProcess, then is killed
    # with SIGKILL (no cleanup runs): the kernel must take the grandchild down too.
    log = str(tmp_path / "gc.log")
    code = f"""
        import sys, time
        from pathlib import Path
        from magnetar.common.childproc import ChildProcess
        c = ChildProcess("grandchild", [sys.executable, "-c", "import time; time.sleep(60)"],
                         Path({log!r}))
        c.start()
        print(c.pid, flush=True)
        time.sleep(60)
    """
    with subprocess.Popen(python(code), stdout=subprocess.PIPE, text=True) as parent:
        try:
            assert parent.stdout is not None
            grandchild = int(parent.stdout.readline())
            os.kill(grandchild, 0)  # alive
        finally:
            parent.kill()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not _running(grandchild):
            return
        time.sleep(0.05)
    os.kill(grandchild, signal.SIGKILL)
    pytest.fail("the grandchild outlived its parent")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="setpriv and /proc are Linux only")
def test_start_returns_once_a_script_runs(tmp_path: Path) -> None:
    # A script's command line is its interpreter's (INTERPRETER SCRIPT ARGS), never its
    # argv: start() waited out its whole bound for every such command (2 s a container in
    # tests/deploy/test_chart_run.py). Here a bound of 30 s must not be waited out.
    script = tmp_path / "sleeper"
    script.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    script.chmod(0o755)
    argv = [str(script), "an argument"]
    launched = _with_death_signal(argv)
    if launched == argv:
        pytest.skip("no setpriv here")
    with subprocess.Popen(launched) as proc:
        try:
            started = time.monotonic()
            _wait_past_setpriv(proc, argv, launched, timeout_s=30)
            assert time.monotonic() - started < 15
            assert Path(f"/proc/{proc.pid}/cmdline").read_bytes().endswith(_cmdline(argv))
        finally:
            proc.kill()


def test_a_child_started_from_a_short_lived_thread_outlives_that_thread(tmp_path: Path) -> None:
    """The parent-death signal is tied to the thread that forked: a child started from an
    executor's worker thread (``asyncio.to_thread``) must not die when that thread ends."""
    import threading

    child = ChildProcess("sleeper", python("import time; time.sleep(60)"), tmp_path / "out.log")
    worker = threading.Thread(target=child.start)
    worker.start()
    worker.join()
    try:
        deadline = time.monotonic() + 1.0  # the signal, when it comes, comes at once
        while time.monotonic() < deadline:
            assert child.alive, f"the child died with the thread that started it ({child.returncode})"
            time.sleep(0.05)
    finally:
        child.kill()


def test_a_start_that_fails_on_the_spawner_thread_raises_in_the_caller(tmp_path: Path) -> None:
    child = ChildProcess("nodir", [sys.executable, "-c", "pass"], tmp_path / "out.log", cwd=tmp_path / "missing")
    with pytest.raises(MagnetarError, match="cannot start nodir"):
        child.start()
