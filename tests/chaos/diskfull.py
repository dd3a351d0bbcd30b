"""A bookie's disk that the chaos run can fill: a small filesystem of its own.

The bookie's data directory (journal, entry logs, index) is on a loop-mounted ext4
image (a sparse file, so only what is written takes space; ``-m 0`` so no blocks are
reserved for root and ``statvfs`` shows the bookie exactly what it can use). Without
loop devices a size-capped tmpfs is used instead (RAM: only for short runs).

:meth:`SmallDisk.fill` writes a filler file (``fallocate``) leaving less than the
bookie's ``min_free_disk_bytes`` free, so at its next disk check (``disk_check_interval_s``)
the bookie turns read-only and registers as such; :meth:`SmallDisk.free` deletes the
filler and it turns writable again. The mount is recorded in the run's state file
(netns.RunState) so a dead run's mounts are removed by ``netns.remove_stale``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from netns import RunState, run


def loop_available() -> bool:
    """True when loop devices and mkfs.ext4 can be used (root, /dev/loop-control)."""
    return (
        os.geteuid() == 0
        and Path("/dev/loop-control").exists()
        and shutil.which("mkfs.ext4") is not None
        and shutil.which("losetup") is not None
        and run("losetup", "-f", check=False).returncode == 0
    )


class SmallDisk:
    """A filesystem of ``size_bytes`` mounted at ``mountpoint`` (its image next to it)."""

    def __init__(self, mountpoint: Path, size_bytes: int, state: RunState | None = None, *, kind: str | None = None) -> None:
        self.mountpoint = Path(mountpoint).absolute()
        self.image = self.mountpoint.with_name(self.mountpoint.name + ".img")
        self.size_bytes = size_bytes
        self.state = state
        self.kind = kind or ("loop" if loop_available() else "tmpfs")
        self.filler = self.mountpoint / "chaos-filler"
        self.mounted = False

    def mount(self) -> SmallDisk:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        if self.state is not None:
            self.state.add("mounts", str(self.mountpoint))
        if self.kind == "loop":
            with self.image.open("wb") as f:
                f.truncate(self.size_bytes)  # sparse
            run("mkfs.ext4", "-q", "-F", "-m", "0", "-E", "nodiscard,lazy_itable_init=1", str(self.image))
            run("mount", "-o", "loop", str(self.image), str(self.mountpoint))
        else:
            run("mount", "-t", "tmpfs", "-o", f"size={self.size_bytes}", "tmpfs", str(self.mountpoint))
        self.mounted = True
        return self

    @property
    def data_dir(self) -> Path:
        """Where the bookie keeps its files (a directory on the small filesystem)."""
        return self.mountpoint / "bookie"

    def free_bytes(self) -> int:
        return shutil.disk_usage(self.mountpoint).free

    def fill(self, leave_bytes: int) -> int:
        """Take all free space but ``leave_bytes``; returns the filler's size."""
        size = max(0, self.free_bytes() - leave_bytes)
        if size:
            run("fallocate", "-l", str(size), str(self.filler))
        return size

    def free(self) -> None:
        """Delete the filler."""
        self.filler.unlink(missing_ok=True)

    def unmount(self) -> None:
        """Unmount (lazily if still busy) and delete the image. Idempotent."""
        if self.mounted:
            self.free()
            if run("umount", str(self.mountpoint), check=False).returncode != 0:
                run("umount", "-l", str(self.mountpoint), check=False)
            self.mounted = False
        if self.state is not None:
            self.state.discard("mounts", str(self.mountpoint))
        self.image.unlink(missing_ok=True)

    def usage(self) -> str:
        try:
            u = shutil.disk_usage(self.mountpoint)
        except OSError:
            return "unmounted"
        return f"{u.used >> 20} MiB used, {u.free >> 20} MiB free of {u.total >> 20} MiB"


def _sanity() -> None:  # pragma: no cover - a manual check: python diskfull.py
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        disk = SmallDisk(Path(d) / "m", 64 << 20).mount()
        try:
            print(disk.kind, disk.usage())
            disk.fill(4 << 20)
            print("filled:", disk.usage())
            disk.free()
            print("freed:", disk.usage())
        finally:
            disk.unmount()
    subprocess.run(["losetup", "-a"], check=False)


if __name__ == "__main__":
    _sanity()
