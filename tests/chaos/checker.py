"""The chaos checker: judges a recorded history (history.py) the way Jepsen's checkers do.

It reads only the history, never the cluster, and makes one pass over it, so a run of
millions of events is checked with little memory (sequence numbers go into bitmaps).
The rules, and why each is what it is, are in README.md; in short:

- **lost**: a send the broker acknowledged (``send_ok``) with no delivery on a
  subscription that must get every message of its topic (``required``).
- **order_violations**: on an ``ordered`` subscription (Failover, Key_Shared, the
  reader), the first deliveries of one key do not carry increasing sequence numbers.
- **unflagged_duplicates**: one message delivered twice on a subscription with
  redelivery count 0 both times (deduplication is on for every producer, so a key +
  sequence number is one message); two DLQ copies of one message.
- **early_delayed**: a delayed message delivered before its ``deliver_at`` (wall clock,
  tolerance :data:`DELAY_TOLERANCE_S`).
- **dlq_both / dlq_neither**: a message the consumer failed on purpose must end either
  in the dead letter topic or acknowledged, never both, never neither;
  **dlq_unexpected**: it ended on the other side than the workload meant (a poison
  message acknowledged, a flaky one dead-lettered), or a message never failed on
  purpose reached the DLQ.
- **qw_late**: a permanently lost bookie's ledgers not back at Qw within 60 s.
- **unknown_deliveries**: a delivery of a key and sequence number nobody sent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

DELAY_TOLERANCE_S = 0.05
"""Producer and consumer read the same host's clock; this covers rounding to ms."""
QW_DEADLINE_S = 60.0
MAX_PROBLEMS = 10_000
"""Problems kept as text (the counts are always exact)."""

CATEGORIES = (
    "lost",
    "order_violations",
    "unflagged_duplicates",
    "early_delayed",
    "dlq_both",
    "dlq_neither",
    "dlq_unexpected",
    "qw_late",
    "unknown_deliveries",
)


class SeqBits:
    """A set of small non-negative ints (sequence numbers) as a bitmap."""

    __slots__ = ("_b",)

    def __init__(self) -> None:
        self._b = bytearray()

    def add(self, i: int) -> bool:
        """Add ``i``; True when it was there already."""
        byte, bit = divmod(i, 8)
        if byte >= len(self._b):
            self._b.extend(bytes(byte + 1 - len(self._b) + len(self._b) // 2))
        old = self._b[byte] >> bit & 1
        self._b[byte] |= 1 << bit
        return bool(old)

    def __contains__(self, i: int) -> bool:
        byte, bit = divmod(i, 8)
        return byte < len(self._b) and bool(self._b[byte] >> bit & 1)

    def as_int(self) -> int:
        return int.from_bytes(self._b, "little")

    def __len__(self) -> int:
        return self.as_int().bit_count()


def bits_of(n: int) -> Iterator[int]:
    """The positions of the set bits of ``n``, lowest first."""
    i = 0
    while n:
        low = (n & -n).bit_length() - 1
        i += low
        yield i
        n >>= low + 1
        i += 1


@dataclass
class CheckResult:
    ok: bool = True
    problems: list[str] = field(default_factory=list)
    lost: int = 0
    order_violations: int = 0
    unflagged_duplicates: int = 0
    early_delayed: int = 0
    dlq_both: int = 0
    dlq_neither: int = 0
    dlq_unexpected: int = 0
    qw_late: int = 0
    unknown_deliveries: int = 0
    sent: int = 0
    acked: int = 0
    send_failed: int = 0
    indeterminate_delivered: int = 0
    delivered: int = 0
    redelivered: int = 0
    failed_on_purpose: int = 0
    dead_lettered: int = 0
    faults: int = 0
    qw_restores: int = 0

    def counts(self) -> dict[str, int]:
        """Every count (problem categories and totals) by name."""
        return {k: v for k, v in vars(self).items() if isinstance(v, int) and not isinstance(v, bool)}

    def problem(self, category: str, text: str) -> None:
        setattr(self, category, getattr(self, category) + 1)
        self.ok = False
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(f"{category}: {text}")


@dataclass
class _Sub:
    """What one subscription (or the reader) has seen."""

    topic: str = ""
    kind: str = ""
    ordered: bool = False
    required: bool = False
    delivered: dict[str, SeqBits] = field(default_factory=lambda: defaultdict(SeqBits))  # key → seqs (originals)
    first_zero: dict[tuple[str, int], SeqBits] = field(default_factory=lambda: defaultdict(SeqBits))  # (key, retry)
    last_first: dict[str, tuple[int, str]] = field(default_factory=dict)  # key → (seq, message id) of its last first delivery
    disorder: list[str] = field(default_factory=list)


@dataclass
class _Failed:
    """A message the retry subscription's consumer failed on purpose."""

    topic: str
    key: str
    seq: int
    meant: str  # "poison" (must reach the DLQ) or "flaky" (must be acknowledged)
    acked: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)


def check(events: Iterable[dict[str, Any]]) -> CheckResult:
    """Judge a history (a list of events, or ``History.iter(path)`` for a long run)."""
    r = CheckResult()
    subs: dict[str, _Sub] = defaultdict(_Sub)
    sent_ok: dict[tuple[str, str], SeqBits] = defaultdict(SeqBits)  # (topic, key) → seqs
    sent_fail: dict[tuple[str, str], SeqBits] = defaultdict(SeqBits)
    ok_ids: dict[tuple[str, str, int], str] = {}  # only where a problem may need the id: see below
    failing: dict[tuple[str, str, int], str] = {}  # what the producer meant for failed-on-purpose sends
    failed: dict[tuple[str, str, int], _Failed] = {}
    acks: dict[tuple[str, str, int], list[str]] = defaultdict(list)
    dead: dict[tuple[str, str, int], list[str]] = defaultdict(list)
    dead_zero: dict[tuple[str, str, int], list[str]] = defaultdict(list)  # ids delivered with count 0

    for ev in events:
        kind = ev.get("type")
        if kind == "subscription":
            s = subs[ev["sub"]]
            s.topic, s.kind = ev["topic"], ev.get("kind", "")
            s.ordered, s.required = bool(ev.get("ordered")), bool(ev.get("required"))
        elif kind == "send_ok":
            r.sent += 1
            r.acked += 1
            sent_ok[ev["topic"], ev["key"]].add(ev["seq"])
            if ev.get("fail"):
                failing[ev["topic"], ev["key"], ev["seq"]] = ev["fail"]
            if ev.get("deliver_at") is not None or ev.get("fail"):
                ok_ids[ev["topic"], ev["key"], ev["seq"]] = ev.get("id", "?")
        elif kind == "send_fail":
            r.sent += 1
            r.send_failed += 1
            sent_fail[ev["topic"], ev["key"]].add(ev["seq"])
            if ev.get("fail"):
                failing[ev["topic"], ev["key"], ev["seq"]] = ev["fail"]
        elif kind == "deliver":
            _deliver(r, subs[ev["sub"]], ev)
        elif kind in ("nack", "reconsume"):
            k = (ev["topic"], ev["key"], ev["seq"])
            if k not in failed:
                failed[k] = _Failed(*k, meant=ev.get("fail") or failing.get(k, "?"))
        elif kind == "ack" and subs[ev["sub"]].kind == "shared_retry":
            acks[ev["topic"], ev["key"], ev["seq"]].append(f"{ev.get('id')} (retry {ev.get('retry', 0)})")
        elif kind == "dlq":
            k = (ev["topic"], ev["key"], ev["seq"])
            dead[k].append(ev.get("id", "?"))
            if ev.get("rc", 0) == 0:
                dead_zero[k].append(ev.get("id", "?"))
        elif kind == "qw_restored":
            r.qw_restores += 1
            secs = ev.get("seconds")
            if not ev.get("ok", False) or secs is None or secs > QW_DEADLINE_S:
                r.problem("qw_late", f"bookie {ev.get('bookie')}: replication back to Qw "
                          f"{'not done' if not ev.get('ok') else 'took'} after {secs} s (limit {QW_DEADLINE_S:.0f} s, t={ev['t']:.1f})")
        elif kind == "fault" and ev.get("phase", "start") == "start":
            r.faults += 1

    _judge_subscriptions(r, subs, sent_ok, sent_fail)
    _judge_dead_letters(r, failing, failed, acks, dead, dead_zero, ok_ids)
    return r


def _deliver(r: CheckResult, s: _Sub, ev: dict[str, Any]) -> None:
    r.delivered += 1
    key, seq, retry, rc = ev["key"], ev["seq"], ev.get("retry", 0), ev.get("rc", 0)
    mid = ev.get("id", "?")
    if rc:
        r.redelivered += 1
    where = f"sub {ev['sub']} topic {ev['topic']} key {key} seq {seq}"
    if retry == 0:
        first = not s.delivered[key].add(seq)
        if first:
            last = s.last_first.get(key)
            if last is not None and seq <= last[0]:
                s.disorder.append(f"{where} (id {mid}, t={ev['t']:.3f}) first delivered after seq {last[0]} (id {last[1]})")
            if last is None or seq > last[0]:
                s.last_first[key] = (seq, mid)
    if rc == 0 and s.first_zero[key, retry].add(seq):
        copy = f" retry copy {retry}" if retry else ""
        r.problem("unflagged_duplicates", f"{where}{copy} delivered again with redelivery count 0 (id {mid}, t={ev['t']:.3f}, consumer {ev.get('consumer')})")
    deliver_at = ev.get("deliver_at")
    if deliver_at is not None and ev.get("wall") is not None:
        early = deliver_at / 1000.0 - ev["wall"]
        if early > DELAY_TOLERANCE_S:
            r.problem("early_delayed", f"{where} (id {mid}) delivered {early * 1000:.0f} ms before its deliver_at {deliver_at}")


def _judge_subscriptions(
    r: CheckResult, subs: dict[str, _Sub],
    sent_ok: dict[tuple[str, str], SeqBits], sent_fail: dict[tuple[str, str], SeqBits],
) -> None:
    for name, s in sorted(subs.items()):
        if s.ordered:
            for text in s.disorder:
                r.problem("order_violations", text)
        for key, seqs in s.delivered.items():
            sent = sent_ok[s.topic, key].as_int() | sent_fail[s.topic, key].as_int() if s.topic else 0
            for seq in bits_of(seqs.as_int() & ~sent):
                r.problem("unknown_deliveries", f"sub {name} topic {s.topic} key {key} seq {seq} delivered but never sent")
            indeterminate = seqs.as_int() & sent_fail[s.topic, key].as_int() & ~sent_ok[s.topic, key].as_int()
            r.indeterminate_delivered += indeterminate.bit_count()
        if not s.required:
            continue
        for (topic, key), ok in sorted(sent_ok.items()):
            if topic != s.topic:
                continue
            missing = ok.as_int() & ~s.delivered[key].as_int() if key in s.delivered else ok.as_int()
            for seq in bits_of(missing):
                r.problem("lost", f"sub {name} ({s.kind}) topic {topic} key {key} seq {seq}: send acknowledged, never delivered")


def _judge_dead_letters(
    r: CheckResult, failing: dict[tuple[str, str, int], str], failed: dict[tuple[str, str, int], _Failed],
    acks: dict[tuple[str, str, int], list[str]], dead: dict[tuple[str, str, int], list[str]],
    dead_zero: dict[tuple[str, str, int], list[str]], ok_ids: dict[tuple[str, str, int], str],
) -> None:
    r.failed_on_purpose = len(failed)
    r.dead_lettered = len(dead)
    for k, f in sorted(failed.items()):
        f.acked, f.dead = acks.get(k, []), dead.get(k, [])
        what = f"topic {k[0]} key {k[1]} seq {k[2]} (id {ok_ids.get(k, '?')}, {f.meant})"
        if f.acked and f.dead:
            r.problem("dlq_both", f"{what}: acknowledged as {f.acked[:3]} and in the DLQ as {f.dead[:3]}")
        elif not f.acked and not f.dead:
            r.problem("dlq_neither", f"{what}: failed on purpose, then neither acknowledged nor in the DLQ")
        elif f.meant == "poison" and f.acked:
            r.problem("dlq_unexpected", f"{what}: a message failed every time was acknowledged ({f.acked[:3]})")
        elif f.meant == "flaky" and f.dead:
            r.problem("dlq_unexpected", f"{what}: a message failed once only went to the DLQ ({f.dead[:3]})")
    for k, ids in sorted(dead.items()):
        if k not in failed:
            r.problem("dlq_unexpected", f"topic {k[0]} key {k[1]} seq {k[2]} in the DLQ ({ids[:3]}) but never failed by the consumer")
        if len(dead_zero[k]) > 1:  # two copies stored, or one delivered twice unflagged
            r.problem("unflagged_duplicates", f"topic {k[0]} key {k[1]} seq {k[2]}: DLQ deliveries with redelivery count 0: {dead_zero[k][:3]}")
