"""The checker is itself tested: a clean history passes, and each injected fault (loss,
reordering, duplicates, an early delayed message, a DLQ counted twice or never, a late
re-replication) makes it fail in the right category and nowhere else.

Two histories: a small synthetic one built here, and one recorded by the workload
against a real cluster (``data/history-sample.jsonl``), whose defects are injected the
same way, so the rules are exercised on what the workload really writes.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from checker import CATEGORIES, SeqBits, bits_of, check
from history import History
from report import summary, write_report

SAMPLE = Path(__file__).parent / "data" / "history-sample.jsonl"
T = "persistent://public/default/c"


def _sub(sub, topic, kind, ordered, required=True):
    return {"type": "subscription", "sub": sub, "topic": topic, "kind": kind, "ordered": ordered, "required": required}


def synthetic() -> list[dict]:
    """Two keys on a topic with a Failover and a Key_Shared subscription and a reader;
    a Shared retry subscription with a poison (nack path) and a flaky (retry path)
    message; a delayed topic; a fault; a bookie re-replicated in time."""
    ev: list[dict] = [
        _sub("fo", f"{T}-fo", "failover", True), _sub("ks", f"{T}-fo", "key_shared", True),
        _sub("rd", f"{T}-fo", "reader", True), _sub("sh", f"{T}-sh", "shared_retry", False),
        _sub("dl", f"{T}-dl", "shared_delayed", False), _sub("dlq", f"{T}-sh-DLQ", "dlq", False, required=False),
    ]
    for seq in range(4):
        for key in ("a", "b"):
            ev.append({"type": "send_ok", "topic": f"{T}-fo", "key": key, "seq": seq, "id": f"1:{seq}:-1:{key}"})
    # seq 4 of key a failed to send (never delivered: a gap, allowed); seq 5 sent fine.
    ev.append({"type": "send_fail", "topic": f"{T}-fo", "key": "a", "seq": 4, "error": "Timeout"})
    ev.append({"type": "send_ok", "topic": f"{T}-fo", "key": "a", "seq": 5, "id": "1:5:-1:0"})
    for sub in ("fo", "ks", "rd"):
        for seq in (0, 1, 2, 3, 5):
            for key in ("a", "b"):
                if key == "b" and seq == 5:
                    continue
                ev.append({"type": "deliver", "sub": sub, "topic": f"{T}-fo", "key": key, "seq": seq,
                           "id": f"1:{seq}:-1:0", "rc": 0, "consumer": f"{sub}-0"})
    # A flagged redelivery (failover switch): fine.
    ev.append({"type": "deliver", "sub": "fo", "topic": f"{T}-fo", "key": "a", "seq": 3, "id": "1:3:-1:0", "rc": 1})
    # Shared with retry: poison p (nack path) -> DLQ; flaky f (retry path) -> acked; h healthy.
    sh = f"{T}-sh"
    ev += [
        {"type": "send_ok", "topic": sh, "key": "p", "seq": 0, "id": "2:0:-1:-1", "fail": "poison", "via": "nack"},
        {"type": "send_ok", "topic": sh, "key": "f", "seq": 0, "id": "2:1:-1:-1", "fail": "flaky", "via": "retry"},
        {"type": "send_ok", "topic": sh, "key": "h", "seq": 0, "id": "2:2:-1:-1"},
        {"type": "deliver", "sub": "sh", "topic": sh, "key": "p", "seq": 0, "id": "2:0:-1:-1", "rc": 0},
        {"type": "nack", "sub": "sh", "topic": sh, "key": "p", "seq": 0, "id": "2:0:-1:-1", "rc": 0, "fail": "poison"},
        {"type": "deliver", "sub": "sh", "topic": sh, "key": "p", "seq": 0, "id": "2:0:-1:-1", "rc": 1},
        {"type": "nack", "sub": "sh", "topic": sh, "key": "p", "seq": 0, "id": "2:0:-1:-1", "rc": 1, "fail": "poison"},
        {"type": "dlq", "sub": "dlq", "topic": sh, "key": "p", "seq": 0, "id": "9:0:-1:-1", "rc": 0},
        {"type": "deliver", "sub": "sh", "topic": sh, "key": "f", "seq": 0, "id": "2:1:-1:-1", "rc": 0},
        {"type": "reconsume", "sub": "sh", "topic": sh, "key": "f", "seq": 0, "id": "2:1:-1:-1", "retry": 0, "fail": "flaky"},
        {"type": "deliver", "sub": "sh", "topic": sh, "key": "f", "seq": 0, "id": "8:0:-1:-1", "rc": 0, "retry": 1},
        {"type": "ack", "sub": "sh", "topic": sh, "key": "f", "seq": 0, "id": "8:0:-1:-1", "retry": 1},
        {"type": "deliver", "sub": "sh", "topic": sh, "key": "h", "seq": 0, "id": "2:2:-1:-1", "rc": 0},
        {"type": "ack", "sub": "sh", "topic": sh, "key": "h", "seq": 0, "id": "2:2:-1:-1", "retry": 0},
    ]
    dl = f"{T}-dl"
    ev += [
        {"type": "send_ok", "topic": dl, "key": "d", "seq": 0, "id": "3:0:-1:-1", "deliver_at": 1_000_005_000},
        {"type": "deliver", "sub": "dl", "topic": dl, "key": "d", "seq": 0, "id": "3:0:-1:-1", "rc": 0,
         "deliver_at": 1_000_005_000, "wall": 1_000_005.03},
        # 40 ms early is within the clock tolerance (50 ms).
        {"type": "send_ok", "topic": dl, "key": "d", "seq": 1, "id": "3:1:-1:-1", "deliver_at": 1_000_006_000},
        {"type": "deliver", "sub": "dl", "topic": dl, "key": "d", "seq": 1, "id": "3:1:-1:-1", "rc": 0,
         "deliver_at": 1_000_006_000, "wall": 1_000_005.96},
        {"type": "fault", "kind": "kill", "target": "bookie-2", "phase": "start", "detail": "SIGKILL, for good"},
        {"type": "qw_restored", "bookie": "bookie-2", "seconds": 31.5, "ok": True},
    ]
    for i, e in enumerate(ev):
        e["t"] = i * 0.01
    return ev


def only(result, category: str, count: int = 1) -> None:
    """The result failed in ``category`` (``count`` times) and in no other."""
    assert not result.ok
    got = {c: getattr(result, c) for c in CATEGORIES if getattr(result, c)}
    assert got == {category: count}, (got, result.problems)
    assert all(p.startswith(f"{category}: ") for p in result.problems)


def where(events, **match) -> list[int]:
    return [i for i, e in enumerate(events) if all(e.get(k) == v for k, v in match.items())]


# -- the synthetic history ------------------------------------------------------------


def test_the_clean_synthetic_history_passes():
    result = check(synthetic())
    assert result.ok and result.problems == []
    assert (result.sent, result.acked, result.send_failed) == (15, 14, 1)
    assert result.failed_on_purpose == 2 and result.dead_lettered == 1
    assert result.faults == 1 and result.qw_restores == 1


def test_a_deleted_delivery_is_lost_on_that_subscription_only():
    ev = synthetic()
    del ev[where(ev, type="deliver", sub="ks", key="b", seq=2)[0]]
    result = check(ev)
    only(result, "lost")
    assert "sub ks" in result.problems[0] and "key b seq 2" in result.problems[0]


def test_a_lost_delayed_message_and_a_lost_reader_message_count():
    ev = synthetic()
    for i in sorted(where(ev, type="deliver", sub="dl", seq=1) + where(ev, type="deliver", sub="rd", key="a", seq=0), reverse=True):
        del ev[i]
    only(check(ev), "lost", 2)


def test_a_failed_send_never_delivered_is_not_lost():
    ev = synthetic()
    assert where(ev, type="send_fail") and not where(ev, type="deliver", key="a", seq=4)
    assert check(ev).ok


def test_a_failed_send_delivered_anyway_is_indeterminate_not_a_problem():
    ev = synthetic()
    i = where(ev, type="deliver", sub="fo", key="a", seq=5)[0]
    ev.insert(i, {**ev[i], "seq": 4, "id": "1:4:-1:0"})
    result = check(ev)
    assert result.ok and result.indeterminate_delivered == 1


@pytest.mark.parametrize("sub", ["fo", "ks", "rd"])
def test_swapped_first_deliveries_of_a_key_are_an_order_violation(sub):
    ev = synthetic()
    i, j = where(ev, type="deliver", sub=sub, key="a", seq=1)[0], where(ev, type="deliver", sub=sub, key="a", seq=2)[0]
    ev[i], ev[j] = ev[j], ev[i]
    result = check(ev)
    only(result, "order_violations")
    assert f"sub {sub}" in result.problems[0] and "seq 1" in result.problems[0]


def test_reordering_on_a_shared_subscription_is_allowed():
    ev = synthetic()
    sh = f"{T}-sh"
    ev += [
        {"type": "send_ok", "topic": sh, "key": "h", "seq": 1, "id": "2:3:-1:-1"},
        {"type": "send_ok", "topic": sh, "key": "h", "seq": 2, "id": "2:4:-1:-1"},
        {"type": "deliver", "sub": "sh", "topic": sh, "key": "h", "seq": 2, "id": "2:4:-1:-1", "rc": 0},
        {"type": "deliver", "sub": "sh", "topic": sh, "key": "h", "seq": 1, "id": "2:3:-1:-1", "rc": 0},
    ]
    for e in ev:
        e.setdefault("t", 1.0)
    assert check(ev).ok


def test_order_is_judged_on_first_deliveries_only():
    """A flagged redelivery of an earlier message after later ones (a failover switch)
    is not a violation: only each message's first delivery counts for order."""
    ev = synthetic()
    ev.append({"type": "deliver", "sub": "fo", "topic": f"{T}-fo", "key": "a", "seq": 0, "id": "1:0:-1:0", "rc": 2, "t": 9.0})
    assert check(ev).ok


def test_an_unsent_message_skipped_then_delivered_late_is_an_order_violation():
    ev = synthetic()
    i = where(ev, type="deliver", sub="fo", key="b", seq=1)[0]
    moved = ev.pop(i)
    ev.append({**moved, "t": 9.0})
    only(check(ev), "order_violations")


@pytest.mark.parametrize("sub", ["fo", "ks", "rd", "sh", "dl"])
def test_a_repeated_delivery_with_redelivery_count_0_is_an_unflagged_duplicate(sub):
    ev = synthetic()
    first = next(e for e in ev if e["type"] == "deliver" and e["sub"] == sub and e["rc"] == 0)
    ev.append({**first, "t": 9.0, "consumer": "other"})
    result = check(ev)
    only(result, "unflagged_duplicates")
    assert f"sub {sub}" in result.problems[0]


def test_a_repeated_delivery_flagged_as_a_redelivery_is_fine():
    ev = synthetic()
    first = next(e for e in ev if e["type"] == "deliver" and e["sub"] == "ks")
    ev.append({**first, "t": 9.0, "rc": 1})
    assert check(ev).ok


def test_the_same_key_and_seq_under_another_message_id_is_a_duplicate():
    """Deduplication is on: a resend stored twice has another id, same key and seq."""
    ev = synthetic()
    first = next(e for e in ev if e["type"] == "deliver" and e["sub"] == "fo")
    ev.append({**first, "id": "7:7:-1:0", "t": 9.0})
    only(check(ev), "unflagged_duplicates")


def test_two_retry_copies_of_one_retry_level_are_duplicates():
    ev = synthetic()
    copy_ = ev[where(ev, type="deliver", key="f", retry=1)[0]]
    ev.append({**copy_, "id": "8:1:-1:-1", "t": 9.0})
    only(check(ev), "unflagged_duplicates")


def test_two_dlq_copies_are_duplicates():
    ev = synthetic()
    dead = ev[where(ev, type="dlq")[0]]
    ev.append({**dead, "id": "9:1:-1:-1", "t": 9.0})
    only(check(ev), "unflagged_duplicates")


def test_an_early_delayed_message_is_caught():
    ev = synthetic()
    i = where(ev, type="deliver", sub="dl", seq=0)[0]
    ev[i]["wall"] = 1_000_004.9  # 100 ms before deliver_at
    result = check(ev)
    only(result, "early_delayed")
    assert "100 ms before" in result.problems[0]


def test_a_message_both_acknowledged_and_in_the_dlq():
    ev = synthetic()
    ev.append({"type": "ack", "sub": "sh", "topic": f"{T}-sh", "key": "p", "seq": 0, "id": "2:0:-1:-1", "retry": 0, "t": 9.0})
    result = check(ev)
    only(result, "dlq_both")
    assert "key p seq 0" in result.problems[0]


def test_a_failed_message_neither_acknowledged_nor_in_the_dlq():
    ev = synthetic()
    del ev[where(ev, type="dlq")[0]]
    only(check(ev), "dlq_neither")
    ev = synthetic()
    del ev[where(ev, type="ack", key="f")[0]]
    only(check(ev), "dlq_neither")


def test_a_flaky_message_in_the_dlq_instead_of_acked_is_unexpected():
    ev = synthetic()
    del ev[where(ev, type="ack", key="f")[0]]
    ev.append({"type": "dlq", "sub": "dlq", "topic": f"{T}-sh", "key": "f", "seq": 0, "id": "9:5:-1:-1", "rc": 0, "t": 9.0})
    only(check(ev), "dlq_unexpected")


def test_a_healthy_message_in_the_dlq_is_unexpected():
    ev = synthetic()
    ev.append({"type": "dlq", "sub": "dlq", "topic": f"{T}-sh", "key": "h", "seq": 0, "id": "9:6:-1:-1", "rc": 0, "t": 9.0})
    only(check(ev), "dlq_unexpected")


@pytest.mark.parametrize("restore", [{"seconds": 61.0, "ok": True}, {"seconds": 60.0, "ok": False}, {"seconds": None, "ok": False}])
def test_late_or_missing_re_replication_is_qw_late(restore):
    ev = synthetic()
    ev.append({"type": "qw_restored", "bookie": "bookie-3", "t": 99.0, **restore})
    result = check(ev)
    only(result, "qw_late")
    assert "bookie-3" in result.problems[0]


def test_a_delivery_of_something_never_sent_is_reported():
    ev = synthetic()
    ev.append({"type": "deliver", "sub": "fo", "topic": f"{T}-fo", "key": "zz", "seq": 0, "id": "5:5:-1:0", "rc": 0, "t": 9.0})
    only(check(ev), "unknown_deliveries")


def test_every_fault_at_once_counts_each_category():
    ev = synthetic()
    del ev[where(ev, type="deliver", sub="ks", key="b", seq=3)[0]]
    ev[where(ev, type="deliver", sub="dl", seq=0)[0]]["wall"] = 1_000_004.0
    del ev[where(ev, type="dlq")[0]]
    ev.append({"type": "qw_restored", "bookie": "bookie-1", "seconds": 75.0, "ok": True, "t": 50.0})
    result = check(ev)
    assert not result.ok
    got = {c: getattr(result, c) for c in CATEGORIES if getattr(result, c)}
    assert got == {"lost": 1, "early_delayed": 1, "dlq_neither": 1, "qw_late": 1}


# -- the history file ------------------------------------------------------------------


def test_history_round_trip_and_a_torn_last_line(tmp_path):
    path = tmp_path / "h.jsonl"
    with History(path) as h:
        h.record("send_ok", topic="t", key="k", seq=1, id="1:2:-1:-1")
        h.record("fault", kind="pause", target="broker-1", phase="start", detail=None)
    with path.open("a") as f:
        f.write('{"t": 3.0, "type": "deliv')  # the runner died mid-line
    events = History.load(path)
    assert [e["type"] for e in events] == ["history", "send_ok", "fault"]
    assert events[1]["seq"] == 1 and events[1]["t"] >= events[0]["t"] >= 0
    assert list(History.iter(path)) == events


def test_history_is_usable_from_threads(tmp_path):
    import threading

    path = tmp_path / "h.jsonl"
    h = History(path)
    threads = [threading.Thread(target=lambda i=i: [h.record("x", i=i, n=n) for n in range(500)]) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    h.close()
    h.record("after_close")  # ignored, not raised
    events = History.load(path)
    assert len(events) == 1 + 4 * 500
    ts = [e["t"] for e in events]
    assert ts == sorted(ts)


def test_seq_bits():
    b = SeqBits()
    assert not b.add(0) and not b.add(9) and b.add(9) and not b.add(1000)
    assert 9 in b and 8 not in b and 10**6 not in b and len(b) == 3
    assert list(bits_of(b.as_int())) == [0, 9, 1000]
    assert list(bits_of(0)) == [] and list(bits_of(0b1011)) == [0, 1, 3]


# -- the recorded history --------------------------------------------------------------


@pytest.fixture(scope="module")
def recorded() -> list[dict]:
    if not SAMPLE.exists():
        pytest.fail(f"{SAMPLE} is missing: record it with CHAOS_SAVE_SAMPLE={SAMPLE} (see test_workload.py)")
    return History.load(SAMPLE)


def test_the_recorded_history_passes(recorded):
    result = check(recorded)
    assert result.ok, result.problems[:20]
    assert result.acked > 500 and result.failed_on_purpose >= 5 and result.dead_lettered >= 2
    assert result.redelivered > 0


def _first(events, **match) -> int:
    return next(i for i, e in enumerate(events) if all(e.get(k) == v for k, v in match.items()))


@pytest.mark.parametrize("sub", ["fo-failover", "fo-reader", "ks-keyshared", "ks-failover", "sh-retry", "dl-delayed"])
def test_recorded_loss(recorded, sub):
    """Delete the only delivery of one message on one subscription: lost there."""
    times: dict[tuple[str, int], int] = {}
    for e in recorded:
        if e["type"] == "deliver" and e["sub"] == sub and not e.get("retry"):
            times[e["key"], e["seq"]] = times.get((e["key"], e["seq"]), 0) + 1
    failed = {(e["key"], e["seq"]) for e in recorded if e["type"] in ("nack", "reconsume")}
    once = [k for k, n in times.items() if n == 1 and k not in failed]  # a failed one is also dlq_neither
    key, seq = once[len(once) // 2]
    ev = copy.deepcopy(recorded)
    ev.pop(_first(ev, type="deliver", sub=sub, key=key, seq=seq))
    result = check(ev)
    only(result, "lost")
    assert f"sub {sub}" in result.problems[0] and f"key {key} seq {seq}:" in result.problems[0]


@pytest.mark.parametrize("sub", ["fo-failover", "ks-keyshared", "ks-failover", "fo-reader"])
def test_recorded_reordering(recorded, sub):
    ev = copy.deepcopy(recorded)
    firsts = [i for i, e in enumerate(ev) if e["type"] == "deliver" and e["sub"] == sub and e["rc"] == 0]
    key = ev[firsts[len(firsts) // 2]]["key"]
    a, b = [i for i in firsts if ev[i]["key"] == key][2:4]
    ev[a], ev[b] = ev[b], ev[a]
    only(check(ev), "order_violations")


@pytest.mark.parametrize("sub", ["fo-failover", "ks-keyshared", "ks-failover", "fo-reader", "sh-retry", "dl-delayed"])
def test_recorded_duplicates(recorded, sub):
    ev = copy.deepcopy(recorded)
    i = [i for i, e in enumerate(ev) if e["type"] == "deliver" and e["sub"] == sub and e["rc"] == 0][-1]
    ev.append({**ev[i], "t": ev[-1]["t"] + 1})
    only(check(ev), "unflagged_duplicates")


def test_recorded_early_delayed(recorded):
    ev = copy.deepcopy(recorded)
    i = _first(ev, type="deliver", sub="dl-delayed")
    ev[i]["wall"] = ev[i]["deliver_at"] / 1000 - 1.0
    only(check(ev), "early_delayed")


def test_recorded_dlq_both_and_neither(recorded):
    dead = next(e for e in recorded if e["type"] == "dlq")
    ev = copy.deepcopy(recorded)
    ev.append({"type": "ack", "sub": "sh-retry", "topic": dead["topic"], "key": dead["key"], "seq": dead["seq"],
               "id": "0:0:-1:-1", "retry": 0, "t": ev[-1]["t"]})
    only(check(ev), "dlq_both")
    ev = [e for e in copy.deepcopy(recorded) if not (e["type"] == "dlq" and e["key"] == dead["key"] and e["seq"] == dead["seq"])]
    only(check(ev), "dlq_neither")
    flaky = next(e for e in recorded if e["type"] in ("nack", "reconsume") and e["fail"] == "flaky")
    ev = [e for e in copy.deepcopy(recorded)
          if not (e["type"] == "ack" and e["key"] == flaky["key"] and e["seq"] == flaky["seq"])]
    only(check(ev), "dlq_neither")


def test_recorded_qw_late(recorded):
    ev = copy.deepcopy(recorded) + [{"type": "qw_restored", "bookie": "b9", "seconds": 60.5, "ok": True, "t": 1.0}]
    only(check(ev), "qw_late")


def test_the_report_and_summary(recorded, tmp_path):
    result = check(recorded)
    json_path, png_path = write_report(iter(recorded), result, tmp_path, seed=42, settings={"duration": 20, "rate": 200})
    doc = json.loads(json_path.read_text())
    assert doc["seed"] == 42 and doc["ok"] is True and doc["replay"] == "make chaos SEED=42 DURATION=20"
    assert sum(doc["acked_per_s"]) == result.acked and doc["counts"]["lost"] == 0
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = copy.deepcopy(recorded)
    bad.pop(_first(bad, type="dlq"))
    text = summary(check(bad), 42, duration=20)
    assert "seed 42: FAIL" in text and "dlq_neither 1" in text and "make chaos SEED=42 DURATION=20" in text


def test_faults_in_the_report(tmp_path):
    ev = synthetic() + [
        {"type": "fault", "kind": "kill", "target": "bookie-2", "phase": "end", "t": 5.0},
        {"type": "fault", "kind": "partition", "target": "broker-1", "phase": "start", "t": 6.0, "detail": {"from": "zk"}},
    ]
    result = check(ev)
    json_path, png_path = write_report(ev, result, tmp_path, seed=7, settings={})
    doc = json.loads(json_path.read_text())
    assert [(f["kind"], f["end"]) for f in doc["faults"]] == [("kill", 5.0), ("partition", None)]
    assert doc["qw_restored"][0]["bookie"] == "bookie-2" and png_path.exists()
    assert "make chaos SEED=7" in summary(result, 7)


def test_the_workloads_accounting_does_not_reopen_a_message_acknowledged_before_a_stale_copy_fails(tmp_path):
    """One consumer acknowledges a redelivery (count 1) of a message planned to fail once;
    the other then fails its stale copy (count 0) and the broker refuses that (the message
    is acknowledged). The drain must not wait for an outcome that already happened (a
    1-hour run waited its whole drain for one such message)."""
    from history import History
    from workload import Workload, fail_plan

    seed = 35129
    key, seq = next((f"k{i:02d}", s) for i in range(16) for s in range(10_000) if fail_plan(seed, f"k{i:02d}", s)[0] == "flaky")
    history = History(tmp_path / "h.jsonl")
    try:
        w = Workload("magnetar://127.0.0.1:1", history, pulsar_url="pulsar://127.0.0.1:1", seed=seed, topic_prefix="t")
        w._settle(key, seq)  # the acknowledged redelivery, seen first
        assert (key, seq) in w._settled
        other = next((f"k{i:02d}", s) for i in range(16) for s in range(10_000) if fail_plan(seed, f"k{i:02d}", s)[0] is None)
        w._settle(*other)  # a message never planned to fail is not remembered
        assert other not in w._settled
    finally:
        history.close()
