"""What the benchmarks read from /proc (Linux) to tell CPU, disk and round-trip limits apart."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far (Linux; NaN elsewhere or when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def disk_stats(path: Path) -> tuple[int, int] | None:
    """(sectors written, milliseconds busy) so far of the block device holding ``path`` (Linux), else None."""
    dev = os.stat(path).st_dev
    try:
        with open("/proc/diskstats") as fh:
            for line in fh:
                f = line.split()
                if (int(f[0]), int(f[1])) == (os.major(dev), os.minor(dev)):
                    return int(f[9]), int(f[12])
    except (OSError, IndexError, ValueError):
        pass
    return None
