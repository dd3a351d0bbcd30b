"""Pulsar's binary protocol door under hostile conversations (issue 32), against a real
broker and bookie: hypothesis builds 1-3 connections at once, each a sequence of frames
(``pulsarfuzz.py``: every command type with valid and invalid values, out of order,
broken sizes, unknown types, bad checksums, frames over the limit, frames cut short).

Oracles, per example: every frame the broker sends is within the size it announced
(``max_message_bytes`` + 10 KiB); every request is answered (an answer carrying its
request id: ERROR, SUCCESS or the response; a SEND's SEND_RECEIPT or SEND_ERROR, or
CLOSE_PRODUCER of its producer) and every PING gets its PONG, or the broker closes the
connection, never a hang past ``WAIT``; a connection that broke the stream or skipped CONNECT is closed; a
pulsar-client producing and consuming on the same broker all along gets each message of
the example's round; every ``BATCH`` examples the broker is alive and its log holds no
traceback. At the end, reading back every topic of the namespace the fuzzer produced in,
every SEND_RECEIPT's entry is stored with the bytes that were sent, and every stored
entry was either receipted or left unanswered when its connection closed: nothing
refused (SEND_ERROR) is stored, and nothing is stored twice.

``make test`` runs ``MAGNETAR_FUZZ_EXAMPLES`` examples (100) from a fixed seed; a long
run (``make fuzz``) draws a seed and prints it; ``MAGNETAR_FUZZ_SEED`` replays one.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter, deque
from dataclasses import dataclass, field

import pulsarfuzz as pf
import pytest
from fuzzsettings import EXAMPLES, LONG, record_result
from hypothesis import HealthCheck, example, given, seed, settings

from magnetar.client.admin import AdminClient
from magnetar.common.errors import ProtocolError
from magnetar.common.netutil import free_port
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol import commands
from magnetar.protocol.frames import FrameDecoder, encode_command
from magnetar.testing.pulsarclient import pulsar_client
from magnetar.testing.pulsarwire import RawPulsarConnection

pytestmark = [pytest.mark.integration]

Type = pb.BaseCommand.Type
SEED = int(os.environ.get("MAGNETAR_FUZZ_SEED") or (random.SystemRandom().getrandbits(32) if LONG else 32))
WAIT = 10.0
"""Longest wait for an answer: a broker that takes longer hangs."""
CUT_WAIT = 0.3
"""How long a connection that ended on a frame cut short is watched before the client closes it."""
BATCH = 25
TRACE = os.environ.get("MAGNETAR_FUZZ_TRACE")
"""A file to append every example's steps to (what and bytes), to find what a broker
that stopped answering was sent last."""
U64_MAX = 2**64 - 1
BYSTANDER = "persistent://public/default/pfz-bystander"

print(f"Pulsar protocol fuzz: seed {SEED} (replay with MAGNETAR_FUZZ_SEED={SEED}), {EXAMPLES} examples")


@dataclass
class Ledger:
    """What the fuzzer's SENDs got, over the whole run."""

    receipted: dict[tuple[bytes, bytes], tuple[str, int, int]] = field(default_factory=dict)
    """(topic, ledger, entry) of each receipted send, the topic as its PRODUCER named it."""
    duplicates: set[tuple[bytes, bytes]] = field(default_factory=set)
    refused: set[tuple[bytes, bytes]] = field(default_factory=set)
    unanswered: set[tuple[bytes, bytes]] = field(default_factory=set)
    examples: int = 0
    closes: int = 0
    frames: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)


class Fuzzed:
    def __init__(self, broker, port: int) -> None:  # type: ignore[no-untyped-def]
        self.broker = broker
        self.port = port
        self.url = f"pulsar://127.0.0.1:{port}"
        self.ledger = Ledger()
        self.log_start = broker.log_path.stat().st_size
        self.client = pulsar_client(self.url, operation_timeout_seconds=10)
        self.consumer = self.client.subscribe(BYSTANDER, "bystander")
        self.producer = self.client.create_producer(BYSTANDER, batching_enabled=False)
        self.rounds = 0

    def bystander_round(self) -> None:
        """The pulsar-client beside the fuzzer sends one message and receives it."""
        self.rounds += 1
        payload = f"round-{self.rounds}".encode()
        self.producer.send(payload)
        got = self.consumer.receive(int(WAIT * 1000))
        self.consumer.acknowledge(got)
        assert got.data() == payload, (got.data(), payload)

    def log_is_clean(self) -> None:
        assert self.broker.alive, "the broker died"
        with self.broker.log_path.open("rb") as fh:
            fh.seek(self.log_start)
            text = fh.read().decode(errors="replace")
        for marker in ("Traceback", "Task exception was never retrieved", "Exception in callback"):
            assert marker not in text, f"the broker logged {marker!r}: {text[text.index(marker) - 2000 : text.index(marker) + 3000]}"


@pytest.fixture(scope="module")
def fuzzed(module_bookie_factory, module_broker_factory):  # type: ignore[no-untyped-def]
    module_bookie_factory()
    port = free_port()
    broker = module_broker_factory(
        protocol_port=port, ensemble_size=1, write_quorum=1, ack_quorum=1, max_message_bytes=pf.MAX_MESSAGE,
        default_retention_time_minutes=-1, default_retention_size_mb=-1,
    )  # fmt: skip
    f = Fuzzed(broker, port)
    try:
        yield f
    finally:
        f.client.close()


@dataclass
class Outcome:
    closed: bool = False
    missing: list[str] = field(default_factory=list)


async def converse(port: int, conv: pf.Conversation, ledger: Ledger) -> Outcome:
    """Send one connection's steps and read until each is answered or the broker closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    decoder = FrameDecoder(pf.FRAME_LIMIT)  # what a client reads: the limit CONNECTED announced
    rids = {s.request_id for s in conv.steps if s.request_id is not None}
    sends: dict[int, deque[pf.Send]] = {}
    for s in conv.steps:
        if s.send is not None:
            sends.setdefault(s.send.producer_id, deque()).append(s.send)
    pings = sum(s.pings for s in conv.steps)
    ends_badly = any(s.breaks for s in conv.steps)
    cut = any(s.cut for s in conv.steps)
    # Anything whole before CONNECT closes the connection (the start of a frame is waited out).
    must_close = ends_badly or (conv.steps[0].what != "CONNECT" and not conv.steps[0].cut)
    barrier = not (ends_badly or cut)
    pongs = 0
    outcome = Outcome()
    producer_requests = {s.request_id: s.producer for s in conv.steps if s.producer is not None}
    topics: dict[int, str] = {}
    orphans: dict[int, deque[pf.Send]] = {}

    def answered(frame) -> None:  # type: ignore[no-untyped-def]
        nonlocal pongs
        c = frame.command
        ledger.frames[pb.BaseCommand.Type.Name(c.type)] += 1
        if c.type == Type.ERROR:
            ledger.frames[f"ERROR {c.error.message[:50]}"] += 1
        if c.type == Type.PONG:
            pongs += 1
        elif c.type == Type.PRODUCER_SUCCESS and c.producer_success.request_id in producer_requests:
            pid, topic = producer_requests[c.producer_success.request_id]
            topics[pid] = topic
        elif c.type in (Type.SEND_RECEIPT, Type.SEND_ERROR):
            body = c.send_receipt if c.type == Type.SEND_RECEIPT else c.send_error
            match = None
            for queues in (sends, orphans):  # orphans: sends of a producer the broker closed
                queue = queues.get(body.producer_id, deque())
                match = next((s for s in queue if s.sequence_id == body.sequence_id), None)
                if match is not None:
                    queue.remove(match)
                    break
            assert match is not None, f"an answer to a SEND never sent, or answered twice: {c}"
            if c.type == Type.SEND_ERROR:
                ledger.refused.add(match.key)
                ledger.frames[f"SEND_ERROR {pb.ServerError.Name(c.send_error.error)}"] += 1
                if c.send_error.error == pb.ChecksumError:
                    assert not match.checksum_ok, f"a SEND with a good checksum was refused: {c}"
            elif body.message_id.ledgerId == U64_MAX and body.message_id.entryId == U64_MAX:
                ledger.duplicates.add(match.key)
            else:
                assert match.checksum_ok, f"a SEND with a bad checksum was receipted: {c}"
                topic = topics.get(body.producer_id, "")
                ledger.receipted[match.key] = (topic, body.message_id.ledgerId, body.message_id.entryId)
        elif c.type == Type.CLOSE_PRODUCER:
            # The sends before it are not answered; those after it will be (no producer).
            # Which is which the client cannot tell: none of them is required an answer.
            queue = sends.pop(c.close_producer.producer_id, deque())
            ledger.unanswered.update(s.key for s in queue)
            orphans.setdefault(c.close_producer.producer_id, deque()).extend(queue)
        rid = commands.request_id(c)
        if rid:
            rids.discard(rid)

    def satisfied() -> bool:
        return not rids and not any(sends.values()) and pongs >= pings + barrier

    progress = asyncio.Event()

    async def pump() -> None:
        try:
            while data := await reader.read(1 << 16):
                for frame in decoder.feed(data):
                    answered(frame)
                progress.set()
        except ConnectionError:
            pass
        except AssertionError as exc:
            outcome.missing.append(str(exc))
        except ProtocolError as exc:
            outcome.missing.append(f"the broker sent what a client cannot read: {exc.message}")
        outcome.closed = True
        progress.set()

    async def until(condition, timeout_s: float) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout_s
        while not condition() and not outcome.closed:
            progress.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                await asyncio.wait_for(progress.wait(), left)
            except TimeoutError:
                return

    reading = asyncio.create_task(pump())
    try:
        for step in conv.steps:
            if outcome.closed:
                break
            writer.write(step.data)
            if step.wait:
                await writer.drain()
                await until(lambda step=step: step.request_id not in rids, WAIT)
        if barrier and not outcome.closed:
            writer.write(encode_command(commands.ping()))
        if not outcome.closed:
            await writer.drain()
        if must_close:
            await until(lambda: False, WAIT)
        else:
            cut_only = cut and not rids and not any(sends.values())
            await until(satisfied, CUT_WAIT if cut_only else WAIT)
    except ConnectionError:
        outcome.closed = True
    finally:
        writer.transport.abort()
        reading.cancel()
        await asyncio.gather(reading, return_exceptions=True)
    for queue in sends.values():
        for s in queue:
            ledger.unanswered.add(s.key)
    if outcome.closed:  # whatever was unanswered, closing is an answer
        ledger.closes += 1
        return outcome
    if must_close:
        outcome.missing.append("the connection should have been closed")
    elif not cut:
        if rids:
            outcome.missing.append(f"no answer to request ids {sorted(rids)}")
        if any(sends.values()):
            outcome.missing.append(f"no answer to SENDs {[(s.producer_id, s.sequence_id) for q in sends.values() for s in q]}")
        if pongs < pings + barrier:
            outcome.missing.append(f"{pings + barrier - pongs} PINGs without PONG")
    return outcome


@settings(
    max_examples=EXAMPLES, deadline=None, database=None, derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)  # fmt: skip
@seed(SEED)
@given(pf.conversations)
@example(pf.happy_path())
async def test_hostile_conversations_are_answered_or_closed(fuzzed: Fuzzed, conversations: list[pf.Conversation]) -> None:
    ledger = fuzzed.ledger
    if TRACE:
        with open(TRACE, "a") as fh:
            fh.write(f"example {ledger.examples}\n")
            for i, conv in enumerate(conversations):
                for step in conv.steps:
                    fh.write(f"  conn {i}: {step.what} {step.data[:20000].hex()}\n")
    outcomes = await asyncio.gather(*(converse(fuzzed.port, c, ledger) for c in conversations))
    for conv, outcome in zip(conversations, outcomes, strict=True):
        assert not outcome.missing, f"{outcome.missing} after: {conv.describe()} (seed {SEED})"
    await asyncio.to_thread(fuzzed.bystander_round)
    ledger.examples += 1
    if ledger.examples % BATCH == 0:
        fuzzed.log_is_clean()


async def _stored(port: int, topic: str) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    """Every entry of ``topic``, read from the start by a reader through the door."""
    out: dict[tuple[int, int], tuple[bytes, bytes]] = {}
    async with await RawPulsarConnection.open("127.0.0.1", port) as conn:
        await conn.handshake()
        await conn.send(pb.BaseCommand(type=Type.SUBSCRIBE, subscribe=pb.CommandSubscribe(
            topic=topic, subscription="pfz-check", subType=pb.CommandSubscribe.Exclusive, consumer_id=1,
            request_id=1, durable=False, initialPosition=pb.CommandSubscribe.Earliest,
        )))  # fmt: skip
        answer = await conn.receive()
        assert answer.command.type == Type.SUCCESS, answer.command
        await conn.send(pb.BaseCommand(
            type=Type.GET_LAST_MESSAGE_ID, getLastMessageId=pb.CommandGetLastMessageId(consumer_id=1, request_id=2),
        ))  # fmt: skip
        last_frame = await conn.receive()
        assert last_frame.command.type == Type.GET_LAST_MESSAGE_ID_RESPONSE, last_frame.command
        last = last_frame.command.getLastMessageIdResponse.last_message_id
        last_pos = commands.position_of(last)
        if last_pos[1] < 0:
            return out
        await conn.send(pb.BaseCommand(type=Type.FLOW, flow=pb.CommandFlow(consumer_id=1, messagePermits=2**32 - 1)))
        while True:
            frame = await conn.receive(WAIT)
            if frame.command.type != Type.MESSAGE:
                continue
            pos = commands.position_of(frame.command.message.message_id)
            assert pos not in out, f"entry {pos} delivered twice to a new reader"
            out[pos] = (frame.metadata_bytes, frame.payload)
            if pos >= last_pos:
                return out


async def test_nothing_half_stored_and_nothing_acknowledged_lost(fuzzed: Fuzzed) -> None:
    """(After the fuzzing above.) The stored entries of the fuzzed topics against what
    each SEND was told."""
    ledger = fuzzed.ledger
    # Every topic the fuzzer may have stored on (only public/default exists of the
    # namespaces its names use): a producer's topic is not known for sure from outside (a
    # PRODUCER for an id in use is answered with the open producer, on its own topic).
    async with AdminClient(fuzzed.broker.address, 10) as admin:
        listed = set(await admin.topics("public/default"))
    # ListTopics leaves out "<name>-partition-<n>" topics whose <name> is not partitioned
    # (the pools' fuzz-p-partition-<n> are such): read them by name too.
    topics = sorted((listed | {f"persistent://public/default/fuzz-p-partition-{i}" for i in range(3)}) - {BYSTANDER})
    stored: dict[tuple[int, int], tuple[bytes, bytes]] = {}
    where_stored: dict[str, list[tuple[int, int]]] = {}
    for topic in topics:
        entries = await _stored(fuzzed.port, topic)
        where_stored[topic] = sorted(entries)
        stored.update(entries)
    where = f"(seed {SEED})"
    by_key = Counter(stored.values())
    assert [k for k, n in by_key.items() if n > 1] == [], f"sends stored twice {where}"
    # Message ids (ledger, entry) are unique in a cluster: the topics' entries share one map.
    for key, (_, *position) in ledger.receipted.items():
        assert stored.get(tuple(position)) == key, (
            f"receipted send at {position} is not stored as sent {where}; stored: {where_stored}"
        )
    receipted_at = {(ledger_id, entry): key for key, (_, ledger_id, entry) in ledger.receipted.items()}
    for position, key in stored.items():
        if receipted_at.get(position) == key:
            continue
        assert key not in ledger.refused, f"a send answered SEND_ERROR is stored at {position} {where}"
        assert key in ledger.unanswered, f"entry {position} is stored but no SEND of the run explains it {where}"
    fuzzed.log_is_clean()
    seconds = time.monotonic() - ledger.started
    print(
        f"Pulsar protocol fuzz: {ledger.examples} examples in {seconds:.1f} s, {len(ledger.receipted)} sends stored, "
        f"{len(ledger.refused)} refused, {len(ledger.unanswered)} unanswered, {ledger.closes} connections closed by the broker; "
        f"answers: {dict(ledger.frames.most_common())}"
    )
    record_result("pulsar", "protocol door", inputs=ledger.examples, seconds=seconds, seed=SEED)
