"""The decoders' oracles (issue 20), shared by the hypothesis property tests
(``test_decoders*.py``) and the fast fuzz driver (``test_decoders_fast.py``).

Each function takes one input, feeds it to a decoder and fails an assertion when the
decoder does what it must not: raise anything but the error it documents, accept
something it cannot write back, or lose a value on a round trip. Files are written
under a directory the caller gives (a fresh one per input, or one reused by the caller).
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from magnetar.bookie import cookie as cookies
from magnetar.bookie.journal import replay
from magnetar.bookie.lastmark import START, JournalPosition, LastLogMark
from magnetar.bookie.record import CorruptRecord, Record, decode, encode_add, header_of
from magnetar.broker.dedup import Snapshot as DedupSnapshot
from magnetar.broker.dispatch import delaybuckets
from magnetar.broker.dispatch.delayed import effective_deliver_at
from magnetar.broker.entry import decode_entry
from magnetar.broker.namespace_policies import from_document as policies_from_document
from magnetar.broker.peek import decode as peek_decode
from magnetar.broker.topic import delivery_time
from magnetar.client.batching import build_op
from magnetar.client.message import unpack_entry
from magnetar.common import masks, tokens
from magnetar.common.errors import (
    AuthenticationError,
    InvalidArgument,
    InvalidTopicName,
    MagnetarError,
    MetadataError,
    PreconditionFailed,
)
from magnetar.common.message_id import MessageId
from magnetar.common.names import NamespaceName, TopicName
from magnetar.gateway.websocket import ids as ws_ids
from magnetar.ledger.framing import HEADER_SIZE, frame, unframe
from magnetar.ledger.metadata import LedgerMetadata
from magnetar.managedledger.config import ManagedLedgerConfig
from magnetar.managedledger.cursor_state import CursorDocument
from magnetar.managedledger.layout import LedgerInfo
from magnetar.managedledger.position import Position
from magnetar.managedledger.rangeset import RangeSet
from magnetar.metadata import codec
from magnetar.metadata.errors import CorruptMetadata
from magnetar.proto.v1 import broker_pb2 as pb


# -- message ids ---------------------------------------------------------------------------
def message_id_round_trip(mid: MessageId) -> None:
    data = mid.serialize()
    assert len(data) == MessageId.SIZE
    assert MessageId.deserialize(data) == mid
    assert MessageId.deserialize(memoryview(bytearray(data))) == mid
    assert MessageId.parse(str(mid)) == mid
    assert MessageId.from_proto(mid.to_proto()) == mid


def message_id_bytes(data: bytes) -> None:
    try:
        mid = MessageId.deserialize(data)
    except InvalidArgument:
        return
    assert mid.serialize() == data  # the 24-byte form is canonical


def message_id_text(text: str) -> None:
    try:
        mid = MessageId.parse(text)
    except InvalidArgument:
        return
    assert MessageId.parse(str(mid)) == mid
    if text not in ("earliest", "latest"):
        parts = text.split(":")
        assert [int(p) for p in parts] == [mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index()][: len(parts)]


def message_id_proto(ledger: int, entry: int, partition: int, batch: int) -> None:
    msg = pb.MessageIdData(ledger_id=ledger, entry_id=entry, partition=partition, batch_index=batch)
    try:
        mid = MessageId.from_proto(msg)
    except InvalidArgument:
        assert min(ledger, entry, partition, batch) < -1
        return
    assert (mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index()) == (ledger, entry, partition, batch)


# -- the WebSocket API's message ids ---------------------------------------------------------------
def ws_id_round_trip(mid: MessageId) -> None:
    assert ws_ids.decode(ws_ids.encode(mid)) == mid
    assert ws_ids.from_bytes(ws_ids.to_bytes(mid)) == mid


def ws_id_bytes(data: bytes) -> None:
    try:
        mid = ws_ids.from_bytes(data)
    except InvalidArgument:
        return
    assert ws_ids.from_bytes(ws_ids.to_bytes(mid)) == mid


def ws_id_text(text: str) -> None:
    try:
        mid = ws_ids.decode(text)
    except InvalidArgument:
        return
    assert ws_ids.decode(ws_ids.encode(mid)) == mid


# -- masks ----------------------------------------------------------------------------------------------
def mask_round_trip(n: int, mask: int) -> None:
    data = masks.to_bytes(mask, n)
    assert len(data) == ((n + 7) // 8 if mask else 0)
    assert masks.from_bytes(data) == mask
    assert masks.indexes(mask) == [i for i in range(n) if mask >> i & 1]


def mask_bytes(data: bytes) -> None:
    """Any wire mask reads as an int whose wire form is the input less its zero high bytes."""
    mask = masks.from_bytes(data)
    assert mask >= 0
    assert masks.to_bytes(mask, len(data) * 8) == (data if mask else b"")
    assert masks.count(mask) == len(masks.indexes(mask))


# -- topic and namespace names -----------------------------------------------------------------------
def topic_round_trip(tenant: str, namespace: str, local: str) -> None:
    topic = TopicName(tenant=tenant, namespace=namespace, local_name=local)
    assert str(topic) == f"persistent://{tenant}/{namespace}/{local}"
    assert TopicName.parse(str(topic)) == topic
    assert TopicName.parse(f"{tenant}/{namespace}/{local}") == topic
    assert NamespaceName.parse(f"{tenant}/{namespace}") == topic.namespace


def partition_round_trip(tenant: str, namespace: str, local: str, index: int) -> None:
    base = TopicName(tenant=tenant, namespace=namespace, local_name=local)
    if base.is_partition:
        return  # the generated name is itself a partition; covered by the parse test
    try:
        part = base.partition(index)
    except InvalidTopicName:
        assert len(local) + len(f"-partition-{index}") > 512
        return
    parsed = TopicName.parse(str(part))
    assert parsed.partition_index == index
    assert parsed.partitioned_topic_name == base


def topic_text(text: str) -> None:
    try:
        topic = TopicName.parse(text)
    except InvalidTopicName:
        return
    assert TopicName.parse(str(topic)) == topic
    assert str(topic).startswith("persistent://")
    if topic.is_partition:
        assert TopicName.parse(str(topic.partitioned_topic_name)).partition(topic.partition_index) == topic


def namespace_text(text: str) -> None:
    try:
        ns = NamespaceName.parse(text)
    except InvalidArgument:
        return
    assert str(ns) == text
    assert NamespaceName.parse(str(ns)) == ns


# -- client batches ----------------------------------------------------------------------------------------
def _delivery(entry: bytes, ledger: int = 5, entry_id: int = 7) -> pb.Delivery:
    return pb.Delivery(message_id=pb.MessageIdData(ledger_id=ledger, entry_id=entry_id), entry=entry)


def client_batch_round_trip(messages: list[pb.SingleMessage], batched: bool, producer: str) -> None:
    loop = asyncio.new_event_loop()
    try:
        futures = [loop.create_future() for _ in messages]
        op = build_op(11, producer, messages, futures, batched)
    finally:
        loop.close()
    assert op.send.num_messages == len(messages)
    assert op.send.lowest_sequence_id == min(m.sequence_id for m in messages)
    assert op.send.highest_sequence_id == max(m.sequence_id for m in messages)
    got, was_batched = unpack_entry("persistent://a/b/t", 3, _delivery(op.send.entry))
    assert was_batched is batched
    assert [m.data() for m in got] == [m.payload for m in messages]
    assert [m.properties() for m in got] == [dict(m.properties) for m in messages]
    assert [m.partition_key() for m in got] == [m.partition_key for m in messages]
    assert [m.sequence_id() for m in got] == [m.sequence_id for m in messages]
    assert all(m.producer_name() == producer for m in got)
    assert [m.message_id() for m in got] == [MessageId(ledger_id=5, entry_id=7, partition=3, batch_index=i if batched else -1) for i in range(len(messages))]


def client_entry(entry: bytes) -> None:
    try:
        got, _ = unpack_entry("persistent://a/b/t", -1, _delivery(entry))
    except MagnetarError:
        return
    expected = pb.EntryBatch.FromString(entry)  # it parsed once, so it parses again
    assert [m.data() for m in got] == [m.payload for m in expected.messages]


# -- the entry record ------------------------------------------------------------------------------------
def encode_record(r: Record) -> bytes:
    return encode_add(r.ledger_id, r.entry_id, r.lac, r.payload)


def record_round_trip(rec: Record, before: bytes, after: bytes) -> None:
    data = encode_record(rec)
    assert header_of(data) == (rec.ledger_id, rec.entry_id, rec.lac)
    got, end = decode(before + data + after, len(before))
    assert got == rec
    assert end == len(before) + len(data)
    got, end = decode(memoryview(data))
    assert (got, end) == (rec, len(data))


def record_decode(buf: bytes, offset: int) -> Record | None:
    """Decode at ``offset``: CorruptRecord or a record whose re-encoding is the bytes read."""
    try:
        rec, end = decode(buf, offset)
    except CorruptRecord:
        return None
    assert offset < end <= len(buf)
    assert encode_record(rec) == buf[offset:end]  # an intact record has exactly one encoding
    return rec


def _refused(buf: bytes) -> bool:
    try:
        decode(buf)
    except CorruptRecord:
        return True
    return False


def record_torn_or_flipped(rec: Record, cut: int, byte: int, bit: int) -> None:
    """A record cut at ``cut`` (< its length) or with one bit flipped is refused. CRC-32
    detects every single-bit error in the body; in the length or CRC field the record no
    longer matches its CRC (or its length is implausible or too long)."""
    buf = encode_record(rec)
    assert _refused(buf[:cut])
    flipped = bytearray(buf)
    flipped[byte] ^= 1 << bit
    assert _refused(bytes(flipped))


# -- journal replay --------------------------------------------------------------------------------------
def journal_file(directory: Path, file_id: int) -> Path:
    return directory / f"{file_id:016x}.jnl"


def journal_replay(directory: Path, contents: list[bytes]) -> list[tuple[JournalPosition, Record]]:
    """Replay of journal files 1.. holding ``contents`` (written by the caller) yields, per
    file, the records decoded one after the other up to the first one refused, truncates
    the file there, and yields the same again (from any position, what follows it)."""
    expected: list[Record] = []
    sizes: list[int] = []
    for data in contents:
        offset = 0
        while offset < len(data):
            rec = record_decode(data, offset)
            if rec is None:
                break
            expected.append(rec)
            offset += len(encode_record(rec))
        sizes.append(offset)
    got = list(replay(directory, START))
    assert [r for _, r in got] == expected
    ends = [p for p, _ in got]
    assert ends == sorted(ends)
    for i, size in enumerate(sizes):
        assert journal_file(directory, i + 1).stat().st_size == size
    # A second replay finds the same records and nothing to truncate.
    assert list(replay(directory, START)) == got
    if got:  # and from a position, only what follows it
        k = len(got) // 2
        assert list(replay(directory, got[k][0])) == got[k + 1 :]
    return got


# -- the LastLogMark ---------------------------------------------------------------------------------------
def lastmark_bytes(position: JournalPosition, directory: Path) -> bytes:
    """The file a LastLogMark advanced to ``position`` writes (in ``directory``, emptied)."""
    path = directory / "written"
    path.unlink(missing_ok=True)
    mark = LastLogMark(path)
    assert mark.advance(position)
    return path.read_bytes()


def read_lastmark(data: bytes, directory: Path) -> JournalPosition | None:
    """The position a file holding ``data`` gives; None when it is refused as damaged."""
    path = directory / "read"
    path.write_bytes(data)
    try:
        return LastLogMark(path).position
    except PreconditionFailed as exc:
        assert "damaged" in exc.message
        return None


def lastmark_round_trip(first: JournalPosition, second: JournalPosition, directory: Path) -> None:
    path = directory / "mark"
    path.unlink(missing_ok=True)
    assert LastLogMark(path).position == START
    mark = LastLogMark(path)
    assert mark.advance(first)
    assert LastLogMark(path).position == first
    assert mark.advance(second) == (second > first)
    assert LastLogMark(path).position == max(first, second)


def lastmark_file(data: bytes, directory: Path) -> None:
    position = read_lastmark(data, directory)
    if position is not None:
        assert lastmark_bytes(position, directory) == data  # the only intact form of that position


# -- the cookie --------------------------------------------------------------------------------------------
def cookie_round_trip(cookie: cookies.Cookie, directory: Path) -> None:
    cookies._write(directory, cookie)
    assert cookies._read(directory) == cookie


def cookie_file(data: bytes, directory: Path) -> None:
    (directory / cookies.COOKIE_FILE).write_bytes(data)
    try:
        got = cookies._read(directory)
    except PreconditionFailed:
        return
    assert isinstance(got, cookies.Cookie)
    # Fields a cookie file leaves out take their defaults (files of older layouts).
    assert cookies.asdict(got) == {"layout_version": cookies.LAYOUT_VERSION, "created": "", **json.loads(data)}


# -- range sets: checked against a plain set of positions ---------------------------------------------
ENTRIES_PER_LEDGER = 6


def next_position(p: Position) -> Position:
    """A layout of ledgers 0.. with 6 entries each (so ranges merge across ledgers)."""
    return Position(p.ledger_id + 1, 0) if p.entry_id >= ENTRIES_PER_LEDGER - 1 else Position(p.ledger_id, p.entry_id + 1)


def span(first: Position, last: Position) -> set[Position]:
    out, p = set(), first
    while p <= last:
        out.add(p)
        p = next_position(p)
    return out


RangeOp = tuple[str, Position | None, Position | None]


def range_set_ops(ops: list[RangeOp], probe: Position) -> None:
    rs, model = RangeSet(next_position), set[Position]()
    for op, a, b in ops:
        if op == "add":
            assert a is not None and b is not None
            new = span(a, b) - model
            assert rs.add_range(a, b) == bool(new)
            model |= new
        elif op == "remove_through":
            assert a is not None
            rs.remove_through(a)
            model = {p for p in model if p > a}
        else:
            first = rs.first()
            popped = rs.pop_first()
            assert popped == first
            if popped is not None:
                model -= span(*popped)
        ranges = rs.ranges()
        assert len(rs) == len(ranges)
        assert set().union(*(span(f, last) for f, last in ranges)) == model
        for (_, last), (first, _) in zip(ranges, ranges[1:], strict=False):
            assert next_position(last) < first  # sorted, disjoint and not touching
        assert rs.count(lambda f, last: len(span(f, last))) == len(model)
    assert (probe in rs) == (probe in model)
    after = rs.covering_or_after(probe)
    later = sorted(p for p in model if p >= probe)
    assert (after is None) == (not later)
    if after is not None:
        assert after[0] <= later[0] <= after[1]


# -- the cursor document --------------------------------------------------------------------------------
CURSOR_CONFIG = ManagedLedgerConfig()


def stored_cursor(doc: CursorDocument, max_bytes: int = 900_000) -> dict:
    """What ZooKeeper gives back: the document through JSON."""
    return json.loads(json.dumps(doc.to_doc(CURSOR_CONFIG, max_bytes)))


def cursor_round_trip(doc: CursorDocument) -> None:
    assert CursorDocument.from_doc(stored_cursor(doc), "c") == doc


def cursor_cut_to_fit(doc: CursorDocument, max_bytes: int) -> None:
    stored = doc.to_doc(CURSOR_CONFIG, max_bytes)
    empty = {**stored, "individually_acked": [], "batch_acks": [], "redelivery_counts": []}
    if len(json.dumps(empty, separators=(",", ":"))) <= max_bytes:
        assert len(json.dumps(stored, separators=(",", ":"))) <= max_bytes
    got = CursorDocument.from_doc(json.loads(json.dumps(stored)), "c")
    assert got.mark_delete == doc.mark_delete
    assert got.ranges == doc.ranges[: len(got.ranges)]
    assert got.batch_acks == doc.batch_acks[: len(got.batch_acks)]
    assert got.redelivery_counts == doc.redelivery_counts[: len(got.redelivery_counts)]


def cursor_stored(stored: object) -> None:
    try:
        doc = CursorDocument.from_doc(stored, "c")
    except MetadataError:
        return
    assert isinstance(stored, dict)
    assert doc.mark_delete == Position.of(stored["mark_delete"])
    assert CursorDocument.from_doc(stored_cursor(doc), "c") == doc


# -- entries as the broker parses them ---------------------------------------------------------------
def broker_entry(data: bytes) -> None:
    batch = peek_decode(data)
    assert len(batch.messages) >= 1
    try:
        parsed = pb.EntryBatch.FromString(data)
    except DecodeError:  # the entry counts as one message holding it
        parsed = None
    if parsed is None or not parsed.messages:
        assert [m.payload for m in batch.messages] == [data]
    else:
        assert batch == parsed
    try:  # the codec refuses exactly what protobuf refuses, with the error it documents
        assert decode_entry(data) == parsed
    except InvalidArgument:
        assert parsed is None
    due = delivery_time(data)
    if parsed is not None and len(parsed.messages) == 1:
        assert due == effective_deliver_at(parsed.messages[0].deliver_at_ms, parsed.publish_time_ms)
    else:
        assert due == 0


def broker_entry_round_trip(batch: pb.EntryBatch) -> None:
    assert peek_decode(batch.SerializeToString()) == batch


# -- delay-bucket records ------------------------------------------------------------------------------
_BUCKET_HEADER = struct.Struct("<qqqI")


def delay_bucket_round_trip(records: list[delaybuckets.Record], tail: bytes) -> None:
    buf = b"".join(delaybuckets.encode(due, pos, data) for due, pos, data in records)
    assert list(delaybuckets.decode(buf)) == records
    # A torn record after them (a prefix of one more) is left out.
    extra = delaybuckets.encode(1, Position(2, 3), tail or None)
    for cut in (0, len(extra) // 2, len(extra) - 1):
        assert list(delaybuckets.decode(buf + extra[:cut])) == records


def delay_bucket_bytes(buf: bytes) -> None:
    got = list(delaybuckets.decode(buf))
    encoded = b"".join(delaybuckets.encode(due, pos, data) for due, pos, data in got)
    assert buf.startswith(encoded)
    rest = buf[len(encoded) :]  # what is left is one torn record: a short header or data
    assert len(rest) < _BUCKET_HEADER.size or _BUCKET_HEADER.unpack_from(rest)[3] > len(rest) - _BUCKET_HEADER.size


# -- ledger entry framing ----------------------------------------------------------------------------
def frame_round_trip(length: int, payload: bytes) -> None:
    assert unframe(frame(length, payload)) == (length, payload)


def framed_bytes(data: bytes) -> None:
    try:
        length, payload = unframe(data)
    except MagnetarError:
        assert len(data) < HEADER_SIZE
        return
    assert frame(length, payload) == data


# -- the managed ledger's list of ledgers ---------------------------------------------------------------
def ledger_info_round_trip(info: LedgerInfo) -> None:
    assert LedgerInfo.from_dict(json.loads(json.dumps(info.to_dict()))) == info


def ledger_info_doc(doc: object) -> None:
    try:
        info = LedgerInfo.from_dict(doc)
    except MetadataError:
        return
    assert isinstance(doc, dict)
    assert info.ledger_id == doc["ledger_id"] >= 0
    assert LedgerInfo.from_dict(info.to_dict()) == info


# -- the znode codec -----------------------------------------------------------------------------------
def znode_round_trip(doc: dict) -> None:
    data = codec.encode(doc)
    assert codec.decode(data) == doc
    assert codec.encode(codec.decode(data)) == data


def znode_bytes(data: bytes) -> None:
    try:
        doc = codec.decode(data, "/x")
    except CorruptMetadata as exc:
        assert "/x" in exc.message
        return
    assert isinstance(doc, dict)
    # What was read can be written back (a read-modify-write of the znode works).
    assert codec.decode(codec.encode(doc)) == doc


# -- ledger metadata ----------------------------------------------------------------------------------------
def ledger_metadata_round_trip(metadata: LedgerMetadata) -> None:
    assert LedgerMetadata.from_dict(codec.decode(codec.encode(metadata.to_dict()))) == metadata


def ledger_metadata_doc(doc: dict) -> None:
    try:
        metadata = LedgerMetadata.from_dict(doc)
    except InvalidArgument:
        return
    assert LedgerMetadata.from_dict(metadata.to_dict()) == metadata
    assert metadata.ensemble_size == int(doc["ensemble_size"])


# -- namespace policies ----------------------------------------------------------------------------
def namespace_policies_doc(doc: Any) -> None:
    try:
        policies_from_document(doc, "/ns")
    except CorruptMetadata:
        return


# -- tokens and key settings --------------------------------------------------------------------------
TOKEN_SECRET = b"k" * 32
TOKEN_AUTH = tokens.TokenAuthenticator("HS256", TOKEN_SECRET)


def token_round_trip(token: str) -> None:
    header, claims = tokens.parse_unverified(token)
    assert header["alg"] == "HS256"
    assert TOKEN_AUTH.authenticate(token) == claims["sub"]


def token_text(token: str) -> None:
    try:
        role = TOKEN_AUTH.authenticate(token)
    except AuthenticationError:
        pass
    else:
        assert tokens.parse_unverified(token)[1]["sub"] == role
    try:
        tokens.parse_unverified(token)
    except InvalidArgument:
        pass


DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def duration_text(text: str) -> None:
    try:
        seconds = tokens.parse_duration(text)
    except InvalidArgument:
        return
    assert seconds > 0
    number, unit = text.strip()[:-1], text.strip()[-1]
    assert seconds == int(number) * DURATION_UNITS[unit]


def secret_key_round_trip(key: bytes) -> None:
    assert tokens.decode_secret_key(base64.b64encode(key) + b"\n") == key
    assert tokens.load_secret_key("data:;base64," + base64.b64encode(key).decode()) == key


def secret_key_bytes(data: bytes) -> None:
    key = tokens.decode_secret_key(data)
    assert key == data or (len(key) >= 32 and base64.b64decode(data.strip()) == key)


def data_url_key(source: str) -> None:
    try:
        data = tokens.read_key_bytes(source)
    except InvalidArgument:
        return
    meta, _, payload = source.strip()[5:].partition(",")
    assert data == (base64.b64decode(payload) if meta.endswith(";base64") else payload.encode())
    try:
        tokens.load_public_key(source)
    except InvalidArgument:
        pass


# -- the entry log -------------------------------------------------------------------------------------
def entry_log_read(raw: bytes, records: list[Record]) -> None:
    """Bytes read at a wrong place or of a wrong length are refused, never misread: what
    decodes is one of the records written, and the bytes read are its encoding."""
    try:
        got, end = decode(raw)
    except CorruptRecord:
        return
    assert got in records
    assert raw[:end] == encode_record(got)


# -- the deduplication snapshot (a ledger list property) -----------------------------------------------
def dedup_snapshot_round_trip(ledger_id: int, entry_id: int, producers: dict[str, int]) -> None:
    snapshot = DedupSnapshot(Position(ledger_id, entry_id), producers)
    assert DedupSnapshot.decode(snapshot.encode()) == snapshot


def dedup_snapshot_text(text: str) -> None:
    """Decoded, or None (a full scan then): never an exception; what decodes re-encodes
    to a text that decodes the same."""
    got = DedupSnapshot.decode(text)
    if got is not None:
        assert DedupSnapshot.decode(got.encode()) == got
