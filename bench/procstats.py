"""What the benchmarks read from /proc (Linux) to tell CPU, memory, disk and round-trip
limits apart, and ZooKeeper's own figures (``mntr``)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from magnetar.common.zkserver import ZooKeeperServer, four_letter_word


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far (Linux; NaN elsewhere or when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def rss_kib(pid: int | None) -> int:
    """VmRSS of a process in KiB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def zk_mntr(zk: ZooKeeperServer, timeout_s: float = 10.0) -> dict[str, int]:
    """ZooKeeper's numeric ``mntr`` figures without their ``zk_`` prefix (znode count, data
    size, watches, packets ...); {} when it does not answer."""
    try:
        text = four_letter_word(zk.host, zk.port, "mntr", timeout_s)
    except OSError:
        return {}
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition("\t")
        with contextlib.suppress(ValueError):
            out[key.removeprefix("zk_")] = int(float(value))
    return out


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
