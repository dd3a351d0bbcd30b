"""Compactions of the topics a broker serves: one at a time per topic, run as an owned
task, with Pulsar's LongRunningProcessStatus (NOT_RUN, RUNNING, SUCCESS, ERROR and the
last error) for ``GET .../compaction``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from magnetar.common.errors import AlreadyExists, MagnetarError

log = logging.getLogger(__name__)

Status = Literal["NOT_RUN", "RUNNING", "SUCCESS", "ERROR"]


@dataclass(frozen=True, slots=True)
class LongRunningProcessStatus:
    """Pulsar's status of a long-running admin operation."""

    status: Status = "NOT_RUN"
    last_error: str = ""


class Compactions:
    """The compactions of one broker, by topic (see the module docstring)."""

    def __init__(self) -> None:
        self._status: dict[str, LongRunningProcessStatus] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def trigger(self, topic: str, compact: Callable[[], Awaitable[object]]) -> None:
        """Start ``compact`` for ``topic`` in the background.

        Raises:
            AlreadyExists: a compaction of ``topic`` is running (Pulsar's 409).
        """
        if topic in self._tasks:
            raise AlreadyExists(f"compaction of {topic} is already in progress")
        self._status[topic] = LongRunningProcessStatus("RUNNING")
        self._tasks[topic] = asyncio.get_running_loop().create_task(self._run(topic, compact), name=f"compact {topic}")

    async def _run(self, topic: str, compact: Callable[[], Awaitable[object]]) -> None:
        try:
            await compact()
            self._status[topic] = LongRunningProcessStatus("SUCCESS")
        except asyncio.CancelledError:
            self._status[topic] = LongRunningProcessStatus("ERROR", "the compaction was stopped (the topic was closed)")
            raise
        except MagnetarError as exc:
            log.warning("compaction of %s failed: %s", topic, exc.message)
            self._status[topic] = LongRunningProcessStatus("ERROR", exc.message)
        except Exception as exc:  # a bug must still end the RUNNING status
            log.exception("compaction of %s failed", topic)
            self._status[topic] = LongRunningProcessStatus("ERROR", repr(exc))
        finally:
            self._tasks.pop(topic, None)

    def running(self, topic: str) -> bool:
        """Whether a compaction of ``topic`` is running."""
        return topic in self._tasks

    def status(self, topic: str) -> LongRunningProcessStatus:
        """The status of the last compaction of ``topic`` on this broker."""
        return self._status.get(topic, LongRunningProcessStatus())

    async def wait(self, topic: str) -> None:
        """Until the running compaction of ``topic`` (if any) ends."""
        task = self._tasks.get(topic)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    async def close(self) -> None:
        """Stop every running compaction (each leaves its topic's previous view)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
