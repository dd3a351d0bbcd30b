"""MAGNETAR_STALL_DUMP_S: a stalled event loop gets every thread's stack written (what
found the kazoo wake-up socket blocking the broker's loop); a loop that keeps turning
gets nothing."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from magnetar.common.eventloop import STALL_ENV, dump_stacks_on_stalls, stall_threshold_s


def blocking_call_under_test() -> None:
    time.sleep(0.6)  # what a blocking call does to the loop


async def run(tmp: Path, threshold_s: float, stall: bool) -> str:
    out = tmp / "stacks.txt"
    with out.open("w") as f:
        watch = asyncio.ensure_future(dump_stacks_on_stalls(threshold_s, file=f))
        await asyncio.sleep(0.3)
        if stall:
            blocking_call_under_test()
        else:
            for _ in range(12):
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.1)
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    return out.read_text()


def test_a_stall_writes_the_stack_that_blocked(tmp_path: Path) -> None:
    text = asyncio.run(run(tmp_path, 0.2, stall=True))
    assert "Timeout (0:00:00.200000)!" in text
    assert "blocking_call_under_test" in text


def test_a_turning_loop_writes_nothing(tmp_path: Path) -> None:
    # A threshold well above the test's turns (a loaded CI machine may pause the process).
    assert asyncio.run(run(tmp_path, 2.0, stall=False)) == ""


@pytest.mark.parametrize(("value", "want"), [("", None), ("x", None), ("0", None), ("-1", None), ("1.5", 1.5)])
def test_the_setting(monkeypatch: pytest.MonkeyPatch, value: str, want: float | None) -> None:
    monkeypatch.setenv(STALL_ENV, value)
    assert stall_threshold_s() == want
