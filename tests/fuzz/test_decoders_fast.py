"""The fast fuzz run of every decoder (issue 20): ``EXAMPLES`` inputs per target from
:mod:`fastfuzz`, checked by the oracles of the hypothesis tests (:mod:`oracles`).

``make test`` runs ``MAGNETAR_FUZZ_EXAMPLES`` (100) inputs per target with a fixed seed; ``make fuzz`` 100,000 with a
random one (printed, with each target's rate; replay with ``MAGNETAR_FUZZ_SEED``). Each
target mixes random bytes or text, mutated valid encodings (a corpus built once with the
real encoders) and round trips of random valid values.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import oracles
import pytest
from fastfuzz import I32, I64, REPORTS, U64, Gen, Input, run, scratch_dir
from fuzzsettings import LONG

from magnetar.bookie import cookie as cookies
from magnetar.bookie.entrylog import EntryLogger
from magnetar.bookie.index import LedgerIndex, LedgerRecord, Location, entry_key, pack_location
from magnetar.bookie.lastmark import JournalPosition
from magnetar.bookie.record import BODY_HEADER_SIZE, PREFIX, Record, decode
from magnetar.broker.dedup import Snapshot as DedupSnapshot
from magnetar.broker.dispatch import delaybuckets
from magnetar.common import tokens
from magnetar.common.message_id import MessageId
from magnetar.common.names import MAX_PARTITION_INDEX
from magnetar.gateway.websocket import ids as ws_ids
from magnetar.managedledger.position import Position
from magnetar.metadata import codec
from magnetar.proto.v1 import broker_pb2 as pb

CORPUS = 64
"""Valid encodings per target's corpus."""


@pytest.fixture(autouse=True)
def _show_rates(capsys: pytest.CaptureFixture[str]) -> Iterator[None]:
    """In a long run, each target's rate and the seed go to the terminal (past the capture)."""
    yield
    if LONG:
        with capsys.disabled():
            for line in REPORTS:
                print(f"\n{line}")
    REPORTS.clear()


@pytest.fixture
def scratch() -> Iterator[Path]:
    with scratch_dir() as directory:
        yield directory


def _corpus(g: Gen, make: Callable[[], bytes]) -> list[bytes]:
    return [make() for _ in range(CORPUS)]


# -- message ids -------------------------------------------------------------------------------
def test_message_id_bytes() -> None:
    g = Gen("corpus:message_id_bytes")
    corpus = [MessageId.earliest.serialize(), MessageId.latest.serialize(), *_corpus(g, lambda: g.message_id().serialize())]

    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.25:
            return oracles.message_id_round_trip, (g.message_id(),)
        if x < 0.5:
            return oracles.message_id_bytes, (g.raw(40) if g.chance(0.5) else g.randbytes(24),)
        return oracles.message_id_bytes, (g.pick_mutated(corpus),)

    run("message_id_bytes", inputs)


def test_message_id_text() -> None:
    g = Gen("corpus:message_id_text")
    corpus = [b"earliest", b"latest", *_corpus(g, lambda: str(g.message_id()).encode())]

    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.1:
            return oracles.message_id_round_trip, (g.message_id(),)
        if x < 0.35:
            return oracles.message_id_text, (g.text(60),)
        if x < 0.6:
            return oracles.message_id_text, (g.text(60, "-0123456789:elatsr"),)
        if x < 0.61:
            return oracles.message_id_text, ("1:" + "9" * g.randint(4000, 6000),)
        return oracles.message_id_text, (g.pick_mutated(corpus).decode("utf-8", "replace"),)

    run("message_id_text", inputs)


def test_message_id_proto() -> None:
    def inputs(g: Gen) -> Input:
        return oracles.message_id_proto, (g.integer(*I64), g.integer(*I64), g.integer(*I32), g.integer(*I32))

    run("message_id_proto", inputs)


# -- the WebSocket API's message ids ---------------------------------------------------------------
def test_websocket_message_id_bytes() -> None:
    g = Gen("corpus:websocket_message_id_bytes")
    corpus = _corpus(g, lambda: ws_ids.to_bytes(g.message_id()))

    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.2:
            return oracles.ws_id_round_trip, (g.message_id(),)
        if x < 0.5:
            return oracles.ws_id_bytes, (g.raw(64),)
        return oracles.ws_id_bytes, (g.pick_mutated(corpus),)

    run("websocket_message_id_bytes", inputs)


B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


def test_websocket_message_id_text() -> None:
    g = Gen("corpus:websocket_message_id_text")
    corpus = _corpus(g, lambda: ws_ids.encode(g.message_id()).encode())

    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.1:
            return oracles.ws_id_round_trip, (g.message_id(),)
        if x < 0.3:
            return oracles.ws_id_text, (g.text(80),)
        if x < 0.5:
            return oracles.ws_id_text, (g.text(80, B64),)
        if x < 0.51:
            return oracles.ws_id_text, ("A" * g.randint(1000, 3000),)
        return oracles.ws_id_text, (g.pick_mutated(corpus).decode("utf-8", "replace"),)

    run("websocket_message_id_text", inputs)


# -- masks -----------------------------------------------------------------------------------------
def test_masks() -> None:
    def inputs(g: Gen) -> Input:
        if g.chance(0.5):
            n = g.randint(0, 300)
            return oracles.mask_round_trip, (n, g.r.getrandbits(n) if g.chance(0.8) else (1 << n) - 1)
        return oracles.mask_bytes, (g.raw(48),)

    run("masks", inputs)


# -- topic and namespace names -----------------------------------------------------------------------
SEGMENT_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=:."
LOCAL_CHARS = "".join(c for c in map(chr, range(0x20, 0x7F)) if c != "/") + "éß中٣Ωñ\u00a0\u2028"


def _segment(g: Gen) -> str:
    while True:
        s = g.text(40, SEGMENT_CHARS, min_size=1)
        if s not in (".", ".."):
            return s


def _local_name(g: Gen) -> str:
    while True:
        s = g.text(60, LOCAL_CHARS, min_size=1)
        if s == s.strip() and s not in (".", ".."):
            return s


def _topic_text(g: Gen) -> str:
    if g.chance(0.3):
        return g.text(80)
    parts = []
    for _ in range(g.randint(1, 5)):
        k = g.randrange(3)
        parts.append(_segment(g) if k == 0 else g.text(12) if k == 1 else g.choice(["", ".", "..", " x", "t-partition-7", "t-partition-01"]))
    return g.choice(["", "persistent://", "non-persistent://", "http://", "://"]) + "/".join(parts)


def test_topic_names() -> None:
    g = Gen("corpus:topic_names")
    corpus = _corpus(g, lambda: f"persistent://{_segment(g)}/{_segment(g)}/{_local_name(g)}".encode())
    corpus.append(b"persistent://a/b/t-partition-2147483648")

    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.15:
            return oracles.topic_round_trip, (_segment(g), _segment(g), _local_name(g))
        if x < 0.3:
            index = g.integer(0, MAX_PARTITION_INDEX)
            return oracles.partition_round_trip, (_segment(g), _segment(g), _local_name(g), index)
        if x < 0.65:
            return oracles.topic_text, (_topic_text(g),)
        return oracles.topic_text, (g.pick_mutated(corpus).decode("utf-8", "replace"),)

    run("topic_names", inputs)


def test_namespace_names() -> None:
    def inputs(g: Gen) -> Input:
        if g.chance(0.4):
            return oracles.namespace_text, (g.text(40),)
        return oracles.namespace_text, ("/".join(_segment(g) if g.chance(0.6) else g.text(8) for _ in range(g.randint(0, 3))),)

    run("namespace_names", inputs)


# -- client batches ------------------------------------------------------------------------------------
def test_client_batches() -> None:
    g = Gen("corpus:client_batches")
    corpus = _corpus(
        g, lambda: pb.EntryBatch(producer_name="p", messages=[g.single_message() for _ in range(g.randint(0, 3))]).SerializeToString(),
    )

    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.15:
            messages = [g.single_message() for _ in range(g.randint(1, 8))]
            return oracles.client_batch_round_trip, (messages, g.chance(0.5), g.text(20))
        if x < 0.45:
            return oracles.client_entry, (g.raw(200),)
        if x < 0.47:
            return oracles.client_entry, (g.choice([b"\x0a", b"\x80", b"\x2a", b"\x12"]) * g.randint(1, 300),)
        return oracles.client_entry, (g.pick_mutated(corpus),)

    run("client_batches", inputs)


# -- the entry record ---------------------------------------------------------------------------------
def test_entry_record() -> None:
    g = Gen("corpus:entry_record")
    corpus = _corpus(g, lambda: oracles.encode_record(g.record()))

    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.15:
            return oracles.record_round_trip, (g.record(), g.raw(40), g.raw(40))
        if x < 0.3:
            rec = g.record()
            n = len(oracles.encode_record(rec))
            return oracles.record_torn_or_flipped, (rec, g.randrange(n), g.randrange(n), g.randrange(8))
        if x < 0.5:
            buf = g.raw(200)
            return oracles.record_decode, (buf, g.randint(0, len(buf) + 10))
        if x < 0.55:
            return oracles.record_decode, (g.raw(PREFIX.size + BODY_HEADER_SIZE - 1), 0)
        return oracles.record_decode, (g.pick_mutated(corpus), 0)

    run("entry_record", inputs)


# -- journal replay ----------------------------------------------------------------------------------------
def test_journal_replay(scratch: Path) -> None:
    g = Gen("corpus:journal_replay")
    corpus = [oracles.encode_record(g.record(100)) for _ in range(CORPUS)]
    (scratch / "garbage.jnl").write_bytes(b"not a journal")  # not a hex file id: skipped
    written = [0]  # how many journal files the last input left

    def replay_files(contents: list[bytes]) -> None:
        for i, data in enumerate(contents):
            oracles.journal_file(scratch, i + 1).write_bytes(data)
        for i in range(len(contents), written[0]):
            oracles.journal_file(scratch, i + 1).unlink()
        written[0] = len(contents)
        oracles.journal_replay(scratch, contents)

    def inputs(g: Gen) -> Input:
        contents = []
        for _ in range(g.randint(1, 3)):
            body = b"".join(g.choice(corpus) for _ in range(g.randint(0, 5)))
            x = g.random()
            if x < 0.3:
                body += g.raw(60)
            elif x < 0.8 and body:
                body = g.mutate(body)
            elif x < 0.85:
                body = g.raw(200)
            contents.append(body)
        return replay_files, (contents,)

    run("journal_replay", inputs)


# -- the entry log -------------------------------------------------------------------------------------
def test_entry_log(scratch: Path) -> None:
    """Sessions of up to 50 inputs share a log (a new one, of a random roll size, after
    them); each input appends 1-4 records, reads each back at its location and then reads
    at a wrong place or length, which is refused or gives one of the session's records."""
    state: dict[str, Any] = {"log": None, "left": 0, "recs": [], "locations": [], "n": 0}

    def new_log(g: Gen) -> None:
        if state["log"] is not None:
            state["log"].close()
        state["n"] += 1
        state["log"] = EntryLogger(scratch / str(state["n"]), g.randint(200, 2000))
        state["log"].open()
        state["left"], state["recs"], state["locations"] = g.randint(1, 50), [], []

    def append_and_read(recs: list[Record], pick: int, shift: int, length: int) -> None:
        log = state["log"]
        encoded = [oracles.encode_record(r) for r in recs]
        locations = log.append_many(encoded)
        log.sync()
        for (log_id, offset), rec, enc in zip(locations, recs, encoded, strict=True):
            assert decode(log.read(log_id, offset, len(enc))) == (rec, len(enc))
        state["recs"] += recs
        state["locations"] += locations
        log_id, offset = state["locations"][pick % len(state["locations"])]
        oracles.entry_log_read(log.read(log_id, max(0, offset + shift), length), state["recs"])

    def inputs(g: Gen) -> Input:
        if state["left"] == 0:
            new_log(g)
        state["left"] -= 1
        recs = [g.record(150) for _ in range(g.randint(1, 4))]
        return append_and_read, (recs, g.randrange(1 << 30), g.randint(-40, 40), g.randint(0, 400))

    try:
        run("entry_log", inputs)
    finally:
        if state["log"] is not None:
            state["log"].close()


# -- the index --------------------------------------------------------------------------------------------
def test_index(scratch: Path) -> None:
    """Sessions of up to 200 inputs share an index, checked against a model (dicts): each
    input is one flush (locations, ledger states, log lists) or a ledger's deletion."""
    state: dict[str, Any] = {"index": None, "left": 0, "n": 0}
    model: dict[str, Any] = {}

    def new_index(g: Gen) -> None:
        if state["index"] is not None:
            state["index"].close()
        state["n"] += 1
        state["index"] = LedgerIndex(scratch / str(state["n"]), 1 << 22)
        state["left"] = g.randint(1, 200)
        model.update(entries={}, ledgers={}, logs={}, deleted=set())

    def ledger_id(g: Gen) -> int:
        return g.randint(0, 5) if g.chance(0.7) else g.integer(*U64)

    def flush(locations: dict[tuple[int, int], Location], ledgers: dict[int, LedgerRecord], logs: dict[int, set[int]],
              probes: list[tuple[int, int]]) -> None:  # fmt: skip
        index = state["index"]
        index.commit_flush(sorted((entry_key(lid, e), pack_location(*loc)) for (lid, e), loc in locations.items()), ledgers, logs)
        model["entries"].update(locations)
        model["ledgers"].update(ledgers)
        model["logs"].update(logs)
        check(probes + list(locations))

    def delete(victim: int, probes: list[tuple[int, int]]) -> None:
        state["index"].delete_ledger(victim)
        model["entries"] = {k: v for k, v in model["entries"].items() if k[0] != victim}
        model["ledgers"].pop(victim, None)
        model["deleted"].add(victim)
        check(probes)

    def check(probes: list[tuple[int, int]]) -> None:
        index = state["index"]
        assert index.load_ledgers() == model["ledgers"]
        assert index.load_logs() == model["logs"]
        assert index.load_deleted() == model["deleted"]
        for lid, e in probes:
            loc = model["entries"].get((lid, e))
            assert index.get_many(lid, [e]) == ({} if loc is None else {e: loc})

    def inputs(g: Gen) -> Input:
        if state["left"] == 0:
            new_index(g)
        state["left"] -= 1
        probes = [(ledger_id(g), g.randint(0, 5)) for _ in range(3)]
        if g.chance(0.1):
            return delete, (ledger_id(g), probes)
        locations = {
            (ledger_id(g), g.randint(0, 5) if g.chance(0.7) else g.integer(*U64)):
                Location(g.integer(0, 2**32 - 1), g.integer(*U64), g.integer(0, 2**32 - 1))
            for _ in range(g.randint(0, 6))
        }
        ledgers = {ledger_id(g): LedgerRecord(g.chance(0.5), g.integer(*I64), g.integer(*I64)) for _ in range(g.randint(0, 3))}
        logs = {g.integer(0, 2**32 - 1) if g.chance(0.3) else g.randint(0, 5): {g.integer(*U64) for _ in range(g.randint(0, 10))}
                for _ in range(g.randint(0, 2))}  # fmt: skip
        return flush, (locations, ledgers, logs, probes)

    try:
        run("index", inputs)
    finally:
        if state["index"] is not None:
            state["index"].close()


# -- the LastLogMark -------------------------------------------------------------------------------------
def _journal_position(g: Gen) -> JournalPosition:
    return JournalPosition(g.integer(0, 2**64 - 1), g.integer(1, 2**64 - 1))


def test_lastmark(scratch: Path) -> None:
    g = Gen("corpus:lastmark")
    corpus = [oracles.lastmark_bytes(_journal_position(g), scratch) for _ in range(CORPUS)]

    def flipped(data: bytes, i: int, bit: int) -> None:
        raw = bytearray(data)
        raw[i % len(raw)] ^= 1 << bit
        assert oracles.read_lastmark(bytes(raw), scratch) is None

    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.05:
            return oracles.lastmark_round_trip, (_journal_position(g), _journal_position(g), scratch)
        if x < 0.25:
            return flipped, (g.choice(corpus), g.randrange(1 << 10), g.randrange(8))
        if x < 0.5:
            return oracles.lastmark_file, (g.raw(40), scratch)
        return oracles.lastmark_file, (g.pick_mutated(corpus), scratch)

    run("lastmark", inputs)


# -- the cookie ----------------------------------------------------------------------------------------------
COOKIE_KEYS = ["bookie_id", "data_dir", "journal_dir", "instance_id", "layout_version", "created", "x"]


def test_cookie(scratch: Path) -> None:
    g = Gen("corpus:cookie")
    corpus = _corpus(g, lambda: json.dumps(cookies.asdict(g.cookie())).encode())

    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.05:
            return oracles.cookie_round_trip, (g.cookie(), scratch)
        if x < 0.25:
            return oracles.cookie_file, (g.raw(80), scratch)
        if x < 0.35:
            return oracles.cookie_file, (g.choice(corpus), scratch)
        if x < 0.55:
            doc = {g.choice(COOKIE_KEYS): g.json_value(12) for _ in range(g.randint(0, 7))}
            return oracles.cookie_file, (json.dumps(doc).encode(), scratch)
        if x < 0.57:
            return oracles.cookie_file, (g.hostile_json(), scratch)
        return oracles.cookie_file, (g.pick_mutated(corpus), scratch)

    run("cookie", inputs)


# -- range sets ---------------------------------------------------------------------------------------------
def test_range_set() -> None:
    def position(g: Gen) -> Position:
        return Position(g.randint(0, 4), g.randint(0, oracles.ENTRIES_PER_LEDGER - 1))

    def inputs(g: Gen) -> Input:
        ops: list[oracles.RangeOp] = []
        for _ in range(g.size(30)):
            k = g.randrange(3)
            ops.append(("add", position(g), position(g)) if k == 0 else ("remove_through", position(g), None) if k == 1 else ("pop_first", None, None))
        return oracles.range_set_ops, (ops, position(g))

    run("range_set", inputs)


# -- the cursor document --------------------------------------------------------------------------------
CURSOR_KEYS = ["mark_delete", "individually_acked", "batch_acks", "redelivery_counts", "properties", "read_position"]


def test_cursor_document() -> None:
    g = Gen("corpus:cursor_document")
    corpus = [oracles.stored_cursor(g.cursor_document()) for _ in range(CORPUS)]
    corpus += [
        {"mark_delete": [1, 2], "batch_acks": [[1, 3, 2, "-1"]]},
        {"mark_delete": [1, 2], "batch_acks": [[1, 3, 2, "zz"]]},
        {"mark_delete": [1, 2], "properties": "ab"},
        {"mark_delete": [1, 2], "individually_acked": {"ab": 1}},
    ]

    def damaged(g: Gen) -> object:
        stored = dict(g.choice(corpus))
        for _ in range(g.randint(1, 3)):
            key = g.choice(CURSOR_KEYS)
            if g.chance(0.5):
                stored.pop(key, None)
            elif g.chance(0.5):
                stored[key] = g.json_value()
            else:  # damage inside the value: one element of a list replaced
                value = stored.get(key)
                if isinstance(value, list) and value:
                    value = list(value)
                    i = g.randrange(len(value))
                    item = value[i]
                    if isinstance(item, list) and item and g.chance(0.7):
                        item = list(item)
                        item[g.randrange(len(item))] = g.json_scalar()
                        value[i] = item
                    else:
                        value[i] = g.json_value(4)
                    stored[key] = value
                else:
                    stored[key] = g.json_scalar()
        return stored

    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.1:
            return oracles.cursor_round_trip, (g.cursor_document(),)
        if x < 0.2:
            return oracles.cursor_cut_to_fit, (g.cursor_document(), g.randint(100, 3000))
        if x < 0.35:
            return oracles.cursor_stored, (g.json_value(),)
        return oracles.cursor_stored, (damaged(g),)

    run("cursor_document", inputs)


# -- entries as the broker parses them (peek, delayed delivery) --------------------------------------------
def test_broker_entries() -> None:
    g = Gen("corpus:broker_entries")
    corpus = _corpus(g, lambda: g.entry_batch().SerializeToString())

    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.1:
            batch = g.entry_batch()
            if not batch.messages:
                batch.messages.append(pb.SingleMessage(payload=g.raw(50)))
            return oracles.broker_entry_round_trip, (batch,)
        if x < 0.4:
            return oracles.broker_entry, (g.raw(200),)
        if x < 0.42:
            return oracles.broker_entry, (g.choice([b"\x2a", b"\x0a", b"\x80"]) * g.randint(1, 200),)
        return oracles.broker_entry, (g.pick_mutated(corpus),)

    run("broker_entries", inputs)


# -- delay-bucket records --------------------------------------------------------------------------------
def _bucket_record(g: Gen) -> delaybuckets.Record:
    return g.integer(*I64), Position(g.integer(*I64), g.integer(*I64)), (g.raw(60, min_size=1) if g.chance(0.7) else None)


def test_delay_buckets() -> None:
    g = Gen("corpus:delay_buckets")
    corpus = _corpus(g, lambda: b"".join(delaybuckets.encode(*_bucket_record(g)) for _ in range(g.randint(1, 4))))

    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.3:
            return oracles.delay_bucket_round_trip, ([_bucket_record(g) for _ in range(g.randint(0, 10))], g.raw(40))
        if x < 0.6:
            return oracles.delay_bucket_bytes, (g.raw(200),)
        return oracles.delay_bucket_bytes, (g.pick_mutated(corpus),)

    run("delay_buckets", inputs)


# -- ledger entry framing --------------------------------------------------------------------------------
def test_ledger_entry_framing() -> None:
    def inputs(g: Gen) -> Input:
        if g.chance(0.4):
            return oracles.frame_round_trip, (g.integer(*U64), g.raw(100))
        return oracles.framed_bytes, (g.raw(40),)

    run("ledger_entry_framing", inputs)


# -- the managed ledger's list of ledgers -------------------------------------------------------------
LEDGER_INFO_KEYS = ["ledger_id", "entries", "size", "created_ms", "max_deliver_at_ms"]


def test_ledger_info() -> None:
    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.2:
            return oracles.ledger_info_round_trip, (g.ledger_info(),)
        if x < 0.4:
            return oracles.ledger_info_doc, (g.json_value(),)
        if x < 0.7:
            return oracles.ledger_info_doc, ({g.choice(LEDGER_INFO_KEYS): g.json_value(4) for _ in range(g.randint(0, 5))},)
        doc: dict[str, Any] = g.ledger_info().to_dict(is_open=g.chance(0.2))
        for _ in range(g.randint(1, 2)):
            key = g.choice(LEDGER_INFO_KEYS)
            if g.chance(0.3):
                doc.pop(key, None)
            else:
                doc[key] = g.json_scalar()
        return oracles.ledger_info_doc, (doc,)

    run("ledger_info", inputs)


# -- the znode codec -------------------------------------------------------------------------------------
def test_znode_codec() -> None:
    g = Gen("corpus:znode_codec")
    corpus = _corpus(g, lambda: codec.encode(g.json_document(infinity=False)))

    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.15:
            return oracles.znode_round_trip, (g.json_document(infinity=False),)
        if x < 0.35:
            return oracles.znode_bytes, (g.raw(100),)
        if x < 0.5:
            return oracles.znode_bytes, (json.dumps(g.json_value()).encode(),)
        if x < 0.52:
            return oracles.znode_bytes, (g.hostile_json(),)
        return oracles.znode_bytes, (g.pick_mutated(corpus),)

    run("znode_codec", inputs)


# -- ledger metadata --------------------------------------------------------------------------------------
def test_ledger_metadata() -> None:
    g = Gen("corpus:ledger_metadata")
    corpus = [g.ledger_metadata().to_dict() for _ in range(CORPUS)]
    corpus += [
        {"ensemble_size": 1e400, "write_quorum": 1, "ack_quorum": 1, "state": "OPEN", "last_entry_id": -1, "length": 0, "fragments": []},
        {"ensemble_size": 1, "write_quorum": 1, "ack_quorum": 1, "state": "OPEN", "last_entry_id": -1, "length": 0,
         "properties": [], "fragments": [{"first_entry": 0, "bookies": ["b"]}]},
    ]  # fmt: skip

    def damaged(g: Gen) -> dict:
        doc = json.loads(json.dumps(g.choice(corpus)))  # a deep copy (1e400 reads back as inf)
        for _ in range(g.randint(1, 3)):
            key = g.choice([*doc, "fragments", "properties"])
            x = g.random()
            if x < 0.35:
                doc.pop(key, None)
            elif x < 0.7 or not isinstance(doc.get("fragments"), list) or not doc["fragments"]:
                doc[key] = g.floating(nan=True) if g.chance(0.2) else g.json_value()
            else:  # damage inside a fragment
                fragment = g.choice(doc["fragments"])
                if isinstance(fragment, dict):
                    fkey = g.choice(["first_entry", "bookies", "x"])
                    fragment[fkey] = g.json_value(4) if g.chance(0.5) else [g.json_scalar() for _ in range(g.randint(0, 5))]
        return doc

    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.15:
            return oracles.ledger_metadata_round_trip, (g.ledger_metadata(),)
        if x < 0.3:
            return oracles.ledger_metadata_doc, (g.json_document(),)
        return oracles.ledger_metadata_doc, (damaged(g),)

    run("ledger_metadata", inputs)


# -- namespace policies ----------------------------------------------------------------------------
POLICY_FIELDS = [
    "retention_time_minutes", "retention_size_mb", "destination_storage", "message_age", "active", "tick_time_ms",
    "max_delivery_delay_ms", "msg_rate", "byte_rate", "relative_to_publish_rate", "period_s", "max_redeliver_count",
    "dead_letter_topic", "retry_letter_topic",
]  # fmt: skip


def test_namespace_policies() -> None:
    from test_decoders_metadata import POLICY_KEYS

    def policy_value(g: Gen) -> Any:
        if g.chance(0.3):
            return g.json_value()
        out: dict[str, Any] = {}
        for _ in range(g.randint(0, 4)):
            if g.chance(0.8):
                out[g.choice(POLICY_FIELDS)] = g.json_scalar()
            else:
                out[g.choice(POLICY_FIELDS)] = {"limit_size": g.json_scalar(), "limit_time": g.json_scalar(),
                                                "policy": g.choice(["producer_exception", "x"])}  # fmt: skip
        return out

    def inputs(g: Gen) -> Input:
        if g.chance(0.2):
            return oracles.namespace_policies_doc, (g.json_document(),)
        return oracles.namespace_policies_doc, ({g.choice(POLICY_KEYS): policy_value(g) for _ in range(g.randint(0, 4))},)

    run("namespace_policies", inputs)


# -- tokens and key settings --------------------------------------------------------------------------
def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _valid_token(g: Gen) -> str:
    claims = {g.choice(["role", "x", "aud", "iss"]): g.text(8) for _ in range(g.randint(0, 2))}
    return tokens.create_token(g.text(16, min_size=1), oracles.TOKEN_SECRET, claims=claims)


def _jwt_part(g: Gen) -> str:
    k = g.randrange(4)
    if k == 0:
        return g.text(40)
    if k == 1:
        return _b64(json.dumps(g.json_value()).encode())
    if k == 2:
        header = {"alg": g.choice(["HS256", "none", "RS256", "HS512", g.text(6)]), "typ": "JWT"}
        if g.chance(0.3):
            header[g.choice(["crit", "kid", "b64", "x"])] = g.json_value(4)
        return _b64(json.dumps(header).encode())
    return _b64(g.raw(40))


def test_tokens() -> None:
    g = Gen("corpus:tokens")
    corpus = [_valid_token(g).encode() for _ in range(CORPUS)]

    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.1:
            return oracles.token_round_trip, (_valid_token(g),)
        if x < 0.25:
            return oracles.token_text, (g.text(80),)
        if x < 0.55:
            return oracles.token_text, (".".join(_jwt_part(g) for _ in range(g.randint(1, 4))),)
        if x < 0.56:
            return oracles.token_text, (_b64(b'{"alg":"HS256","typ":"JWT"}') + "." + _b64(b"[" * g.randint(1000, 5000)) + ".sig",)
        if x < 0.7:  # a valid token's parts recombined with a damaged one
            parts = g.choice(corpus).decode().split(".")
            parts[g.randrange(3)] = _jwt_part(g)
            return oracles.token_text, (".".join(parts),)
        return oracles.token_text, (g.pick_mutated(corpus).decode("utf-8", "replace"),)

    run("tokens", inputs)


def test_durations() -> None:
    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.3:
            return oracles.duration_text, (g.text(20),)
        if x < 0.9:
            return oracles.duration_text, (g.text(20, " -+0123456789smhdwy٣_"),)
        if x < 0.95:
            return oracles.duration_text, (str(g.integer(-(2**70), 2**70)) + g.choice("smhdwyx"),)
        return oracles.duration_text, ("1" * g.randint(4000, 6000) + "s",)

    run("durations", inputs)


def test_key_settings() -> None:
    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.2:
            return oracles.secret_key_round_trip, (g.raw(80, min_size=32),)
        if x < 0.4:
            return oracles.secret_key_bytes, (g.raw(80),)
        if x < 0.5:  # base64 text, right or damaged
            data = base64.b64encode(g.raw(80)) + g.choice([b"", b"\n", b" ", b"="])
            return oracles.secret_key_bytes, (g.mutate(data) if g.chance(0.5) else data,)
        if x < 0.7:
            return oracles.data_url_key, ("data:" + g.text(60),)
        if x < 0.85:
            return oracles.data_url_key, ("data:;base64," + g.text(40, B64 + "é\x00 \n-_"),)
        return oracles.data_url_key, ("data:;base64," + base64.b64encode(g.raw(60)).decode(),)

    run("key_settings", inputs)


def test_dedup_snapshot() -> None:
    g = Gen("corpus:dedup_snapshot")

    def producers(g: Gen) -> dict[str, int]:
        return {g.text(12): g.integer(-(2**63), 2**63 - 1) for _ in range(g.randint(0, 5))}

    corpus = [
        DedupSnapshot(Position(g.integer(-1, 2**63 - 1), g.integer(-1, 2**63 - 1)), producers(g)).encode().encode()
        for _ in range(CORPUS)
    ]

    def inputs(g: Gen) -> Input:
        x = g.random()
        if x < 0.3:
            return oracles.dedup_snapshot_round_trip, (g.integer(*I64), g.integer(*I64), producers(g))
        if x < 0.5:
            return oracles.dedup_snapshot_text, (json.dumps({"scan_from": g.json_value(), "producers": g.json_value()}),)
        if x < 0.6:
            return oracles.dedup_snapshot_text, (g.text(60),)
        return oracles.dedup_snapshot_text, (g.pick_mutated(corpus).decode(errors="replace"),)

    run("dedup_snapshot", inputs)
