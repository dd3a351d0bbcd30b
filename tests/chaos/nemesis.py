"""The nemesis: a seeded random fault schedule, and the thread-free loop that applies it.

:class:`Schedule` is pure: from a seed and the starting process names it generates the
steps (kind, target, duration, partition peer), keeping a model of which bookies exist,
so the same seed gives the same schedule on every machine (``make chaos SEED=…``
replays it). Its invariants:

- one fault at a time, healed before the next starts (so at most one bookie, broker or
  auditor is down, and one broker always serves);
- a bookie killed for good is replaced by a new bookie at once (the model names it
  ``bookie-<n+1>``, as the cluster will), so 4 bookies exist again and E=3 always finds
  3 writable ones;
- while a permanent loss is being re-replicated (the ``qw_window_s`` after it, plus
  one slot) no other bookie is faulted, so "Qw restored within 60 s" measures the
  auditor alone; a slot where no allowed kind has a target stays quiet.

Step ``i`` is due ``(i + 1) × interval_s`` after the start (or at once, when the step
before it overran its slot).

:class:`Nemesis` runs a schedule against a :class:`ChaosCluster` for a duration, one
step per ``interval_s``, recording each fault's start and end in the History
(``fault`` events) and, after each permanent bookie loss, ``qw_restored`` (measured
by :class:`QwWatch` from ZooKeeper's ledger metadata, in a thread of its own).

Fault kinds:

``kill_restart``  SIGKILL a bookie, broker or auditor; restart it (same id, data, address)
``pause``         SIGSTOP, then SIGCONT
``kill_permanent``  SIGKILL a bookie and replace it by a new one (new id and disk)
``zk_expire``     a real ZooKeeper session expiry of a broker: its traffic to ZooKeeper
                  is dropped for longer than its session timeout (then ZooKeeper expires
                  the session, deletes its ephemeral znodes — ownership, registration —
                  and the broker, reconnecting, is told so); without namespaces, a SIGSTOP
                  as long. ``metadata.chaos.expire_session`` cannot be used on another
                  process: it needs the session's password, which only the broker knows.
``disk_full``     fill a bookie's own filesystem below ``min_free_disk_bytes``: read-only
``partition``     iptables DROP between a process and another one, ZooKeeper, the
                  clients, or everything (isolated)
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from netns import CLIENTS, ZOOKEEPER

if TYPE_CHECKING:
    from cluster import ChaosCluster
    from history import History

log = logging.getLogger(__name__)

KINDS = ("kill_restart", "pause", "kill_permanent", "zk_expire", "disk_full", "partition")
QW_DEADLINE_S = 60.0
SESSION_LOST_LOG = "ZooKeeper session lost"
"""What a broker logs when it learns its session expired (broker/service.py)."""


@dataclass(frozen=True)
class Step:
    """One fault of the schedule."""

    index: int
    kind: str
    target: str
    duration_s: float
    """How long the fault lasts before it is healed (kill_permanent: until the
    replacement starts)."""
    peer: str | None = None
    """partition: the other side (a process, "zookeeper", "clients"), None: isolated."""
    replacement: str | None = None
    """kill_permanent: the new bookie's name."""

    def describe(self) -> str:
        extra = f" from {self.peer}" if self.peer else (" (isolated)" if self.kind == "partition" else "")
        return f"#{self.index} {self.kind} {self.target}{extra} for {self.duration_s:.1f} s"


@dataclass
class Schedule:
    """The seeded fault schedule (an endless iterator of :class:`Step`)."""

    seed: int
    bookies: list[str]
    brokers: list[str]
    auditors: list[str]
    kinds: tuple[str, ...] = KINDS
    interval_s: float = 20.0
    qw_window_s: float = QW_DEADLINE_S
    broker_session_timeout_s: float = 5.0
    next_bookie: int = 0
    """Number of the next new bookie (default: one more than the bookies given)."""
    index: int = 0
    bookie_quiet_until: float = 0.0
    """Schedule time (index × interval) before which no bookie is faulted."""
    rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.bookies = list(self.bookies)
        if not self.next_bookie:
            self.next_bookie = 1 + max((int(b.rsplit("-", 1)[1]) for b in self.bookies), default=0)
        unknown = set(self.kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(KINDS)}")

    def __iter__(self) -> Schedule:
        return self

    def __next__(self) -> Step:
        while True:
            step = self._next_at(self.index)
            self.index += 1
            if step is not None:
                return step

    def _next_at(self, index: int) -> Step | None:
        """The fault of slot ``index`` (None: nothing may be faulted then, a quiet slot)."""
        rng = self.rng
        now = index * self.interval_s
        bookies_ok = now >= self.bookie_quiet_until
        processes = (self.bookies if bookies_ok else []) + self.brokers + self.auditors
        choices = {
            "kill_restart": processes,
            "pause": processes,
            "kill_permanent": self.bookies if bookies_ok else [],
            "zk_expire": self.brokers,
            "disk_full": self.bookies if bookies_ok else [],
            "partition": processes,
        }
        kinds = [k for k in self.kinds if choices[k]]
        if not kinds:
            return None
        kind = rng.choice(kinds)
        target = rng.choice(choices[kind])
        peer = replacement = None
        if kind == "kill_restart":
            duration = rng.uniform(1.0, 8.0)
        elif kind == "pause":
            duration = rng.uniform(2.0, 10.0)
        elif kind == "kill_permanent":
            duration = rng.uniform(1.0, 5.0)
            replacement = f"bookie-{self.next_bookie}"
            self.next_bookie += 1
            self.bookies[self.bookies.index(target)] = replacement
            # One slot more than the window: a late step (the one before it overran its
            # slot) must not bring the next bookie fault closer than the window.
            self.bookie_quiet_until = now + self.qw_window_s + self.interval_s
        elif kind == "zk_expire":
            duration = self.broker_session_timeout_s + rng.uniform(2.0, 6.0)
        elif kind == "disk_full":
            duration = rng.uniform(5.0, 12.0)
        else:  # partition
            duration = rng.uniform(2.0, 10.0)
            others = [p for p in processes if p != target]
            peers: list[str | None] = [None, ZOOKEEPER, *others]
            if target in self.brokers:
                peers.append(CLIENTS)
            peer = rng.choice(peers)
        return Step(index, kind, target, round(duration, 2), peer, replacement)

    def take(self, n: int) -> list[Step]:
        return [next(self) for _ in range(n)]


class QwWatch:
    """After a permanent bookie loss: seconds until no ledger relies on the lost bookie
    for copies the auditor restores, recorded as ``qw_restored``.

    Restored means, read from ZooKeeper through the typed stores: no fragment of any
    ledger names the bookie, except the current fragment of an open ledger (the
    writer's own ensemble change replaces it there, as in BookKeeper — the auditor
    leaves it to a live writer), and no under-replication marker names it (the auditor
    clears a marker only when every lost copy is back, and keeps it while an open
    ledger's current fragment still names the bookie). ``ok`` is False when that took
    longer than 60 s (the watch goes on until ``give_up_s`` to say how long).
    """

    def __init__(self, zk_connect: str, zk_root: str, bookie_id: str, history: History, killed_at: float,
                 *, give_up_s: float = 300.0, poll_s: float = 1.0) -> None:  # fmt: skip
        self.zk_connect, self.zk_root, self.bookie_id = zk_connect, zk_root, bookie_id
        self.history = history
        self.killed_at = killed_at  # time.monotonic() of the kill
        self.give_up_s = give_up_s
        self.poll_s = poll_s
        self.result: dict[str, Any] | None = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"qw-{bookie_id}", daemon=True)

    def start(self) -> QwWatch:
        self.thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop watching; a loss not restored yet is recorded as such."""
        self._stop.set()
        self.thread.join(timeout)

    @property
    def done(self) -> bool:
        return self.result is not None

    def _run(self) -> None:
        try:
            asyncio.run(self._watch())
        except Exception as exc:  # noqa: BLE001 - recorded, not raised in a thread
            log.exception("Qw watch of %s failed", self.bookie_id)
            self._record(False, f"watch failed: {exc!r}")

    def _record(self, restored: bool, note: str) -> None:
        if self.result is not None:
            return
        seconds = round(time.monotonic() - self.killed_at, 2)
        self.result = {"bookie": self.bookie_id, "seconds": seconds, "ok": restored and seconds <= QW_DEADLINE_S,
                       "restored": restored, "note": note}  # fmt: skip
        self.history.record("qw_restored", **self.result)

    async def _watch(self) -> None:
        from magnetar.auditor.fragments import repairs
        from magnetar.common.errors import NoSuchLedger
        from magnetar.ledger.metadata import LedgerMetadata
        from magnetar.metadata.ledgers import ZkLedgerMetadataStore
        from magnetar.metadata.session import ZkSession
        from magnetar.metadata.underreplication import ZkUnderReplicationStore

        session = ZkSession(self.zk_connect, self.zk_root)
        await session.start()
        try:
            ledgers = ZkLedgerMetadataStore(session, LedgerMetadata.from_dict)
            markers = ZkUnderReplicationStore(session)
            note = ""
            while not self._stop.is_set():
                named, marked, open_current = 0, 0, 0
                for marker in await markers.list():
                    marked += self.bookie_id in marker.missing
                for ledger_id in await ledgers.list():
                    try:
                        md, _ = await ledgers.read(ledger_id)
                    except NoSuchLedger:
                        continue
                    if self.bookie_id not in md.bookies():
                        continue
                    if repairs(md, {self.bookie_id}):
                        named += 1
                    else:
                        open_current += 1
                note = f"{named} ledgers name it in fragments the auditor restores, {marked} markers, " \
                       f"{open_current} open ledgers' current fragment"  # fmt: skip
                if named == 0 and marked == 0:
                    self._record(True, note)
                    return
                if time.monotonic() - self.killed_at > self.give_up_s:
                    break
                await asyncio.sleep(self.poll_s)
            self._record(False, f"not restored: {note}")
        finally:
            await session.close()


class Nemesis:
    """Applies a seeded :class:`Schedule` to a cluster, recording every fault.

    Runs in the calling thread (the main thread: restarts and replacements start child
    processes, which die with the thread that started them).
    """

    def __init__(self, cluster: ChaosCluster, history: History, seed: int, interval_s: float = 20.0,
                 *, kinds: tuple[str, ...] | None = None) -> None:  # fmt: skip
        self.cluster = cluster
        self.history = history
        self.interval_s = interval_s
        s = cluster.settings
        available = list(kinds or KINDS)
        if cluster.lab is None and "partition" in available:
            available.remove("partition")  # no namespaces: nothing to partition with
        if not s.small_disks and "disk_full" in available:
            available.remove("disk_full")
        self.schedule = Schedule(
            seed,
            bookies=[m.name for m in cluster.of_kind("bookie")],
            brokers=[m.name for m in cluster.of_kind("broker")],
            auditors=[m.name for m in cluster.of_kind("auditor")],
            kinds=tuple(available),
            interval_s=interval_s,
            broker_session_timeout_s=s.broker_session_timeout_s,
            next_bookie=int(cluster.next_name("bookie").rsplit("-", 1)[1]),
        )
        self.current: Step | None = None
        self.watches: list[QwWatch] = []
        self.steps_done: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._log_offset = 0
        self.expiry_log_wait_s = 10.0
        """How long a healed zk_expire waits for the broker to log its session's loss."""
        self.watch_cls: type[QwWatch] = QwWatch
        """What measures a permanent loss's re-replication (a test may swap it)."""

    def stop(self) -> None:
        """Ask :meth:`run` to heal the current fault and return (thread-safe)."""
        self._stop.set()

    def run(self, duration_s: float) -> None:
        """Apply the schedule for ``duration_s``: one step every ``interval_s``, the
        first after one interval of fault-free running."""
        t0 = time.monotonic()
        end = t0 + duration_s
        while not self._stop.is_set():
            step = next(self.schedule)
            start_at = t0 + (step.index + 1) * self.interval_s
            if start_at >= end:
                break
            if self._stop.wait(max(0.0, start_at - time.monotonic())):
                break
            self.check_alive()
            pending = [w.bookie_id for w in self.watches if not w.done]
            if pending and (step.target.startswith("bookie-") or (step.peer or "").startswith("bookie-")):
                log.warning("%s while re-replication of %s is still measured", step.describe(), pending)
            self.current = step
            try:
                self.apply(step, deadline=end)
            finally:
                self.current = None
        self._stop.wait(max(0.0, end - time.monotonic()))

    def check_alive(self) -> list[str]:
        """Restart any process that exited on its own (a crash: a finding), recording it."""
        crashed = []
        for m in list(self.cluster.members.values()):
            if m.gone or m.process.alive:
                continue
            code = m.process.process.returncode
            crashed.append(m.name)
            self.history.record("error", what=f"{m.name} exited on its own (code {code})",
                                error=m.process.log_tail(5))  # fmt: skip
            log.error("%s exited on its own (code %s); restarting it", m.name, code)
            self._heal_harder(m.name)
        return crashed

    def _sleep(self, seconds: float, deadline: float) -> None:
        self._stop.wait(max(0.0, min(seconds, deadline - time.monotonic())))

    def apply(self, step: Step, *, deadline: float = math.inf) -> None:
        """Start the fault, wait its duration (cut short by :meth:`stop` or ``deadline``),
        heal it; record both ends."""
        c, name = self.cluster, step.target
        m = c[name]
        detail: dict[str, Any] = {"step": step.index, "duration_s": step.duration_s, "address": m.address}
        started = time.monotonic()
        if step.kind == "kill_restart":
            c.kill(name)
        elif step.kind == "pause":
            c.pause(name)
        elif step.kind == "kill_permanent":
            c.kill(name)
        elif step.kind == "zk_expire":
            if c.lab is not None:
                detail["how"] = c.lab.partition(name, ZOOKEEPER)
            else:
                c.pause(name)
                detail["how"] = "SIGSTOP longer than the session timeout"
            detail["session_timeout_s"] = c.settings.broker_session_timeout_s
            self._log_offset = _log_size(m)
        elif step.kind == "disk_full":
            assert m.disk is not None
            detail["filler_bytes"] = m.disk.fill(c.settings.min_free_disk_bytes // 2)
            detail["disk"] = m.disk.usage()
        elif step.kind == "partition":
            assert c.lab is not None
            detail["peer"] = step.peer
            detail["how"] = c.lab.isolate(name) if step.peer is None else c.lab.partition(name, step.peer)
        self.history.record("fault", kind=step.kind, target=name, phase="start", detail=detail)
        log.info("fault start: %s", step.describe())
        self._sleep(step.duration_s, deadline)
        end_detail: dict[str, Any] = {"step": step.index, "lasted_s": round(time.monotonic() - started, 2)}
        try:
            self._heal(step, end_detail, started)
        except Exception as exc:
            end_detail["error"] = repr(exc)
            self.history.record("error", what=f"healing {step.describe()}", error=repr(exc))
            log.exception("healing %s failed", step.describe())
            self._heal_harder(name)
        self.history.record("fault", kind=step.kind, target=name, phase="end", detail=end_detail)
        self.steps_done.append({**asdict(step), "end": end_detail})
        log.info("fault end: %s %s", step.describe(), end_detail)

    def _heal(self, step: Step, detail: dict[str, Any], started: float) -> None:
        c, name = self.cluster, step.target
        m = c[name]
        t = time.monotonic()
        if step.kind == "kill_restart":
            c.restart(name)
            detail["restart_s"] = round(time.monotonic() - t, 2)
        elif step.kind == "pause":
            c.resume(name)
        elif step.kind == "kill_permanent":
            dead = m.address
            new = c.replace(name)
            assert new.name == step.replacement, (new.name, step.replacement)
            detail.update(replaced=name, by=new.name, new_address=new.address, start_s=round(time.monotonic() - t, 2))
            self.watches.append(self.watch_cls(c.zk_connect, c.zk_root, dead, self.history, started).start())
        elif step.kind == "zk_expire":
            if c.lab is not None:
                c.lab.heal(name)
            else:
                c.resume(name)
            # The broker learns of the expiry when it reconnects: wait a little for its log.
            wait_until = time.monotonic() + self.expiry_log_wait_s
            while time.monotonic() < wait_until and SESSION_LOST_LOG not in _log_since(m, self._log_offset):
                time.sleep(0.5)
            detail["broker_logged_session_lost"] = SESSION_LOST_LOG in _log_since(m, self._log_offset)
        elif step.kind == "disk_full":
            assert m.disk is not None
            m.disk.free()
        elif step.kind == "partition":
            assert c.lab is not None
            c.lab.heal(name)

    def _heal_harder(self, name: str) -> None:
        """A heal failed (a restart timed out …): try to bring ``name`` back once more."""
        try:
            m = self.cluster[name]
            if not m.gone and not m.process.alive:
                self.cluster.restart(name)
        except Exception as exc:  # noqa: BLE001 - recorded; the run goes on
            self.history.record("error", what=f"restarting {name} again", error=repr(exc))

    def finish(self, wait_qw_s: float = 90.0) -> None:
        """Wait (up to ``wait_qw_s``) for the pending Qw watches, then stop them."""
        deadline = time.monotonic() + wait_qw_s
        for w in self.watches:
            w.thread.join(max(0.0, deadline - time.monotonic()))
        for w in self.watches:
            w.stop()


def _log_size(member: Any) -> int:
    try:
        return int(member.process.log_path.stat().st_size)
    except OSError:
        return 0


def _log_since(member: Any, offset: int) -> str:
    """What ``member`` logged after ``offset`` (bytes)."""
    try:
        with member.process.log_path.open("rb") as f:
            f.seek(offset)
            return f.read(4 << 20).decode(errors="replace")
    except OSError:
        return ""
