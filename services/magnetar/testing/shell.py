"""Run the real ``magnetar`` command from tests, and parse the shell's outputs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MAGNETAR = str(Path(sys.executable).with_name("magnetar"))


def magnetar(*args: str, timeout: float = 60.0, check: bool = False) -> subprocess.CompletedProcess[str]:
    """``magnetar ARGS…`` as a child process; returns its exit code, stdout and stderr."""
    return subprocess.run(
        [MAGNETAR, *args], capture_output=True, text=True, timeout=timeout, check=check
    )


def parse_readledger(stdout: str) -> dict[int, tuple[int, str]]:
    """``E<TAB>length<TAB>first 20 bytes`` lines → {entry id: (length, head)}."""
    out: dict[int, tuple[int, str]] = {}
    for line in stdout.splitlines():
        entry, length, head = line.split("\t", 2)
        out[int(entry)] = (int(length), head)
    return out
