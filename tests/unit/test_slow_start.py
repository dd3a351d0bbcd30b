"""A start that is slow but moving is waited for; a stuck one fails early, saying what to do.

On a loaded machine ZooKeeper's JVM took over 60 s to start (measured with CPU burners
on two cores) while logging all along; ``magnetar standalone`` gave up on it after a
fixed 60 s. The fakes below stand for that JVM: a Python "java" that logs for a while
before it answers ZooKeeper's four-letter words.
"""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest

from magnetar.common.childproc import ChildNotReady, ChildProcess
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.tools import standalone

FAKE_JAVA = """\
#!{python}
# A ZooKeeper that logs a line every 50 ms for {slow_s} s, then serves ruok and srvr.
import socket, sys, time
cfg = dict(line.split("=", 1) for line in open(sys.argv[-1]).read().split())
end = time.monotonic() + {slow_s}
while time.monotonic() < end:
    print("loading", time.monotonic(), flush=True)
    time.sleep(0.05)
if {stuck}:
    time.sleep(3600)
server = socket.create_server((cfg["clientPortAddress"], int(cfg["clientPort"])))
while True:
    conn, _ = server.accept()
    word = conn.recv(4)
    conn.sendall(b"imok" if word == b"ruok" else b"Zookeeper version: fake\\nMode: standalone\\n")
    conn.close()
"""


def fake_java(tmp_path: Path, slow_s: float, stuck: bool = False) -> str:
    path = tmp_path / "java"
    path.write_text(FAKE_JAVA.format(python=sys.executable, slow_s=slow_s, stuck=stuck))
    path.chmod(0o755)
    return str(path)


def test_a_slow_zookeeper_that_keeps_logging_is_waited_for(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk", java=fake_java(tmp_path, slow_s=1.5), classpath="fake")
    try:
        # Longer than the stall limit in all, but never silent for that long.
        server.start(timeout=60, stall_timeout=0.5)
        assert server.is_ready()
        assert server.log_tail().count("loading") >= 10
    finally:
        server.kill()


def test_a_stuck_zookeeper_fails_after_the_stall_limit_not_the_whole_timeout(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk", java=fake_java(tmp_path, slow_s=0.2, stuck=True), classpath="fake")
    started = time.monotonic()
    try:
        with pytest.raises(ChildNotReady) as info:
            server.start(timeout=60, stall_timeout=1.0)
    finally:
        server.kill()
    assert time.monotonic() - started < 30
    err = info.value
    assert err.stalled and not err.exited
    assert "made no progress for 1 s" in str(err) and "loading" in err.tail
    assert not server.alive  # start() killed it


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def test_child_process_wait_counts_only_log_growth_as_progress(tmp_path: Path) -> None:
    code = """
        import time
        for i in range(30):
            print("step", i, flush=True)
            time.sleep(0.05)
        print("RE" + "ADY", flush=True)
        time.sleep(60)
    """
    child = ChildProcess("slow", python(code), tmp_path / "slow.log")
    child.start()
    try:
        child.wait_ready(lambda: "READY" in child.log_tail(), timeout=60, stall_timeout=0.5)
        assert "step 29" in child.log_tail()
    finally:
        child.kill()


def test_wait_without_a_stall_limit_keeps_its_plain_timeout(tmp_path: Path) -> None:
    child = ChildProcess("quiet", python("import time; time.sleep(60)"), tmp_path / "q.log")
    child.start()
    try:
        with pytest.raises(ChildNotReady) as info:
            child.wait_ready(lambda: False, timeout=0.5)
    finally:
        child.kill()
    assert not info.value.stalled and "was not ready within 0.5 s" in str(info.value)


def not_ready(reason: str, *, returncode: int | None = None, stalled: bool = False) -> ChildNotReady:
    return ChildNotReady("zookeeper", reason, returncode, Path("/d/logs/zookeeper.log"), "a\nlast line\n",
                         stalled=stalled)  # fmt: skip


def test_standalone_says_what_to_do_for_each_way_a_start_fails() -> None:
    stuck = standalone._not_ready_message(not_ready("made no progress for 60 s (its log did not grow)", stalled=True))
    assert stuck.startswith("zookeeper made no progress for 60 s")
    assert "/d/logs/zookeeper.log" in stuck and '"last line"' in stuck and "retry" in stuck
    slow = standalone._not_ready_message(not_ready("was not ready within 600 s"))
    assert "was not ready within 600 s" in slow and "log kept growing" in slow and "less loaded" in slow
    exited = standalone._not_ready_message(not_ready("exited before it was ready", returncode=1))
    assert exited.startswith("zookeeper exited with code 1 while starting")


def test_standalone_waits_by_progress() -> None:
    # A slow start may take minutes; only a silent one ends the wait after a minute.
    assert standalone.STALL_TIMEOUT_S == 60
    assert standalone.READY_TIMEOUT_S > 5 * standalone.STALL_TIMEOUT_S
