"""Adding the partitions of a grown partitioned topic to open producers and consumers
(Pulsar's ``autoUpdatePartitions``, on by default, every ``autoUpdatePartitionsInterval``:
60 s). The handle says how to look and what to add; this owns the timer task."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from magnetar.common.errors import InvalidConfiguration

log = logging.getLogger(__name__)


def check_interval(interval_s: object) -> float:
    """The interval in seconds.

    Raises:
        InvalidArgument: not a number > 0.
    """
    if isinstance(interval_s, bool) or not isinstance(interval_s, int | float) or not interval_s > 0:
        raise InvalidConfiguration(f"auto_update_partitions_interval_seconds must be a number > 0, not {interval_s!r}")
    return float(interval_s)


class PartitionsAutoUpdate:
    """Runs ``update()`` every ``interval_s`` until closed; a failed look is logged and
    tried again at the next interval (the handle keeps working on the partitions it has).
    A pattern consumer's topic discovery runs on one too (``doing`` names it in the log)."""

    def __init__(
        self, what: str, interval_s: float, update: Callable[[], Awaitable[None]], doing: str = "adding new partitions"
    ) -> None:
        self.what = what
        self.doing = doing
        self.interval_s = check_interval(interval_s)
        self._update = update
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"auto-update:{self.what}")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self._update()
            except Exception as exc:  # noqa: BLE001 - any failure: try again next time
                log.warning("%s: %s failed (tried again in %.0f s): %r", self.what, self.doing, self.interval_s, exc)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
