"""BackgroundTasks and KeyedTasks: kept until done, failures logged, wait and close."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from magnetar.common.tasks import BackgroundTasks, KeyedTasks


async def _settle() -> None:
    """Let done callbacks (scheduled with call_soon) run."""
    for _ in range(3):
        await asyncio.sleep(0)


async def test_spawn_keeps_the_task_until_it_ends() -> None:
    tasks = BackgroundTasks("test")
    release = asyncio.Event()

    async def work() -> int:
        await release.wait()
        return 7

    task = tasks.spawn(work(), name="work")
    assert task.get_name() == "work"
    assert len(tasks) == 1 and task in tasks
    gc.collect()  # only the set holds it strongly besides this test
    await _settle()
    assert len(tasks) == 1
    release.set()
    assert await task == 7
    await _settle()
    assert len(tasks) == 0 and task not in tasks


async def test_an_exception_is_logged_and_the_task_dropped(caplog: pytest.LogCaptureFixture) -> None:
    tasks = BackgroundTasks("the owner")

    async def fail() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="magnetar.common.tasks"):
        tasks.spawn(fail(), name="failing")
        await _settle()
    assert len(tasks) == 0
    [record] = [r for r in caplog.records if r.name == "magnetar.common.tasks"]
    assert "the owner" in record.getMessage() and "failing" in record.getMessage()
    assert record.exc_info is not None and str(record.exc_info[1]) == "boom"


async def test_on_error_replaces_the_log_line(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[tuple[str, str]] = []
    tasks = BackgroundTasks("test", on_error=lambda task, exc: seen.append((task.get_name(), str(exc))))

    async def fail() -> None:
        raise ValueError("bad")

    with caplog.at_level(logging.DEBUG, logger="magnetar.common.tasks"):
        tasks.spawn(fail(), name="t1")
        await _settle()
    assert seen == [("t1", "bad")]
    assert not [r for r in caplog.records if r.name == "magnetar.common.tasks"]


async def test_a_cancelled_task_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    tasks = BackgroundTasks("test")
    task = tasks.spawn(asyncio.sleep(60))
    await asyncio.sleep(0)
    with caplog.at_level(logging.DEBUG, logger="magnetar.common.tasks"):
        task.cancel()
        await _settle()
    assert task.cancelled() and len(tasks) == 0
    assert not [r for r in caplog.records if r.name == "magnetar.common.tasks"]


async def test_wait_awaits_all_and_does_not_raise(caplog: pytest.LogCaptureFixture) -> None:
    tasks = BackgroundTasks("test")
    order: list[str] = []

    async def work(name: str, delay: float, fail: bool = False) -> None:
        await asyncio.sleep(delay)
        order.append(name)
        if fail:
            raise RuntimeError(name)

    with caplog.at_level(logging.CRITICAL, logger="magnetar.common.tasks"):
        a = tasks.spawn(work("a", 0.02))
        b = tasks.spawn(work("b", 0.01, fail=True))
        await tasks.wait()
    assert sorted(order) == ["a", "b"]
    assert a.done() and not a.cancelled() and b.exception() is not None
    await tasks.wait()  # nothing left: returns at once


async def test_wait_with_a_timeout_leaves_the_tasks_running() -> None:
    tasks = BackgroundTasks("test")
    release = asyncio.Event()
    task = tasks.spawn(release.wait())
    await tasks.wait(timeout_s=0.01)
    assert not task.done() and len(tasks) == 1
    release.set()
    await tasks.wait()
    assert task.done() and not task.cancelled()


async def test_close_cancels_and_awaits() -> None:
    tasks = BackgroundTasks("test")
    cleaned: list[str] = []

    async def work(name: str) -> None:
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0)  # cleanup that itself awaits
            cleaned.append(name)

    ts = [tasks.spawn(work(n)) for n in ("a", "b")]
    await asyncio.sleep(0)
    await tasks.close()
    assert all(t.cancelled() for t in ts)
    assert sorted(cleaned) == ["a", "b"]  # their cleanup ran before close returned
    await _settle()
    assert len(tasks) == 0


async def test_cancel_does_not_wait() -> None:
    tasks = BackgroundTasks("test")
    task = tasks.spawn(asyncio.sleep(60))
    await asyncio.sleep(0)
    assert tasks.cancel() == [task]
    assert not task.done()  # cancellation requested, not yet delivered
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()


async def test_close_and_wait_skip_the_calling_task() -> None:
    tasks = BackgroundTasks("test")

    async def closes_its_owner() -> str:
        await tasks.wait()
        await tasks.close()
        return "done"

    task = tasks.spawn(closes_its_owner())
    assert await asyncio.wait_for(task, 1) == "done"


async def test_spawn_after_close_is_kept_and_a_later_close_stops_it() -> None:
    tasks = BackgroundTasks("test")
    await tasks.close()
    late = tasks.spawn(asyncio.sleep(60))
    assert len(tasks) == 1
    await asyncio.sleep(0)
    await tasks.close()
    assert late.cancelled()


async def test_keyed_get_wait_and_replacement(caplog: pytest.LogCaptureFixture) -> None:
    failures: list[tuple[str, str]] = []
    keyed: KeyedTasks[str] = KeyedTasks("test", on_error=lambda key, exc: failures.append((key, str(exc))))
    gates = {n: asyncio.Event() for n in ("a1", "a2", "b")}

    async def work(gate: str, fail: bool = False) -> None:
        await gates[gate].wait()
        if fail:
            raise RuntimeError(gate)

    a1 = keyed.spawn("a", work("a1"))
    assert keyed.get("a") is a1 and "a" in keyed
    a2 = keyed.spawn("a", work("a2"))  # replaces a1 under "a"
    b = keyed.spawn("b", work("b", fail=True))
    assert keyed.get("a") is a2 and len(keyed) == 2

    # a1 ending does not remove a2 from the index.
    gates["a1"].set()
    await a1
    await _settle()
    assert keyed.get("a") is a2

    # wait(keys) waits only for those keys' latest tasks.
    gates["b"].set()
    await keyed.wait(["b", "missing"])
    assert b.done() and not a2.done()
    await _settle()
    assert "b" not in keyed and failures == [("b", "b")]

    await keyed.wait(timeout_s=0.01)
    assert not a2.done()
    gates["a2"].set()
    await keyed.wait()
    await _settle()
    assert keyed.get("a") is None and len(keyed) == 0


async def test_keyed_close_cancels_replaced_tasks_too() -> None:
    keyed: KeyedTasks[str] = KeyedTasks("test")
    old = keyed.spawn("k", asyncio.sleep(60))
    new = keyed.spawn("k", asyncio.sleep(60))
    await asyncio.sleep(0)
    await keyed.close()
    assert old.cancelled() and new.cancelled()


async def test_keyed_failure_is_logged_without_on_error(caplog: pytest.LogCaptureFixture) -> None:
    keyed: KeyedTasks[str] = KeyedTasks("the owner")

    async def fail() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="magnetar.common.tasks"):
        keyed.spawn("topic-x", fail())
        await _settle()
    [record] = [r for r in caplog.records if r.name == "magnetar.common.tasks"]
    assert "topic-x" in record.getMessage() and "the owner" in record.getMessage()
