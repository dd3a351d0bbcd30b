"""The Pulsar protocol door's producers (magnetar.broker.protocol.producers) over a
stand-in topic: PRODUCER, SEND and its receipts in order, duplicates, SEND_ERROR, the
refusals (no producer, bad checksum, not the owner, not authorized, a name in use), the
initial subscription a PRODUCER names, CLOSE_PRODUCER both ways, the connection that
stops reading past its pending sends, and the hot path's economies (one socket write for
the receipts of one turn, the decoder's checksum stored as is, an unbatched message not
checked again by the core).
Real sockets on loopback, no other process."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from magnetar.broker.config import BrokerConfig
from magnetar.broker.protocol.listener import ProtocolListener, pulsar_service_urls
from magnetar.broker.service import PulsarServiceUrls
from magnetar.broker.topic import ProducerAdmission, Publisher, PublishResult
from magnetar.common import errors as e
from magnetar.common.netutil import free_port
from magnetar.managedledger.position import Position
from magnetar.metadata.schemas import SchemaInfo, StoredSchema
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol import commands
from magnetar.protocol.frames import encode_command, encode_payload_command
from magnetar.protocol.stored import stored_entry
from magnetar.testing.pulsarwire import RawPulsarConnection

T = pb.BaseCommand
TOPIC = "persistent://public/default/t"


@dataclass
class Published:
    producer: str
    entry: bytes
    count: int
    lowest: int
    highest: int
    maybe_delayed: bool
    outcome: asyncio.Future[PublishResult]
    checked: bool = False


@dataclass
class FakeTopic:
    name: str
    partition: int = -1
    settle_at_once: bool = True
    last: dict[str, int] = field(default_factory=dict)
    producers: dict[str, object] = field(default_factory=dict)
    published: list[Published] = field(default_factory=list)
    failure: e.MagnetarError | None = None
    duplicates_through: int = -1
    publish_limiter: object = None
    may_hold_producers: bool = False
    subscriptions: dict[str, str] = field(default_factory=dict)  # name -> where it started

    async def create_subscription(self, name: str, start: str) -> None:
        if name in self.subscriptions:
            raise e.AlreadyExists(f"subscription {name!r} on {self.name} already exists")
        self.subscriptions[name] = start

    def add_producer(self, name: str, on_close=None) -> int:  # type: ignore[no-untyped-def]
        if name in self.producers:
            raise e.ProducerBusy(f"producer {name!r} is already connected to {self.name}")
        self.producers[name] = on_close
        return self.last.get(name, -1)

    async def open_producer(self, name, on_close=None, access_mode=0, topic_epoch=None, on_queued=None):  # type: ignore[no-untyped-def]
        last = self.add_producer(name, on_close)
        return ProducerAdmission(Publisher(name), last, None)

    def remove_producer(self, name: str, publisher: object = None) -> None:
        self.producers.pop(name, None)

    def publish(self, producer, entry, count, lowest, highest, maybe_delayed=True, checked=False, chunk=None):  # type: ignore[no-untyped-def]
        outcome: asyncio.Future[PublishResult] = asyncio.get_running_loop().create_future()
        self.published.append(Published(producer, entry, count, lowest, highest, maybe_delayed, outcome, checked))
        if self.settle_at_once:
            self.settle(len(self.published) - 1)
        return outcome

    def settle(self, index: int) -> None:
        p = self.published[index]
        if self.failure is not None:
            p.outcome.set_exception(self.failure)
        elif p.lowest <= self.duplicates_through:
            p.outcome.set_result(PublishResult(None, duplicate=True))
        else:
            p.outcome.set_result(PublishResult(Position(5, index)))


@dataclass
class FakeAuthorizer:
    refuse: bool = False
    refuse_consume: bool = False
    asked: list[tuple[str | None, str]] = field(default_factory=list)
    superusers: frozenset[str] = frozenset()
    recheck_interval_s: float = 0.05

    async def check(self, role, request) -> None:  # type: ignore[no-untyped-def]
        if not await self.allowed(role, request):
            raise e.AuthorizationError(f"role {role!r} is not authorized to {request.what()}")

    async def allowed(self, role, request) -> bool:  # type: ignore[no-untyped-def]
        self.asked.append((role, request.what()))
        return not (self.refuse or (self.refuse_consume and request.action.value == "consume"))


@dataclass
class FakeService:
    pulsar_urls: PulsarServiceUrls
    broker_id: str = "127.0.0.1:6650"
    topics: dict[str, FakeTopic] = field(default_factory=dict)
    failure: e.MagnetarError | None = None
    authorizer: FakeAuthorizer = field(default_factory=FakeAuthorizer)
    is_serving: bool = True
    names: int = 0

    def serving(self) -> bool:
        return self.is_serving

    def check_serving(self, what: str) -> None:
        if not self.is_serving:
            raise self.not_serving(what)

    def not_serving(self, what: str) -> e.NotOwner:
        return e.NotOwner(f"not serving ({what})")

    async def get_topic(self, topic: str) -> FakeTopic:
        if self.failure is not None:
            raise self.failure
        return self.topics.setdefault(topic, FakeTopic(topic, partition=3))

    def new_producer_name(self) -> str:
        self.names += 1
        return f"generated-{self.names}"

    async def declare_schema(self, topic: str, schema: SchemaInfo, *, consumer: bool = False) -> StoredSchema:
        """No registry here: a producer without a schema is let through (version -1)."""
        return StoredSchema(schema, -1)


@pytest.fixture
async def door() -> AsyncIterator[tuple[ProtocolListener, FakeService]]:
    config = BrokerConfig(protocol_port=free_port(), protocol_keepalive_s=5, max_message_bytes=64 * 1024)
    service = FakeService(pulsar_service_urls(config))
    listener = ProtocolListener(service, config)  # type: ignore[arg-type]
    listener.settings = dataclasses.replace(listener.settings, authorizer=service.authorizer)  # type: ignore[arg-type]
    await listener.start()
    try:
        yield listener, service
    finally:
        await listener.stop()


async def _connected(listener: ProtocolListener, protocol_version: int = 20) -> RawPulsarConnection:
    conn = await RawPulsarConnection.open(listener.host, listener.port)
    await conn.handshake(protocol_version)
    return conn


def producer_command(producer_id: int = 1, request_id: int = 1, name: str | None = None, topic: str = TOPIC,
                     initial_subscription: str | None = None) -> pb.BaseCommand:  # fmt: skip
    cmd = pb.CommandProducer(topic=topic, producer_id=producer_id, request_id=request_id)
    if name is not None:
        cmd.producer_name = name
    if initial_subscription is not None:
        cmd.initial_subscription_name = initial_subscription
    return pb.BaseCommand(type=T.PRODUCER, producer=cmd)


def metadata(seq: int, **fields) -> pb.MessageMetadata:  # type: ignore[no-untyped-def]
    return pb.MessageMetadata(producer_name="p", sequence_id=seq, publish_time=1_700_000_000_000, **fields)


def send_frame(seq: int, payload: bytes = b"x", producer_id: int = 1, checksum: bool = True, **meta) -> bytes:  # type: ignore[no-untyped-def]
    send = pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=producer_id, sequence_id=seq))
    return encode_payload_command(send, metadata(seq, **meta), payload, checksum=checksum)


async def _wait_for(condition, timeout_s: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def test_a_producer_is_created_and_its_sends_stored_as_sent_with_receipts(door) -> None:
    listener, service = door
    async with await _connected(listener) as conn:
        await conn.send(producer_command(name="mine"))
        ok = (await conn.receive()).command
        assert ok.type == T.PRODUCER_SUCCESS
        assert (ok.producer_success.request_id, ok.producer_success.producer_name, ok.producer_success.last_sequence_id) == (1, "mine", -1)
        await conn.send_bytes(send_frame(0, b"a", partition_key="k") + send_frame(1, b"b", deliver_at_time=5))
        receipts = [(await conn.receive()).command.send_receipt for _ in range(2)]
    topic = service.topics[TOPIC]
    assert [(r.producer_id, r.sequence_id, r.highest_sequence_id) for r in receipts] == [(1, 0, 0), (1, 1, 1)]
    assert [(r.message_id.ledgerId, r.message_id.entryId, r.message_id.partition) for r in receipts] == [(5, 0, 3), (5, 1, 3)]
    assert [(p.producer, p.count, p.lowest, p.highest, p.maybe_delayed) for p in topic.published] == [
        ("mine", 1, 0, 0, False), ("mine", 1, 1, 1, True),
    ]
    assert topic.published[0].entry == stored_entry(metadata(0, partition_key="k").SerializeToString(), b"a")
    assert await _wait_for(lambda: topic.producers == {})  # the connection closed: the producer left


async def test_a_generated_name_and_the_last_sequence_id_stored_under_a_name(door) -> None:
    listener, service = door
    service.topics[TOPIC] = FakeTopic(TOPIC, last={"again": 41})
    async with await _connected(listener) as conn:
        await conn.send(producer_command(1, 1), producer_command(2, 2, name="again"))
        answers = {a.producer_success.request_id: a.producer_success for a in [(await conn.receive()).command for _ in range(2)]}
        assert (answers[1].producer_name, answers[1].last_sequence_id) == ("generated-1", -1)
        assert (answers[2].producer_name, answers[2].last_sequence_id) == ("again", 41)
        await conn.send(producer_command(3, 3, name="again"))  # the name is in use
        busy = (await conn.receive()).command
        assert busy.type == T.ERROR and (busy.error.request_id, busy.error.error) == (3, pb.ProducerBusy)


async def test_receipts_go_out_in_send_order_and_a_resend_gets_the_duplicates_id(door) -> None:
    listener, service = door
    service.topics[TOPIC] = topic = FakeTopic(TOPIC, settle_at_once=False, duplicates_through=0)
    async with await _connected(listener) as conn:
        await conn.send(producer_command(name="p"))
        assert (await conn.receive()).command.type == T.PRODUCER_SUCCESS
        await conn.send_bytes(send_frame(0) + send_frame(1) + send_frame(2))
        assert await _wait_for(lambda: len(topic.published) == 3)
        topic.settle(2)
        topic.settle(1)  # later ones settle first: nothing goes out before send 0's receipt
        topic.settle(0)
        receipts = [(await conn.receive()).command.send_receipt for _ in range(3)]
    assert [r.sequence_id for r in receipts] == [0, 1, 2]
    mid = receipts[0].message_id
    assert commands.position_of(mid) == (-1, -1)  # a duplicate, as Pulsar's broker answers it
    assert [commands.position_of(r.message_id) for r in receipts[1:]] == [(5, 1), (5, 2)]


async def test_a_batch_claims_its_highest_sequence_id_when_it_gives_one_else_its_own(door) -> None:
    """As Pulsar's broker: pulsar-client's (C++) batches give no highest sequence id, and a
    key-based batch's messages are not numbered one by one (0, 12 and 1, 13 for two keys):
    a batch claims only its sequence id, so the second is no "resend" of the first."""
    listener, service = door
    async with await _connected(listener) as conn:
        await conn.send(producer_command(name="p"))
        await conn.receive()
        for seq, highest in ((10, None), (11, None), (14, 16)):
            cmd = pb.CommandSend(producer_id=1, sequence_id=seq, num_messages=3)
            meta = metadata(seq, num_messages_in_batch=3)
            if highest is not None:
                cmd.highest_sequence_id = highest
            await conn.send_bytes(encode_payload_command(pb.BaseCommand(type=T.SEND, send=cmd), meta, b"records"))
        receipts = [(await conn.receive()).command.send_receipt for _ in range(3)]
    assert [(r.sequence_id, r.highest_sequence_id) for r in receipts] == [(10, 10), (11, 11), (14, 16)]
    assert [(p.count, p.lowest, p.highest) for p in service.topics[TOPIC].published] == [(3, 10, 10), (3, 11, 11), (3, 14, 16)]


async def test_a_client_below_protocol_6_sends_no_checksum_and_the_entry_is_stored_with_one(door) -> None:
    listener, service = door
    async with await _connected(listener, protocol_version=5) as conn:
        await conn.send(producer_command(name="old"))
        await conn.receive()
        await conn.send_bytes(send_frame(0, b"old", checksum=False))
        assert (await conn.receive()).command.type == T.SEND_RECEIPT
    [p] = service.topics[TOPIC].published
    assert p.entry == stored_entry(metadata(0).SerializeToString(), b"old") and p.entry[:2] == b"\x0e\x01"


async def test_bad_sends_get_send_error_and_the_connection_goes_on(door) -> None:
    listener, service = door
    async with await _connected(listener) as conn:
        await conn.send_bytes(send_frame(4, producer_id=9))  # SEND before PRODUCER
        refused = (await conn.receive()).command.send_error
        assert (refused.producer_id, refused.sequence_id, refused.error) == (9, 4, pb.NotAllowedError)
        assert "no producer 9" in refused.message
        await conn.send(producer_command(name="p"))
        await conn.receive()
        bad = bytearray(send_frame(5))
        bad[-1] ^= 1
        await conn.send_bytes(bytes(bad))
        refused = (await conn.receive()).command.send_error
        assert (refused.sequence_id, refused.error) == (5, pb.ChecksumError)
        service.topics[TOPIC].failure = e.MessageTooBig(70_000, 65_536)  # the core refuses it
        await conn.send_bytes(send_frame(6))
        refused = (await conn.receive()).command.send_error
        assert (refused.sequence_id, refused.error) == (6, pb.NotAllowedError) and "larger than the limit" in refused.message
        await conn.send(commands.ping())
        assert (await conn.receive()).command.type == T.PONG
    assert len(service.topics[TOPIC].published) == 1  # the corrupt one was not stored


@pytest.mark.parametrize(
    ("failure", "code"),
    [(e.NotOwner("topic is served by another broker"), pb.ServiceNotReady), (e.TopicNotFound("no such topic"), pb.TopicNotFound)],
)
async def test_a_producer_the_core_refuses_gets_its_server_error(door, failure, code) -> None:
    listener, service = door
    service.failure = failure
    async with await _connected(listener) as conn:
        await conn.send(producer_command(request_id=7))
        answer = (await conn.receive()).command
    assert answer.type == T.ERROR and (answer.error.request_id, answer.error.error) == (7, code)


async def test_a_producer_the_role_may_not_create_is_refused_before_the_topic_is_opened(door) -> None:
    listener, service = door
    service.authorizer.refuse = True
    async with await _connected(listener) as conn:
        await conn.send(producer_command(request_id=8))
        answer = (await conn.receive()).command
    assert answer.type == T.ERROR and (answer.error.request_id, answer.error.error) == (8, pb.AuthorizationError)
    assert service.authorizer.asked == [(None, f"produce on {TOPIC}")]
    assert service.topics == {}


async def test_a_producers_initial_subscription_is_made_at_the_earliest_entry_once(door) -> None:
    listener, service = door
    async with await _connected(listener) as conn:
        await conn.send(producer_command(1, 1, initial_subscription="dead"))
        assert (await conn.receive()).command.type == T.PRODUCER_SUCCESS
        await conn.send(producer_command(2, 2, initial_subscription="dead"))  # made already: fine
        assert (await conn.receive()).command.type == T.PRODUCER_SUCCESS
    assert service.topics[TOPIC].subscriptions == {"dead": "earliest"}
    assert service.authorizer.asked == [(None, f"produce on {TOPIC}"), (None, f"consume on {TOPIC} (subscription dead)")] * 2


@pytest.mark.parametrize("refused", ["bad name", "not authorized"])
async def test_a_producers_initial_subscription_refused_makes_nothing(door, refused: str) -> None:
    listener, service = door
    service.authorizer.refuse_consume = refused == "not authorized"
    async with await _connected(listener) as conn:
        await conn.send(producer_command(1, 3, initial_subscription="a/b" if refused == "bad name" else "dead"))
        answer = (await conn.receive()).command
    code = pb.NotAllowedError if refused == "bad name" else pb.AuthorizationError
    assert answer.type == T.ERROR and (answer.error.request_id, answer.error.error) == (3, code)
    assert service.topics == {}  # the topic was not even opened


async def test_close_producer_answers_pending_sends_first_and_the_broker_closes_producers_itself(door) -> None:
    listener, service = door
    service.topics[TOPIC] = topic = FakeTopic(TOPIC, settle_at_once=False)
    async with await _connected(listener) as conn:
        await conn.send(producer_command(name="p"))
        await conn.receive()
        await conn.send_bytes(send_frame(0))
        await conn.send(pb.BaseCommand(type=T.CLOSE_PRODUCER, close_producer=pb.CommandCloseProducer(producer_id=1, request_id=2)))
        assert await _wait_for(lambda: len(topic.published) == 1)
        topic.settle(0)
        answers = [(await conn.receive()).command for _ in range(2)]
        assert [a.type for a in answers] == [T.SEND_RECEIPT, T.SUCCESS]
        assert topic.producers == {}
        # The topic stops being served here: the broker closes the producer itself.
        await conn.send(producer_command(producer_id=4, request_id=3, name="q"))
        await conn.receive()
        topic.producers["q"](e.NotOwner("unloaded"))
        closing = (await conn.receive()).command
        assert closing.type == T.CLOSE_PRODUCER and closing.close_producer.producer_id == 4
        assert topic.producers == {}
        await conn.send_bytes(send_frame(1, producer_id=4))  # a send racing with the close
        assert (await conn.receive()).command.send_error.error == pb.NotAllowedError


async def test_past_its_pending_sends_the_connection_stops_reading(door) -> None:
    listener, service = door
    limit = 4
    listener.settings = dataclasses.replace(listener.settings, max_pending_sends=limit)
    service.topics[TOPIC] = topic = FakeTopic(TOPIC, settle_at_once=False)
    big = b"z" * 30_000  # two SENDs a read at most
    async with await _connected(listener) as conn:
        await conn.send(producer_command(name="p"))
        await conn.receive()
        writer = asyncio.create_task(conn.send_bytes(b"".join(send_frame(i, big) for i in range(40))))
        assert await _wait_for(lambda: len(topic.published) >= limit)
        await asyncio.sleep(0.3)  # what it would have read meanwhile
        held = len(topic.published)
        assert held < limit + 3, held
        for i in range(40):  # the core catches up: reading goes on until every send is stored
            assert await _wait_for(lambda i=i: len(topic.published) > i)
            topic.settle(i)
        await writer
        receipts = [(await conn.receive()).command.send_receipt.sequence_id for _ in range(40)]
    assert receipts == list(range(40))


async def test_a_producer_whose_grant_is_revoked_is_closed_and_may_not_come_back(door) -> None:
    listener, service = door
    async with await _connected(listener) as conn:
        await conn.send(producer_command(name="p"))
        assert (await conn.receive()).command.type == T.PRODUCER_SUCCESS
        service.authorizer.refuse = True  # revoked while it is connected
        closing = (await conn.receive()).command
        assert closing.type == T.CLOSE_PRODUCER and closing.close_producer.producer_id == 1
        assert service.topics[TOPIC].producers == {}
        await conn.send(producer_command(producer_id=2, request_id=2, name="p"))  # the client comes back
        answer = (await conn.receive()).command
    assert answer.type == T.ERROR and answer.error.error == pb.AuthorizationError


async def test_the_receipts_settled_in_one_turn_go_to_the_socket_in_one_write(door, monkeypatch) -> None:
    listener, service = door
    async with await _connected(listener) as conn:
        await conn.send(producer_command(name="mine"))
        assert (await conn.receive()).command.type == T.PRODUCER_SUCCESS
        writes: list[bytes] = []
        real_write = asyncio.StreamWriter.write

        def spy(writer: asyncio.StreamWriter, data: bytes) -> None:
            if writer is not conn.writer:  # the broker's side of the socket
                writes.append(bytes(data))
            real_write(writer, data)

        monkeypatch.setattr(asyncio.StreamWriter, "write", spy)
        count = 50
        await conn.send_bytes(b"".join(send_frame(seq) for seq in range(count)))  # one read for the broker
        receipts = [(await conn.receive()).command.send_receipt for _ in range(count)]
    assert [r.sequence_id for r in receipts] == list(range(count))
    assert len(writes) == 1  # not one system call per receipt
    assert len(service.topics[TOPIC].published) == count


async def test_a_sends_checksum_verified_by_the_decoder_is_not_computed_again_to_store_it(door, monkeypatch) -> None:
    from magnetar.protocol import stored

    listener, service = door
    computed: list[int] = []
    real_crc = stored.crc32c
    monkeypatch.setattr(stored, "crc32c", lambda data, value=0: computed.append(len(data)) or real_crc(data, value))
    async with await _connected(listener) as conn:
        await conn.send(producer_command(name="mine"))
        assert (await conn.receive()).command.type == T.PRODUCER_SUCCESS
        await conn.send_bytes(send_frame(0, b"checked"))
        assert (await conn.receive()).command.type == T.SEND_RECEIPT
        assert computed == []  # the decoder's verified CRC is the stored one
        await conn.send_bytes(send_frame(1, b"unchecked", checksum=False))  # a client below protocol 6
        assert (await conn.receive()).command.type == T.SEND_RECEIPT
        assert computed  # computed for the entry that came without one
    topic = service.topics[TOPIC]
    for p, seq, payload in zip(topic.published, (0, 1), (b"checked", b"unchecked"), strict=True):
        meta = metadata(seq).SerializeToString()
        checked = struct.pack(">I", len(meta)) + meta + payload
        assert p.entry == b"\x0e\x01" + struct.pack(">I", real_crc(checked)) + checked


async def test_a_message_sent_without_batching_is_stored_as_checked_by_the_door_a_batch_is_not(door) -> None:
    listener, service = door
    async with await _connected(listener) as conn:
        await conn.send(producer_command(name="mine"))
        assert (await conn.receive()).command.type == T.PRODUCER_SUCCESS
        batch = pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=1, num_messages=2))
        records = b"".join(struct.pack(">I", len(m)) + m + b"p" for m in [pb.SingleMessageMetadata(payload_size=1).SerializeToString()] * 2)
        await conn.send_bytes(send_frame(0) + encode_payload_command(batch, metadata(1, num_messages_in_batch=2), records))
        assert [(await conn.receive()).command.type for _ in range(2)] == [T.SEND_RECEIPT] * 2
    assert [(p.count, p.checked) for p in service.topics[TOPIC].published] == [(1, True), (2, False)]


async def test_a_connection_paused_by_its_pending_sends_is_not_closed_by_its_keepalive(door) -> None:
    listener, service = door
    keepalive = 0.2
    listener.settings = dataclasses.replace(listener.settings, max_pending_sends=2, keepalive_s=keepalive)
    service.topics[TOPIC] = topic = FakeTopic(TOPIC, settle_at_once=False)
    async with await _connected(listener) as conn:
        await conn.send(producer_command(name="p"))
        assert (await conn.receive()).command.type == T.PRODUCER_SUCCESS
        await conn.send_bytes(b"".join(send_frame(i) for i in range(2)))
        assert await _wait_for(lambda: len(topic.published) == 2)  # reading is paused now
        loop = asyncio.get_running_loop()
        paused_until = loop.time() + 6 * keepalive
        while loop.time() < paused_until:  # an alive client pings; the paused broker cannot hear it
            await conn.send(commands.ping())
            await asyncio.sleep(keepalive / 4)
        assert listener.connections == 1
        topic.settle(0)
        topic.settle(1)
        answers = []
        while len([a for a in answers if a.type == T.SEND_RECEIPT]) < 2:
            answers.append((await conn.receive()).command)
        assert [a.send_receipt.sequence_id for a in answers if a.type == T.SEND_RECEIPT] == [0, 1]


async def test_a_producer_that_never_reads_its_receipts_is_closed_after_the_write_timeout(door) -> None:
    listener, service = door
    listener.settings = dataclasses.replace(listener.settings, max_unsent_bytes=2048, write_timeout_s=0.5)
    service.topics[TOPIC] = topic = FakeTopic(TOPIC)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((listener.host, listener.port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=4096)
    conn = RawPulsarConnection(reader, writer)
    async with conn:
        await conn.handshake()
        await conn.send(producer_command(name="p"))
        assert (await conn.receive()).command.type == T.PRODUCER_SUCCESS
        (server,) = [c for c in listener._connections if c.connected]
        # A small machine's kernel buffers: what the client does not read stays in the broker.
        server._transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        sender = asyncio.create_task(conn.send_bytes(b"".join(send_frame(i) for i in range(5000))))
        async with await _connected(listener) as other:  # another client goes on meanwhile
            await other.send(commands.ping())
            assert (await other.receive()).command.type == T.PONG
            assert await _wait_for(lambda: server.closed, timeout_s=5.0)
            assert topic.producers == {}  # its producer left the topic
            await other.send(commands.ping())
            assert (await other.receive()).command.type == T.PONG
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
    assert len(topic.published) < 5000  # it was not read to the end


async def _paused_producer(listener: ProtocolListener, service: FakeService) -> tuple[RawPulsarConnection, FakeTopic]:
    """A client with producer "p" and one send the topic never settles: with one pending
    send allowed, the broker has stopped reading its connection."""
    listener.settings = dataclasses.replace(listener.settings, max_pending_sends=1)
    service.topics[TOPIC] = topic = FakeTopic(TOPIC, settle_at_once=False)
    conn = await _connected(listener)
    await conn.send(producer_command(name="p"))
    assert (await conn.receive()).command.type == T.PRODUCER_SUCCESS
    await conn.send_bytes(send_frame(0))
    assert await _wait_for(lambda: len(topic.published) == 1)  # reading is paused now
    return conn, topic


async def test_a_client_gone_while_its_connection_is_paused_is_found_by_the_keepalive(door) -> None:
    listener, service = door
    listener.settings = dataclasses.replace(listener.settings, keepalive_s=0.1)
    conn, topic = await _paused_producer(listener, service)
    conn.writer.transport.abort()  # the client is gone; the broker is not reading
    assert await _wait_for(lambda: listener.connections == 0, timeout_s=3.0)
    assert topic.producers == {}  # its producer left the topic: the name is free again


async def test_a_batch_claiming_more_messages_than_fit_is_refused_before_the_core(door) -> None:
    listener, service = door  # max_message_bytes 64 KiB: at most 10,922 messages of 6 bytes
    async with await _connected(listener) as conn:
        await conn.send(producer_command(name="p"))
        await conn.receive()
        await conn.send_bytes(
            send_frame(0, b"lz4", compression=pb.LZ4, uncompressed_size=2**31, num_messages_in_batch=2**31 - 1)
            + send_frame(1, b"\x00" * 12, num_messages_in_batch=64 * 1024 // 6 + 1)
            + send_frame(2, b"ok")
        )  # fmt: skip
        answers = [(await conn.receive()).command for _ in range(3)]
    refused = [a.send_error for a in answers if a.type == T.SEND_ERROR]
    assert [(r.sequence_id, r.error) for r in refused] == [(0, pb.NotAllowedError), (1, pb.NotAllowedError)]
    assert "at most 10922 fit" in refused[0].message
    assert [a.send_receipt.sequence_id for a in answers if a.type == T.SEND_RECEIPT] == [2]
    assert [p.lowest for p in service.topics[TOPIC].published] == [2]  # the core never saw them


async def test_a_send_after_close_producer_is_refused_not_stored_unanswered(door) -> None:
    listener, service = door
    service.topics[TOPIC] = topic = FakeTopic(TOPIC, settle_at_once=False)
    close = pb.BaseCommand(type=T.CLOSE_PRODUCER, close_producer=pb.CommandCloseProducer(producer_id=1, request_id=2))
    async with await _connected(listener) as conn:
        await conn.send(producer_command(name="p"))
        assert (await conn.receive()).command.type == T.PRODUCER_SUCCESS
        await conn.send_bytes(send_frame(0) + encode_command(close) + send_frame(1))  # one read: in that order
        assert await _wait_for(lambda: len(topic.published) >= 1)
        topic.settle(0)
        answers = [(await conn.receive()).command for _ in range(3)]
    assert sorted(pb.BaseCommand.Type.Name(a.type) for a in answers) == ["SEND_ERROR", "SEND_RECEIPT", "SUCCESS"]
    (refused,) = [a.send_error for a in answers if a.type == T.SEND_ERROR]
    assert (refused.sequence_id, refused.error) == (1, pb.NotAllowedError)
    assert [p.lowest for p in topic.published] == [0]  # the send after the close was not stored
    assert topic.producers == {}


def test_a_connection_whose_socket_is_already_gone_still_lets_its_producers_go() -> None:
    """Chaos run 35130: under uvloop (the broker's loop) a write to a socket the peer has
    reset raises; closing such a connection with something still queued for it raised
    before its producers left their topics, so the client's reconnect was refused as
    ProducerBusy for good. Run on uvloop, as the broker is."""
    import uvloop

    async def scenario() -> None:
        config = BrokerConfig(protocol_port=free_port(), protocol_keepalive_s=5)
        service = FakeService(pulsar_service_urls(config))
        listener = ProtocolListener(service, config)  # type: ignore[arg-type]
        await listener.start()
        try:
            conn, topic = await _paused_producer(listener, service)
            (server,) = [c for c in listener._connections if c.connected]
            server._transport.abort()  # the socket is gone (as after a reset by the peer)
            await asyncio.sleep(0.05)  # uvloop closes its handle
            server.write(commands.ping())  # and something is queued for it
            server.close()  # does not raise
            assert topic.producers == {}
            assert await _wait_for(lambda: listener.connections == 0, timeout_s=3.0)
            conn.writer.close()
            async with await _connected(listener) as again:  # the name is free again
                await again.send(producer_command(name="p"))
                assert (await again.receive()).command.type == T.PRODUCER_SUCCESS
        finally:
            await listener.stop()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(scenario())
