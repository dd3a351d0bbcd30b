"""The container helpers' own behaviour (no container engine needed): a background build
that is stopped leaves no thread behind writing to its log."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
from containers import Build, Timings

# A "build" that starts a child which keeps the output pipe open and prints forever, as
# ``podman build`` does under build-images.sh.
CHATTY = [sys.executable, "-c",
          "import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
          "'import time\\nwhile True:\\n print(\"layer\", flush=True); time.sleep(0.01)']); "
          "import time; time.sleep(3600)"]  # fmt: skip


def test_a_stopped_build_leaves_no_thread_writing_to_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    errors: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    log = tmp_path / "spark.log"
    build = Build("spark", {}, log, Timings(), "chatty build", argv=CHATTY)
    deadline = time.monotonic() + 30
    while (not log.exists() or log.stat().st_size == 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert log.stat().st_size > 0, "the build's output never reached its log"

    build.stop()
    assert not build.running, "the build or the thread copying its output is still running after stop()"
    size = log.stat().st_size
    time.sleep(0.5)
    assert log.stat().st_size == size, "the log still grows after stop(): a child of the build lives on"
    assert errors == [], f"the watcher thread failed: {errors!r}"
