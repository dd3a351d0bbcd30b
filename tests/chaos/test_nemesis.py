"""The nemesis's schedule and its executor, without processes (fast).

The schedule is a pure function of the seed: the same seed gives the same faults, and
over thousands of generated steps its invariants hold. The executor is run against a
fake cluster that checks it heals each fault before the next and records both ends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from nemesis import KINDS, QW_DEADLINE_S, Nemesis, Schedule, Step
from netns import CLIENTS, ZOOKEEPER

BOOKIES = ["bookie-1", "bookie-2", "bookie-3", "bookie-4"]
BROKERS = ["broker-1", "broker-2"]
AUDITORS = ["auditor-1", "auditor-2"]
BOOKIE_KINDS = {"kill_permanent", "disk_full"}


def schedule(seed: int, **kw: Any) -> Schedule:
    return Schedule(seed, bookies=BOOKIES, brokers=BROKERS, auditors=AUDITORS, **kw)


def test_the_same_seed_gives_the_same_schedule():
    assert schedule(42).take(300) == schedule(42).take(300)
    assert schedule(42).take(50) != schedule(43).take(50)


def test_every_kind_comes_up():
    kinds = {s.kind for s in schedule(1).take(200)}
    assert kinds == set(KINDS)


@pytest.mark.parametrize("seed", range(40))
def test_invariants_hold_over_many_steps(seed):
    interval = 20.0
    steps = schedule(seed, interval_s=interval).take(500)
    bookies = list(BOOKIES)
    quiet_until = -math.inf
    numbers = []
    for i, s in enumerate(steps):
        now = i * interval
        assert s.index == i
        assert s.duration_s > 0
        touches_bookie = s.target in bookies or s.kind in BOOKIE_KINDS or (s.peer or "").startswith("bookie-")
        if touches_bookie:
            assert now >= quiet_until, f"{s} within {QW_DEADLINE_S} s of a permanent loss"
        if s.target.startswith("bookie-"):
            assert s.target in bookies, f"{s}: not a live bookie"
        if s.kind == "kill_permanent":
            assert s.replacement is not None and s.replacement not in bookies
            numbers.append(int(s.replacement.rsplit("-", 1)[1]))
            bookies[bookies.index(s.target)] = s.replacement
            quiet_until = now + QW_DEADLINE_S
        else:
            assert s.replacement is None
        assert len(bookies) == 4  # always E + 1 bookies: a spare for re-replication
        if s.kind == "zk_expire":
            assert s.target in BROKERS and s.duration_s > 5.0  # longer than the session timeout
        if s.kind in ("kill_permanent", "disk_full"):
            assert s.target.startswith("bookie-")
        if s.kind == "partition":
            assert s.peer != s.target
            if s.peer == CLIENTS:
                assert s.target in BROKERS
            elif s.peer not in (None, ZOOKEEPER):
                assert s.peer in bookies + BROKERS + AUDITORS
        else:
            assert s.peer is None
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    assert numbers and numbers[0] == 5


def test_restricted_kinds_and_unknown_kinds():
    assert {s.kind for s in schedule(3, kinds=("pause", "zk_expire")).take(100)} == {"pause", "zk_expire"}
    with pytest.raises(ValueError, match="unknown fault kinds"):
        schedule(3, kinds=("pause", "meteor"))


# -- the executor against a fake cluster -------------------------------------------------


class FakeHistory:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def record(self, type: str, **fields: Any) -> None:  # noqa: A002
        self.events.append({"type": type, **fields})


@dataclass
class FakeProcess:
    log_path: Path
    alive: bool = True
    returncode: int | None = None

    @property
    def process(self) -> FakeProcess:
        return self

    def log_tail(self, lines: int = 80) -> str:
        return ""


@dataclass
class FakeDisk:
    filled: bool = False

    def fill(self, leave: int) -> int:
        self.filled = True
        return 1000

    def free(self) -> None:
        self.filled = False

    def usage(self) -> str:
        return "full" if self.filled else "free"


@dataclass
class FakeMember:
    name: str
    kind: str
    process: FakeProcess
    disk: FakeDisk | None = None
    gone: bool = False

    @property
    def address(self) -> str:
        return f"{self.name}:1"


@dataclass
class FakeSettings:
    broker_session_timeout_s: float = 5.0
    small_disks: bool = True
    min_free_disk_bytes: int = 64


class FakeLab:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

    def partition(self, a: str, b: str) -> str:
        self.cluster.fault(f"cut {a}/{b}")
        return "cut"

    def isolate(self, a: str) -> str:
        self.cluster.fault(f"isolate {a}")
        return "isolated"

    def heal(self, name: str | None = None) -> None:
        self.cluster.heal()


@dataclass
class FakeCluster:
    tmp: Path
    settings: FakeSettings = field(default_factory=FakeSettings)
    calls: list[str] = field(default_factory=list)
    broken: str | None = None
    zk_connect: str = "zk"
    zk_root: str = "/r"

    def __post_init__(self) -> None:
        self.lab = FakeLab(self)
        self.members: dict[str, FakeMember] = {}
        for name in BOOKIES + BROKERS + AUDITORS:
            self._member(name)
        self.bookie_count = 4

    def _member(self, name: str) -> FakeMember:
        kind = name.split("-")[0]
        m = FakeMember(name, kind, FakeProcess(self.tmp / f"{name}.log"), FakeDisk() if kind == "bookie" else None)
        self.members[name] = m
        return m

    def fault(self, what: str) -> None:
        assert self.broken is None, f"{what} while {self.broken} is not healed"
        self.broken = what
        self.calls.append(what)

    def heal(self) -> None:
        assert self.broken is not None
        self.broken = None

    def __getitem__(self, name: str) -> FakeMember:
        return self.members[name]

    def of_kind(self, kind: str) -> list[FakeMember]:
        return [m for m in self.members.values() if m.kind == kind and not m.gone]

    def next_name(self, kind: str) -> str:
        return f"bookie-{self.bookie_count + 1}"

    def kill(self, name: str) -> None:
        self.fault(f"kill {name}")
        self.members[name].process.alive = False

    def restart(self, name: str) -> None:
        self.members[name].process.alive = True
        self.heal()

    def pause(self, name: str) -> None:
        self.fault(f"pause {name}")

    def resume(self, name: str) -> None:
        self.heal()

    def replace(self, name: str) -> FakeMember:
        self.members[name].gone = True
        self.bookie_count += 1
        self.heal()
        return self._member(f"bookie-{self.bookie_count}")


class FakeWatch:
    started: list[str] = []

    def __init__(self, zk_connect, zk_root, bookie_id, history, killed_at, **kw) -> None:
        self.bookie_id = bookie_id

    def start(self) -> FakeWatch:
        FakeWatch.started.append(self.bookie_id)
        return self


def test_the_executor_heals_each_fault_and_records_both_ends(tmp_path, monkeypatch):
    cluster = FakeCluster(tmp_path)
    history = FakeHistory()
    nemesis = Nemesis(cluster, history, seed=11, interval_s=20.0)  # type: ignore[arg-type]
    nemesis.watch_cls = FakeWatch  # type: ignore[assignment]
    nemesis.expiry_log_wait_s = 0.0
    FakeWatch.started = []
    disk_state: list[bool] = []
    for _ in range(120):
        step = next(nemesis.schedule)
        nemesis.apply(step, deadline=0.0)  # every fault lasts no time
        assert cluster.broken is None, f"{step} left {cluster.broken}"
        disk_state.append(any(m.disk.filled for m in cluster.members.values() if m.disk))
    assert not any(disk_state)
    faults = [e for e in history.events if e["type"] == "fault"]
    assert len(faults) == 240
    for start, end in zip(faults[::2], faults[1::2], strict=True):
        assert (start["phase"], end["phase"]) == ("start", "end")
        assert (start["kind"], start["target"]) == (end["kind"], end["target"])
    assert {e["kind"] for e in faults} == set(KINDS)
    permanent = [e for e in faults if e["kind"] == "kill_permanent" and e["phase"] == "end"]
    assert FakeWatch.started == [f"{e['detail']['replaced']}:1" for e in permanent]
    assert [e for e in history.events if e["type"] == "error"] == []


def test_the_schedule_follows_the_clusters_names(tmp_path):
    cluster = FakeCluster(tmp_path)
    nemesis = Nemesis(cluster, FakeHistory(), seed=5, interval_s=20.0, kinds=("kill_permanent",))  # type: ignore[arg-type]
    nemesis.watch_cls = FakeWatch  # type: ignore[assignment]
    for _ in range(6):
        step: Step = next(nemesis.schedule)
        nemesis.apply(step, deadline=0.0)
        assert step.replacement in cluster.members
    assert len(cluster.of_kind("bookie")) == 4
