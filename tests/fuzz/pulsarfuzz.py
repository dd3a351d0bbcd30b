"""Hostile Pulsar protocol conversations (issue 32), built by hypothesis, and what each
step of one waits for.

A conversation is one connection's list of :class:`Step`: the bytes sent and the answer
they need. Steps are every command type of the protocol (the served ones with plausible
ids, topics and subscriptions drawn from small pools, so that they reach producers and
consumers that exist; any type with random field values from its descriptor, made by
``rpcfuzz.RequestGenerator``), in any order (SEND before PRODUCER, FLOW on an unknown
consumer, ACK of ids never delivered, a second CONNECT, anything before CONNECT), and
broken frames: wrong sizes, unknown type numbers, bodies missing required fields, bad
checksums, frames over the limit, a frame cut short at the end.

Every SEND carries a payload that starts with a nonce unique in the run, so the oracle can
tell which send each stored entry came from.
"""

from __future__ import annotations

import itertools
import random
import struct
from dataclasses import dataclass, field

from hypothesis import strategies as st
from rpcfuzz import Pools, RequestGenerator

from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol import commands
from magnetar.protocol.frames import FRAME_PADDING, encode_command, encode_payload_command

Type = pb.BaseCommand.Type
MAX_MESSAGE = 64 * 1024
"""The fuzzed broker's ``max_message_bytes``: frames over it are cheap to make."""
FRAME_LIMIT = MAX_MESSAGE + FRAME_PADDING
TOPICS = [f"persistent://public/default/pfz-{i}" for i in range(3)]
"""Topics whose stored entries the oracle reads back at the end."""
_nonces = itertools.count(1)

SERVED = [
    Type.PING, Type.PONG, Type.PARTITIONED_METADATA, Type.LOOKUP, Type.PRODUCER, Type.SEND, Type.CLOSE_PRODUCER,
    Type.SUBSCRIBE, Type.FLOW, Type.ACK, Type.REDELIVER_UNACKNOWLEDGED_MESSAGES, Type.SEEK, Type.GET_LAST_MESSAGE_ID,
    Type.UNSUBSCRIBE, Type.CLOSE_CONSUMER, Type.CONNECT, Type.GET_TOPICS_OF_NAMESPACE, Type.GET_SCHEMA,
    Type.GET_OR_CREATE_SCHEMA,
]  # fmt: skip
ALL_TYPES = sorted(pb.BaseCommand.Type.values())


@dataclass
class Send:
    """A SEND the oracle follows: its producer and sequence ids and the stored bytes it
    would become (metadata, payload)."""

    producer_id: int
    sequence_id: int
    key: tuple[bytes, bytes]
    checksum_ok: bool


@dataclass(repr=False)
class Step:
    data: bytes
    what: str
    request_id: int | None = None
    """An answer must carry it (ERROR, SUCCESS or the response)."""
    send: Send | None = None
    breaks: bool = False
    """The stream cannot be followed after it: the broker closes the connection."""
    cut: bool = False
    """A frame cut short, or bytes that may be the start of one: the broker may wait for
    the rest, or close the connection."""
    pings: int = 0

    def __repr__(self) -> str:
        return f"{self.what}[{len(self.data)} bytes]"

    producer: tuple[int, str] | None = None
    """A PRODUCER's (producer id, topic)."""
    wait: bool = False
    """The client waits for this request's answer before it sends on (as a real client
    waits for PRODUCER_SUCCESS before it sends), so later steps reach what it made."""


@dataclass(repr=False)
class Conversation:
    steps: list[Step] = field(default_factory=list)
    connect_first: bool = True

    def __repr__(self) -> str:  # hypothesis prints a failing example: what, not megabytes
        return f"Conversation({self.describe()})"

    def _repr_pretty_(self, printer, cycle: bool) -> None:  # type: ignore[no-untyped-def]
        printer.text(repr(self))  # (hypothesis's printer otherwise lists a dataclass's fields)

    def describe(self) -> str:
        return " ".join(s.what for s in self.steps)


class Ids:
    """Request and sequence ids unique on a connection (the oracle matches answers by
    them); a drawn value that repeats (or 0) is replaced by the smallest free one."""

    def __init__(self) -> None:
        self.used: set[int] = set()
        self._next = 1

    def fresh(self, drawn: int) -> int:
        if drawn in self.used or drawn == 0:
            while self._next in self.used:
                self._next += 1
            drawn = self._next
        self.used.add(drawn)
        return drawn


class CommandGenerator(RequestGenerator):
    """``RequestGenerator`` for proto2 messages, whose enums are closed: a Python message
    refuses an unknown number (one on the wire is an unknown field to the broker)."""

    def enum(self, f):  # type: ignore[no-untyped-def]
        return self.rng.choice(f.enum_type.values).number


NOT_UTF8 = "~not-utf-8~"
_NOT_UTF8_BYTES = b"\xc4\xff\xfe" + b"\x80" * (len(NOT_UTF8) - 3)
"""Python's protobuf writes only UTF-8 strings; a client may send any bytes, which the
broker's proto2 parser hands over as bytes. Same length, so the frame's sizes hold."""


def _pools_topic(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.7:
        return rng.choice(TOPICS)
    if roll < 0.8:
        return Pools().topic(rng)
    if roll < 0.9:
        return rng.choice(["", "persistent://", "a/b/c/d/e", "persistent://public/nope/t", "\x00", "t" * 5000])
    return NOT_UTF8  # replaced by bytes that are not UTF-8 once encoded


def _fill_required(gen: RequestGenerator, msg) -> None:  # type: ignore[no-untyped-def]
    for f in msg.DESCRIPTOR.fields:
        if f.is_required and not msg.HasField(f.name):
            if f.message_type is not None:
                getattr(msg, f.name).CopyFrom(gen.message(f.message_type, 3))
                _fill_required(gen, getattr(msg, f.name))
            else:
                setattr(msg, f.name, gen.scalar(f))
        elif f.message_type is not None and not f.is_repeated and msg.HasField(f.name):
            _fill_required(gen, getattr(msg, f.name))
        elif f.message_type is not None and f.is_repeated and not f.message_type.GetOptions().map_entry:
            for item in getattr(msg, f.name):
                _fill_required(gen, item)


def _message_id(rng: random.Random) -> pb.MessageIdData:
    mid = pb.MessageIdData(
        ledgerId=rng.choice([0, 1, 2, 3, 10, 2**63 - 1, 2**64 - 1, rng.getrandbits(64)]),
        entryId=rng.choice([0, 1, 2, 5, 2**64 - 1, rng.getrandbits(64)]),
    )
    if rng.random() < 0.3:
        mid.batch_index = rng.choice([-1, 0, 1, 2**31 - 1])
    if rng.random() < 0.2:
        mid.partition = rng.choice([-1, 0, 5])
    if rng.random() < 0.2:
        mid.ack_set.extend(rng.choice([[0], [-1], [rng.getrandbits(63)], [1, 2, 3]]))
        if rng.random() < 0.5:
            mid.batch_size = rng.choice([0, 1, 64, 2**31 - 1])
    return mid


def _schema(rng: random.Random) -> pb.Schema:
    kind = rng.choice([pb.Schema.NONE, pb.Schema.String, pb.Schema.Json, pb.Schema.Avro, rng.choice(pb.Schema.Type.values())])
    data = rng.choice([
        b"", b'{"type":"record","name":"R","fields":[]}', b"{", rng.randbytes(rng.randrange(1, 200)),
        b'{"type":"string"}' * rng.choice([1, 1000]),
    ])  # fmt: skip
    schema = pb.Schema(name=rng.choice(["", "s", "x" * 3000, NOT_UTF8]), schema_data=data, type=kind)
    if rng.random() < 0.2:
        schema.properties.add(key=rng.choice(["k", ""]), value=rng.choice(["v", "\x00"]))
    return schema


def served_command(rng: random.Random, gen: RequestGenerator, kind: int, rid: int, ids: int) -> pb.BaseCommand:
    """A command of a served type with plausible values (ids below ``ids``), now and then
    an odd one."""
    c = pb.BaseCommand(type=kind)
    pid = cid = rng.randrange(ids)
    if kind == Type.PARTITIONED_METADATA:
        c.partitionMetadata.topic, c.partitionMetadata.request_id = _pools_topic(rng), rid
    elif kind == Type.LOOKUP:
        c.lookupTopic.topic, c.lookupTopic.request_id = _pools_topic(rng), rid
        c.lookupTopic.authoritative = rng.random() < 0.3
    elif kind == Type.PRODUCER:
        p = c.producer
        p.topic, p.producer_id, p.request_id = _pools_topic(rng), pid, rid
        if rng.random() < 0.7:
            p.producer_name = rng.choice(["pfz-a", "pfz-b", f"pfz-{rng.randrange(100)}", "", "x" * 2000])
        if rng.random() < 0.1:
            p.producer_access_mode = rng.choice([0, 1, 2, 3])
        if rng.random() < 0.05:
            p.encrypted = True
        if rng.random() < 0.2:
            p.epoch = rng.getrandbits(64)
        if rng.random() < 0.2:
            p.schema.CopyFrom(_schema(rng))
    elif kind == Type.CLOSE_PRODUCER:
        c.close_producer.producer_id, c.close_producer.request_id = pid, rid
    elif kind == Type.SUBSCRIBE:
        s = c.subscribe
        s.topic, s.consumer_id, s.request_id = _pools_topic(rng), cid, rid
        s.subscription = rng.choice(["s", "t", "shared", "", "a/b", "\x01", "x" * 2000, f"s{rng.randrange(5)}"])
        s.subType = rng.choice([0, 1, 2, 3])
        if rng.random() < 0.2:
            s.initialPosition = rng.choice([0, 1])
        if rng.random() < 0.2:
            s.durable = False
        if rng.random() < 0.2:
            s.start_message_id.CopyFrom(_message_id(rng))
        if rng.random() < 0.1:
            s.priority_level = rng.choice([-1, 0, 2**31 - 1])
    elif kind == Type.FLOW:
        c.flow.consumer_id = cid
        c.flow.messagePermits = rng.choice([0, 1, 5, 1000, 2**32 - 1])
    elif kind == Type.ACK:
        a = c.ack
        a.consumer_id, a.ack_type = cid, rng.choice([0, 1])
        a.message_id.extend(_message_id(rng) for _ in range(rng.choice([0, 1, 1, 2, 10])))
        if rng.random() < 0.5:
            a.request_id = rid
    elif kind == Type.REDELIVER_UNACKNOWLEDGED_MESSAGES:
        r = c.redeliverUnacknowledgedMessages
        r.consumer_id = cid
        r.message_ids.extend(_message_id(rng) for _ in range(rng.choice([0, 1, 3])))
    elif kind == Type.SEEK:
        s = c.seek
        s.consumer_id, s.request_id = cid, rid
        roll = rng.random()
        if roll < 0.45:
            s.message_id.CopyFrom(_message_id(rng))
        elif roll < 0.9:
            s.message_publish_time = rng.choice([0, 1, 2**63 - 1, 2**64 - 1, rng.getrandbits(41)])
    elif kind == Type.GET_LAST_MESSAGE_ID:
        c.getLastMessageId.consumer_id, c.getLastMessageId.request_id = cid, rid
    elif kind == Type.UNSUBSCRIBE:
        c.unsubscribe.consumer_id, c.unsubscribe.request_id = cid, rid
    elif kind == Type.CLOSE_CONSUMER:
        c.close_consumer.consumer_id, c.close_consumer.request_id = cid, rid
    elif kind == Type.GET_TOPICS_OF_NAMESPACE:
        g = c.getTopicsOfNamespace
        g.request_id = rid
        g.namespace = rng.choice(["public/default", "public/nope", "nope/nope", "public", "", "a/b/c", NOT_UTF8, "p" * 5000])
        if rng.random() < 0.5:
            g.mode = rng.choice([0, 1, 2])
        if rng.random() < 0.6:
            g.topics_pattern = rng.choice([
                "persistent://public/default/pfz-.*", "persistent://public/default/.*", ".*", "(", "[a-", "(a+)+$",
                "persistent://public/default/(p|f)+z+-?\\d*", "x" * 3000, NOT_UTF8,
            ])  # fmt: skip
        if rng.random() < 0.3:
            g.topics_hash = rng.choice(["", "0", "deadbeef", "x" * 100])
    elif kind == Type.GET_SCHEMA:
        g = c.getSchema
        g.request_id, g.topic = rid, _pools_topic(rng)
        if rng.random() < 0.5:
            g.schema_version = rng.choice([b"", (0).to_bytes(8, "big"), (2**63 - 1).to_bytes(8, "big"), rng.randbytes(3), b"\xff" * 8])
    elif kind == Type.GET_OR_CREATE_SCHEMA:
        g = c.getOrCreateSchema
        g.request_id, g.topic = rid, _pools_topic(rng)
        g.schema.CopyFrom(_schema(rng))
    elif kind == Type.CONNECT:
        c.connect.client_version = "fuzz"
        c.connect.protocol_version = rng.choice([0, 5, 6, 20, 2**31 - 1])
    elif kind == Type.PING:
        c.ping.SetInParent()
    elif kind == Type.PONG:
        c.pong.SetInParent()
    return c


def random_command(gen: RequestGenerator, kind: int, fill: bool) -> pb.BaseCommand:
    """A command of any type with random field values (``fill``: its required fields set,
    so that it parses and reaches its handler)."""
    c = pb.BaseCommand(type=kind)
    f = pb.BaseCommand.DESCRIPTOR.fields_by_number.get(kind)
    if f is not None and f.message_type is not None:
        getattr(c, f.name).CopyFrom(gen.message(f.message_type, 2))
        if fill:
            _fill_required(gen, getattr(c, f.name))
    return c


def send_step(rng: random.Random, gen: RequestGenerator, seq: int, pid: int) -> Step:
    nonce = next(_nonces)
    metadata = pb.MessageMetadata(producer_name=rng.choice(["pfz-a", "x"]), sequence_id=seq, publish_time=rng.getrandbits(41))
    if rng.random() < 0.3:
        random_meta = gen.message(pb.MessageMetadata.DESCRIPTOR, 3)
        _fill_required(gen, random_meta)
        random_meta.sequence_id = seq
        metadata = random_meta
    if rng.random() < 0.15:
        metadata.deliver_at_time = rng.choice([0, 1, 2**63 - 1, rng.getrandbits(41)])
    roll = rng.random()
    size = 16 if roll < 0.9 else (MAX_MESSAGE + rng.randrange(1, 1000) if roll < 0.95 else rng.randrange(0, 4000))
    payload = b"pfz%08d" % nonce + rng.randbytes(size)
    send = pb.CommandSend(producer_id=pid, sequence_id=seq)
    if rng.random() < 0.2:
        send.num_messages = rng.choice([0, 1, 2, 100, 2**31 - 1])
    if rng.random() < 0.1:
        send.highest_sequence_id = rng.choice([0, min(seq + 5, 2**64 - 1), 2**64 - 1])
    checksum = rng.random() < 0.9
    data = encode_payload_command(pb.BaseCommand(type=Type.SEND, send=send), metadata, payload, checksum=checksum)
    ok = True
    if checksum and rng.random() < 0.1:  # flip a byte of the CRC32C (after the 2-byte magic)
        command_size = struct.unpack_from(">I", data, 4)[0]
        at = 8 + command_size + 2 + rng.randrange(4)
        data = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]
        ok = False
    key = (metadata.SerializeToString(), payload)
    if len(data) - 4 > FRAME_LIMIT:  # big random metadata: over the frame limit
        return Step(data, f"SEND({pid},{seq},over-the-limit)", breaks=True)
    return Step(data, f"SEND({pid},{seq}{'' if ok else ',badcrc'})", send=Send(pid, seq, key, ok))


def broken_frame(rng: random.Random, gen: RequestGenerator) -> Step:
    """Bytes that are not a frame the broker can follow."""
    ping = encode_command(commands.ping())
    choice = rng.randrange(7)
    if choice == 0:  # a size over the frame limit
        return Step(struct.pack(">I", rng.choice([FRAME_LIMIT + 1, 2**31, 2**32 - 1])) + rng.randbytes(8), "OVERSIZE", breaks=True)
    if choice == 1:  # a size too small to hold a command, or a command size that does not fit
        return Step(rng.choice([struct.pack(">I", 0), struct.pack(">II", 4, 9) + b"\x00" * 4, struct.pack(">II", 6, 2) + b"\x08\x63"]), "BADSIZE", breaks=True)
    if choice == 2:  # an unknown type number
        body = bytes([0x08]) + _varint(rng.choice([0, 1, 99, 1000, 2**31 - 1]))
        return Step(struct.pack(">II", 4 + len(body), len(body)) + body, "UNKNOWN-TYPE", breaks=True)
    if choice == 3:  # a body missing its required fields
        cmd = random_command(gen, rng.choice(SERVED), fill=False)
        if not _missing_required(cmd):
            return _command_step(cmd)
        return Step(_partial_frame(cmd), f"RAW({pb.BaseCommand.Type.Name(cmd.type)})", breaks=True)
    if choice == 4:  # random bytes: sizes over the limit, or the start of a frame the broker waits out
        return Step(rng.randbytes(rng.randrange(1, 64)), "GARBAGE", cut=True)
    if choice == 5:  # a frame over the limit, whole
        size = FRAME_LIMIT + rng.randrange(1, 100)
        return Step(struct.pack(">II", size, 2) + b"\x08\x12" + b"\x00" * (size - 6), "BIGFRAME", breaks=True)
    data = ping + encode_command(commands.ping())
    return Step(data[: rng.randrange(len(ping) + 1, len(data))], "CUT", pings=1, cut=True)


def _missing_required(cmd: pb.BaseCommand) -> bool:
    return not cmd.IsInitialized()


def _partial_frame(cmd: pb.BaseCommand) -> bytes:
    """A frame of a command whose body lacks required fields (a real client never sends one)."""
    body = cmd.SerializePartialToString()
    return struct.pack(">II", 4 + len(body), len(body)) + body


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def conversation(rng: random.Random, length: int) -> Conversation:
    """One connection's steps, from ``rng``."""
    gen = CommandGenerator(rng, raw_rate=0.0, oversize_rate=0.0)
    conv = Conversation(connect_first=rng.random() < 0.93)
    rids, seqs = Ids(), Ids()
    ids = rng.choice([1, 2, 3])
    opened: list[int] = []
    if conv.connect_first:
        conv.steps.append(Step(encode_command(served_command(rng, gen, Type.CONNECT, 0, ids)), "CONNECT"))
    for i in range(length):
        roll = rng.random()
        if roll < 0.25:
            pid = rng.choice(opened) if opened and rng.random() < 0.8 else rng.randrange(ids)
            step = send_step(rng, gen, seqs.fresh(rng.choice([0, 1, 2, 10, 2**63 - 1, 2**64 - 1, rng.getrandbits(64)])), pid)
        elif roll < 0.8:
            kind = rng.choice(SERVED)
            rid = rids.fresh(rng.getrandbits(rng.choice([8, 64])))
            cmd = served_command(rng, gen, kind, rid, ids)
            step = _command_step(cmd)
            step.wait = kind in (Type.PRODUCER, Type.SUBSCRIBE) and step.request_id is not None and rng.random() < 0.7
            if step.producer is not None:
                opened.append(step.producer[0])
        elif roll < 0.95:
            kind = rng.choice(ALL_TYPES)
            cmd = random_command(gen, kind, fill=True)
            body = commands.body(cmd)
            if body is not None and "request_id" in body.DESCRIPTOR.fields_by_name:  # type: ignore[attr-defined]
                body.request_id = rids.fresh(rng.getrandbits(16))  # type: ignore[attr-defined]
            step = _command_step(cmd)
        else:
            step = broken_frame(rng, gen)
        if step.cut and i < length - 1:
            continue  # a cut frame only ends a conversation
        conv.steps.append(step)
        if step.breaks or step.cut:
            break
    return conv


def _command_step(cmd: pb.BaseCommand) -> Step:
    name = pb.BaseCommand.Type.Name(cmd.type)
    if _missing_required(cmd):
        return Step(_partial_frame(cmd), f"RAW({name})", breaks=True)
    rid = commands.request_id(cmd)
    if cmd.type == Type.ACK and not cmd.ack.HasField("request_id"):
        rid = 0
    body = commands.body(cmd)
    # A body this protocol left out (transactions, watchers) parses as the type alone.
    producer = (cmd.producer.producer_id, cmd.producer.topic) if cmd.type == Type.PRODUCER else None
    return Step(
        encode_command(cmd).replace(NOT_UTF8.encode(), _NOT_UTF8_BYTES), name,
        request_id=rid if rid and body is not None else None, pings=int(cmd.type == Type.PING), producer=producer,
    )  # fmt: skip


conversations = st.builds(
    lambda r, lengths: [conversation(r, n) for n in lengths],
    st.randoms(use_true_random=True),
    st.lists(st.integers(1, 12), min_size=1, max_size=3),
)
"""1-3 connections of 1-12 steps each (hypothesis shrinks the count and the lengths)."""


def happy_path() -> list[Conversation]:
    """A producer that stores three sends and a consumer that receives and acknowledges:
    the example every run starts with (the oracle's positive side)."""
    rng = random.Random(0)
    gen = CommandGenerator(rng)
    conv = Conversation()
    conv.steps.append(Step(encode_command(served_command(rng, gen, Type.CONNECT, 0, 1)), "CONNECT"))
    producer = pb.BaseCommand(type=Type.PRODUCER, producer=pb.CommandProducer(topic=TOPICS[0], producer_id=0, request_id=1))
    step = _command_step(producer)
    step.wait = True
    conv.steps.append(step)
    for seq in range(3):
        conv.steps.append(_plain_send(seq))
    subscribe = pb.BaseCommand(type=Type.SUBSCRIBE, subscribe=pb.CommandSubscribe(
        topic=TOPICS[0], subscription="happy", subType=pb.CommandSubscribe.Shared, consumer_id=0, request_id=2,
    ))  # fmt: skip
    step = _command_step(subscribe)
    step.wait = True
    conv.steps.append(step)
    conv.steps.append(_command_step(pb.BaseCommand(type=Type.FLOW, flow=pb.CommandFlow(consumer_id=0, messagePermits=10))))
    return [conv]


def _plain_send(seq: int) -> Step:
    nonce = next(_nonces)
    metadata = pb.MessageMetadata(producer_name="", sequence_id=seq, publish_time=1)
    payload = b"pfz%08d" % nonce
    data = encode_payload_command(
        pb.BaseCommand(type=Type.SEND, send=pb.CommandSend(producer_id=0, sequence_id=seq)), metadata, payload
    )  # fmt: skip
    return Step(data, f"SEND(0,{seq})", send=Send(0, seq, (metadata.SerializeToString(), payload), True))
