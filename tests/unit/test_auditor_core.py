"""The auditor's pure parts: which entries a bookie holds, what to repair, the grace
period, the throttle, and swapping a bookie into a fragment."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.auditor.bookiewatch import LostBookies
from magnetar.auditor.fragments import (
    entries_on,
    first_and_last_on,
    holds,
    open_last_fragment_affected,
    repairs,
)
from magnetar.auditor.throttle import Throttle
from magnetar.common.errors import MetadataVersionConflict
from magnetar.ledger.metadata import Fragment, LedgerMetadata, write_set

ABC = ("a", "b", "c")


def test_entries_on_matches_striping():
    for bookies, qw in (
        (ABC, 2),
        (ABC, 3),
        (("a", "b", "c", "d"), 3),
        (("a", "b", "c", "d", "e"), 2),
    ):
        for b in bookies:
            want = [e for e in range(7, 40) if b in write_set(bookies, qw, e)]
            assert entries_on(bookies, qw, b, 7, 39) == want
            assert all(holds(bookies, qw, b, e) for e in want)
            assert first_and_last_on(bookies, qw, b, 7, 39) == [want[0], want[-1]]


def test_first_and_last_on_short_fragments():
    assert first_and_last_on(ABC, 2, "a", 0, 0) == [0]  # entry 0 → a, b
    assert first_and_last_on(ABC, 2, "c", 0, 0) == []
    assert first_and_last_on(ABC, 2, "c", 0, 1) == [1]
    assert first_and_last_on(ABC, 2, "a", 5, 4) == []  # an empty fragment


def ledger(*fragments: tuple[int, tuple[str, ...]], closed_at: int | None = None) -> LedgerMetadata:
    md = LedgerMetadata(3, 2, 2, fragments=tuple(Fragment(f, b) for f, b in fragments))
    return md.closed(closed_at, 0) if closed_at is not None else md


def test_repairs_of_a_closed_ledger_cover_every_fragment_with_the_lost_bookie():
    md = ledger((0, ABC), (10, ("d", "b", "c")), (20, ("d", "b", "e")), closed_at=29)
    got = [(r.first_entry, r.last_entry, r.missing) for r in repairs(md, {"b"})]
    assert got == [(0, 9, "b"), (10, 19, "b"), (20, 29, "b")]
    assert [(r.first_entry, r.missing) for r in repairs(md, {"a", "e"})] == [(0, "a"), (20, "e")]
    assert repairs(md, {"z"}) == []


def test_repairs_of_an_open_ledger_leave_its_current_fragment():
    md = ledger((0, ABC), (10, ("d", "b", "c")))
    assert [(r.first_entry, r.last_entry) for r in repairs(md, {"b"})] == [(0, 9)]
    assert open_last_fragment_affected(md, {"b"}) and not open_last_fragment_affected(md, {"a"})
    assert [r.first_entry for r in repairs(md, {"b"}, with_open_last=True)] == [0, 10]
    assert not open_last_fragment_affected(md.closed(12, 0), {"b"})


def test_with_replaced_bookie_is_a_compare_and_set_on_the_fragment():
    md = ledger((0, ABC), (10, ("d", "b", "c")), closed_at=15)
    new = md.with_replaced_bookie(10, ("d", "b", "c"), "b", "e")
    assert new.fragments == (Fragment(0, ABC), Fragment(10, ("d", "e", "c")))
    with pytest.raises(MetadataVersionConflict):
        new.with_replaced_bookie(10, ("d", "b", "c"), "b", "f")  # somebody changed it first
    assert md.fragment_last_entry(0) == 9 and md.fragment_last_entry(1) == 15
    assert ledger((0, ABC)).fragment_last_entry(0) == -1  # open: the end is not known


def test_writer_survives_the_json_round_trip():
    md = LedgerMetadata(3, 2, 2, fragments=(Fragment(0, ABC),), writer="w1")
    assert LedgerMetadata.from_dict(md.to_dict()).writer == "w1"
    assert "writer" not in LedgerMetadata(3, 2, 2, fragments=(Fragment(0, ABC),)).to_dict()


def test_lost_bookies_after_the_grace_period_once():
    lost = LostBookies(grace_s=30)
    assert lost.observe({"a", "b"}, now=0, known={"c"}) == []  # c: named by a ledger, never seen
    assert lost.observe({"a"}, now=10) == []
    assert lost.pending(now=20) == {"c": 20, "b": 10}
    assert lost.observe({"a"}, now=30) == ["c"]
    lost.done("c")
    assert lost.observe({"a"}, now=39) == []
    assert lost.observe({"a"}, now=40) == ["b"]
    lost.done("b")
    assert lost.observe({"a"}, now=100) == []
    assert lost.observe({"a", "b"}, now=101) == []  # back: its clock is dropped
    assert lost.observe({"a"}, now=102) == []
    assert lost.observe({"a"}, now=132) == ["b"]  # gone again: due again after a full grace


def test_throttle_spreads_entries_over_time():
    now = [100.0]
    t = Throttle(1000, clock=lambda: now[0])
    assert t.delay_for(500) == 0
    assert t.delay_for(500) == pytest.approx(0.5)
    assert t.delay_for(1000) == pytest.approx(1.0)
    now[0] = 200.0  # idle time is not saved up
    assert t.delay_for(2000) == 0 and t.delay_for(1) == pytest.approx(2.0)
    assert Throttle(0).delay_for(10**9) == 0


async def test_throttle_limits_the_rate():
    t = Throttle(2000)
    loop = asyncio.get_running_loop()
    start = loop.time()
    for _ in range(10):
        await t.acquire(100)
    assert loop.time() - start >= 0.45  # 1,000 entries at 2,000/s, the first 100 at once


class _Registry:
    async def list_writable(self) -> list[str]:
        return ["b1"]

    async def list_read_only(self) -> list[str]:
        return []


class _Markers:
    def __init__(self) -> None:
        self.recorded: list[dict[str, object]] = []

    async def record_audit(self, summary: dict[str, object]) -> None:
        self.recorded.append(summary)


async def test_triggers_during_a_check_share_the_next_one(monkeypatch):
    """A burst of triggers costs two checks, not one per call; each caller's check
    started after it asked; a caller that gives up cancels nothing."""
    from types import SimpleNamespace

    from magnetar.auditor import leader as leader_mod
    from magnetar.auditor.config import AuditorConfig

    started: list[int] = []
    gates = [asyncio.Event(), asyncio.Event(), asyncio.Event()]

    async def check_all(client, markers, registered, full):
        n = len(started)
        started.append(n)
        await gates[n].wait()
        report = {"run": n}
        return SimpleNamespace(duration_s=0.0, ledgers_checked=0, fragments_checked=0, ledgers_marked=0,
                               to_dict=lambda: dict(report))  # fmt: skip

    monkeypatch.setattr(leader_mod, "check_all", check_all)
    markers = _Markers()
    leader = leader_mod.AuditLeader(SimpleNamespace(registry=_Registry()), markers, AuditorConfig(), "a1")  # type: ignore[arg-type]
    first = asyncio.create_task(leader.audit())
    await asyncio.sleep(0.01)
    assert started == [0]
    burst = [asyncio.create_task(leader.audit()) for _ in range(100)]
    quitter = asyncio.create_task(leader.audit())
    await asyncio.sleep(0.01)
    quitter.cancel()  # gives up: the others' check goes on
    gates[0].set()
    assert (await first)["run"] == 0
    await asyncio.sleep(0.01)
    assert started == [0, 1]  # one check for all hundred, begun after they asked
    late = asyncio.create_task(leader.audit())  # asks during check 1: gets check 2
    gates[1].set()
    assert {(await t)["run"] for t in burst} == {1}
    gates[2].set()
    assert (await late)["run"] == 2
    assert started == [0, 1, 2] and [r["run"] for r in markers.recorded] == [0, 1, 2]
    assert quitter.cancelled()
    await leader.close()
