"""The chaos run's history: an append-only JSON-lines file of everything that happened.

Every event is one line, ``{"t": <seconds since the History was created>, "type": ...,
...fields}``. The workload records sends, deliveries and acks; the runner records
faults and re-replication. The checker and the report read the file back, so nothing
they judge depends on the process that wrote it (a crashed runner loses at most the
line it was writing). See README.md for the event schema.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class History:
    """Append events to ``path`` (created, or truncated if it exists).

    ``record`` is thread-safe and never awaits, so asyncio tasks, kazoo threads and the
    runner's threads share one History. Each line is flushed as it is written.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("w", encoding="utf-8", buffering=1)  # line-buffered
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self.wall0 = time.time()
        self._dumps = json.JSONEncoder(separators=(",", ":"), default=str).encode
        self.record("history", wall=self.wall0)

    def now(self) -> float:
        """Seconds since the History was created (the ``t`` of a record made now)."""
        return time.monotonic() - self._t0

    def record(self, type: str, **fields: Any) -> None:  # noqa: A002 - the schema's name
        """Append one event; ``t`` is added (seconds since creation, monotonic clock)."""
        with self._lock:
            if self._file.closed:
                return  # a straggler after close(): nothing to judge it against anyway
            line = self._dumps({"t": round(self.now(), 4), "type": type, **fields})
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def iter(path: Path) -> Iterator[dict[str, Any]]:
        """The events of ``path`` one by one (for histories too big for a list). A torn
        last line (the writer crashed mid-line) is skipped."""
        with Path(path).open(encoding="utf-8") as f:
            for line in f:
                if not line.endswith("\n"):
                    break  # torn last line
                line = line.strip()
                if line:
                    yield json.loads(line)

    @staticmethod
    def load(path: Path) -> list[dict[str, Any]]:
        """Every event of ``path``, in file order."""
        return list(History.iter(path))
