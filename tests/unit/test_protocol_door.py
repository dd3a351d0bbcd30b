"""The broker's Pulsar protocol door (magnetar.broker.protocol) over a stand-in core:
the handshake, keepalive, lookups and partitions, the error table, and an answer for
every command it does not serve yet. Real sockets on loopback, no other process."""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from magnetar.broker.config import BrokerConfig
from magnetar.broker.nonpersistent.listing import TopicsMode
from magnetar.broker.protocol.errors import SERVER_ERRORS, server_error
from magnetar.broker.protocol.listener import SERVER_VERSION, ProtocolListener, pulsar_service_urls
from magnetar.broker.service import BrokerService, PulsarServiceUrls
from magnetar.common import errors as e
from magnetar.common import tokens
from magnetar.common.netutil import free_port
from magnetar.common.tls import ClientTls, https_context, server_ssl_context, server_tls
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol import commands, topic_list
from magnetar.protocol.checksum import crc32c
from magnetar.protocol.frames import encode_command, encode_payload_command
from magnetar.testing.certs import Issued, TestCa
from magnetar.testing.pulsarwire import RawPulsarConnection, connect_command, lookup_command

T = pb.BaseCommand
HERE = "127.0.0.1:6650"
OTHER = "127.0.0.1:6651"
OLD = "127.0.0.1:6652"  # registered before brokers advertised a Pulsar URL
PLAIN = "127.0.0.1:6653"  # serves pulsar:// only


@dataclass
class FakeService:
    """The parts of BrokerService the door uses, with answers the tests set."""

    pulsar_urls: PulsarServiceUrls
    broker_id: str = HERE
    owners: dict[str, str] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(default_factory=dict)
    serving: bool = True
    failure: e.MagnetarError | None = None
    authorizer: object = None
    lookups: list[str] = field(default_factory=list)
    namespaces: dict[str, list[str]] = field(default_factory=dict)

    def check_serving(self, what: str) -> None:
        if not self.serving:
            raise e.NotOwner(f"broker {self.broker_id} is not serving ({what})")

    async def lookup(self, topic: str) -> str:
        self.lookups.append(topic)
        if self.failure is not None:
            raise self.failure
        return self.owners.get(topic, self.broker_id)

    async def partitions(self, topic: str) -> int:
        if self.failure is not None:
            raise self.failure
        return self.partition_counts.get(topic, 0)

    async def client_partitions(self, topic: str) -> int:
        return await self.partitions(topic)

    async def namespace_topics(self, namespace: str, mode: TopicsMode, *, as_partitions: bool = False) -> list[str]:
        if namespace not in self.namespaces:
            raise e.NamespaceNotFound(f"namespace {namespace} does not exist")
        assert as_partitions  # GET_TOPICS_OF_NAMESPACE lists partitions
        return [t for t in self.namespaces[namespace] if t.split("://")[0] in mode.domains]

    async def pulsar_urls_of(self, broker_id: str) -> PulsarServiceUrls:
        records = {
            OTHER: {"address": OTHER, "pulsar_service_url": "pulsar://127.0.0.1:7001", "pulsar_service_url_tls": "pulsar+ssl://127.0.0.1:7002"},
            PLAIN: {"address": PLAIN, "pulsar_service_url": "pulsar://127.0.0.1:7003"},
            OLD: {"address": OLD},
        }  # fmt: skip
        return await BrokerService.pulsar_urls_of(
            SimpleNamespace(broker_id=self.broker_id, pulsar_urls=self.pulsar_urls,
                            ownership=SimpleNamespace(broker_record=_async(records.get))),  # type: ignore[arg-type]
            broker_id,
        )  # fmt: skip


def _async(fn):  # type: ignore[no-untyped-def]
    async def call(*args):  # type: ignore[no-untyped-def]
        return fn(*args)

    return call


@pytest.fixture
async def door() -> AsyncIterator[tuple[ProtocolListener, FakeService]]:
    config = BrokerConfig(protocol_port=free_port(), protocol_keepalive_s=0.5, max_message_bytes=64 * 1024)
    service = FakeService(pulsar_service_urls(config))
    listener = ProtocolListener(service, config)  # type: ignore[arg-type]
    await listener.start()
    try:
        yield listener, service
    finally:
        await listener.stop()


async def _open(listener: ProtocolListener) -> RawPulsarConnection:
    return await RawPulsarConnection.open(listener.host, listener.port)


async def test_connected_carries_server_version_the_lower_protocol_and_the_message_limit(door) -> None:
    listener, _ = door
    async with await _open(listener) as conn:
        connected = await conn.handshake(protocol_version=20)
        assert connected.server_version == SERVER_VERSION
        assert connected.protocol_version == 20
        assert connected.max_message_size == 64 * 1024
    async with await _open(listener) as conn:
        assert (await conn.handshake(protocol_version=99)).protocol_version == commands.PROTOCOL_VERSION
    async with await _open(listener) as conn:
        assert (await conn.handshake(protocol_version=6)).protocol_version == 6


async def test_a_command_before_connect_gets_error_and_the_connection_closes(door) -> None:
    listener, service = door
    async with await _open(listener) as conn:
        await conn.send(lookup_command("persistent://public/default/t", 7))
        assert await conn.closed_by_peer()
        [frame] = conn.frames
        assert frame.command.type == T.ERROR
        assert frame.command.error.request_id == 7
        assert "before CONNECT" in frame.command.error.message
    assert service.lookups == []  # nothing was looked up


async def test_ping_is_answered_and_a_silent_peer_is_pinged_then_closed(door) -> None:
    listener, _ = door
    async with await _open(listener) as conn:
        await conn.handshake()
        await conn.send(commands.ping())
        assert (await conn.receive()).command.type == T.PONG
        # Silent from here: the broker pings (keepalive 0.5 s), then closes.
        assert (await conn.receive(timeout_s=5)).command.type == T.PING
        assert await conn.closed_by_peer(timeout_s=5)
    async with await _open(listener) as conn:  # no handshake within the keepalive: closed
        assert await conn.closed_by_peer(timeout_s=5)
        assert conn.frames[0].command.type == T.ERROR


async def test_a_peer_that_answers_pings_stays_connected(door) -> None:
    listener, _ = door
    async with await _open(listener) as conn:
        await conn.handshake()
        for _ in range(4):  # > 3 keepalive intervals
            frame = await conn.receive(timeout_s=5)
            assert frame.command.type == T.PING
            await conn.send(commands.pong())
        await conn.send(commands.ping())
        assert (await conn.receive()).command.type == T.PONG


async def test_lookup_answers_connect_here_and_redirect_to_the_owner(door) -> None:
    listener, service = door
    service.owners = {
        "persistent://public/default/there": OTHER,
        "persistent://public/default/old": OLD,
    }
    async with await _open(listener) as conn:
        await conn.handshake()
        await conn.send(lookup_command("here", 1), lookup_command("there", 2), lookup_command("old", 3))
        answers = {f.command.lookupTopicResponse.request_id: f.command.lookupTopicResponse for f in [await conn.receive() for _ in range(3)]}
    kind = pb.CommandLookupTopicResponse
    assert answers[1].response == kind.Connect
    assert answers[1].brokerServiceUrl == f"pulsar://127.0.0.1:{listener.port}"
    assert answers[2].response == kind.Redirect and answers[2].authoritative
    assert answers[2].brokerServiceUrl == "pulsar://127.0.0.1:7001"
    # An owner whose registration names no Pulsar URL: a clear failure, not a wrong address.
    assert answers[3].response == kind.Failed and answers[3].error == pb.ServiceNotReady
    assert OLD in answers[3].message and "does not serve Pulsar's protocol" in answers[3].message
    assert service.lookups == [f"persistent://public/default/{t}" for t in ("here", "there", "old")]


async def test_partitioned_metadata_and_failures_carry_pulsar_codes(door) -> None:
    listener, service = door
    service.partition_counts = {"persistent://public/default/p": 4}

    def partitions(topic: str, rid: int) -> pb.BaseCommand:
        return pb.BaseCommand(type=T.PARTITIONED_METADATA, partitionMetadata=pb.CommandPartitionedTopicMetadata(topic=topic, request_id=rid))

    async with await _open(listener) as conn:
        await conn.handshake()
        await conn.send(partitions("p", 1))
        assert (await conn.receive()).command.partitionMetadataResponse.partitions == 4
        await conn.send(partitions("np", 2))
        answer = (await conn.receive()).command.partitionMetadataResponse
        assert answer.partitions == 0 and answer.response == pb.CommandPartitionedTopicMetadataResponse.Success
        await conn.send(partitions("a/b/c/d/e", 3))
        answer = (await conn.receive()).command.partitionMetadataResponse
        assert answer.response == pb.CommandPartitionedTopicMetadataResponse.Failed
        assert answer.error == pb.InvalidTopicName and answer.request_id == 3
        service.serving = False
        await conn.send(lookup_command("p", 4))
        answer = (await conn.receive()).command.lookupTopicResponse
        assert answer.error == pb.ServiceNotReady and "not serving" in answer.message
        service.serving, service.failure = True, e.TopicNotFound("topic p does not exist")
        await conn.send(partitions("p", 5))
        answer = (await conn.receive()).command.partitionMetadataResponse
        assert (answer.error, answer.message) == (pb.TopicNotFound, "topic p does not exist")


async def test_a_topic_name_that_is_not_utf8_is_refused(door) -> None:
    listener, _ = door
    raw = lookup_command("abc", 9).SerializeToString().replace(b"abc", b"a\xffc")
    async with await _open(listener) as conn:
        await conn.handshake()
        await conn.send_bytes(struct.pack(">II", len(raw) + 4, len(raw)) + raw)
        answer = (await conn.receive()).command.lookupTopicResponse
        assert answer.error == pb.InvalidTopicName and answer.request_id == 9


async def test_every_command_not_served_gets_an_answer_and_the_connection_goes_on(door) -> None:
    listener, _ = door
    stats = pb.BaseCommand(type=T.CONSUMER_STATS, consumerStats=pb.CommandConsumerStats(request_id=13, consumer_id=1))
    txn = pb.BaseCommand(type=T.NEW_TXN)  # kept out of our .proto: no body
    close = pb.BaseCommand(type=T.CLOSE_CONSUMER, close_consumer=pb.CommandCloseConsumer(consumer_id=1, request_id=14))
    async with await _open(listener) as conn:
        await conn.handshake()
        await conn.send(stats, txn, close, connect_command())
        answers = [(await conn.receive()).command for _ in range(4)]
        assert [(a.error.request_id, a.error.error) for a in answers[:2]] == [
            (13, pb.NotAllowedError), (0, pb.UnsupportedVersionError),
        ]
        assert "CONSUMER_STATS is not served" in answers[0].error.message
        assert "NEW_TXN is not supported" in answers[1].error.message
        assert answers[2].type == T.SUCCESS and answers[2].success.request_id == 14  # nothing to close
        assert answers[3].type == T.ERROR and "connected already" in answers[3].error.message
        await conn.send(commands.ping())
        assert (await conn.receive()).command.type == T.PONG


def _topics_of(request: int, namespace: str, **fields: object) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=T.GET_TOPICS_OF_NAMESPACE,
        getTopicsOfNamespace=pb.CommandGetTopicsOfNamespace(request_id=request, namespace=namespace, **fields),  # type: ignore[arg-type]
    )


async def test_get_topics_of_namespace_lists_partitions_filters_by_pattern_and_hashes(door) -> None:
    listener, service = door
    ns = "acme/orders"
    listed = [f"persistent://{ns}/eu-partition-0", f"persistent://{ns}/eu-partition-1", f"persistent://{ns}/us"]
    live = f"non-persistent://{ns}/live"
    service.namespaces[ns] = [*listed, live]
    Mode = pb.CommandGetTopicsOfNamespace.Mode
    async with await _open(listener) as conn:
        await conn.handshake()
        await conn.send(_topics_of(1, ns))
        everything = (await conn.receive()).command.getTopicsOfNamespaceResponse
        assert (everything.request_id, list(everything.topics), everything.filtered) == (1, listed, False)
        assert everything.topics_hash == topic_list.topics_hash(listed) and everything.changed

        await conn.send(_topics_of(2, ns, topics_pattern=f"persistent://{ns}/e.*", mode=Mode.ALL))
        matching = (await conn.receive()).command.getTopicsOfNamespaceResponse
        assert (list(matching.topics), matching.filtered) == (listed[:2], True)  # a partition matches by its topic's name
        await conn.send(_topics_of(7, ns, mode=Mode.ALL))
        assert list((await conn.receive()).command.getTopicsOfNamespaceResponse.topics) == [*listed, live]

        await conn.send(_topics_of(3, ns, topics_pattern=f"persistent://{ns}/e.*", topics_hash=matching.topics_hash))
        same = (await conn.receive()).command.getTopicsOfNamespaceResponse
        assert (list(same.topics), same.changed, same.topics_hash) == ([], False, matching.topics_hash)

        await conn.send(_topics_of(4, ns, mode=Mode.NON_PERSISTENT))
        assert list((await conn.receive()).command.getTopicsOfNamespaceResponse.topics) == [live]

        await conn.send(_topics_of(5, "acme/missing"), _topics_of(6, "not-a-namespace"))
        missing, bad = [(await conn.receive()).command.error for _ in range(2)]
        assert (missing.request_id, missing.error) == (5, pb.TopicNotFound)
        assert (bad.request_id, bad.error) == (6, pb.NotAllowedError) and "namespace" in bad.message


class _NamespaceGate:
    """An authorizer letting roles look up in ``acme/orders`` only; it records the requests."""

    def __init__(self) -> None:
        self.asked: list[tuple[str | None, object]] = []

    async def check(self, role: str | None, request) -> None:  # type: ignore[no-untyped-def]
        self.asked.append((role, request))
        if request.namespace != "acme/orders":
            raise e.AuthorizationError(f"role {role!r} is not authorized to {request.what()}")


async def test_listing_a_namespaces_topics_needs_lookup_there(authenticated_door) -> None:
    gate = _NamespaceGate()
    authenticated_door.service.namespaces.update({"acme/orders": ["persistent://acme/orders/t"], "acme/secret": []})
    authenticated_door.settings = replace(authenticated_door.settings, authorizer=gate)
    async with await _open(authenticated_door) as conn:
        await conn.handshake(token=tokens.create_token("alice", KEY))
        await conn.send(_topics_of(1, "acme/orders"), _topics_of(2, "acme/secret"))
        allowed, refused = [(await conn.receive()).command for _ in range(2)]
    assert list(allowed.getTopicsOfNamespaceResponse.topics) == ["persistent://acme/orders/t"]
    assert (refused.error.request_id, refused.error.error) == (2, pb.AuthorizationError)
    assert [(role, r.action.value, r.namespace) for role, r in gate.asked] == [  # type: ignore[attr-defined]
        ("alice", "lookup", "acme/orders"), ("alice", "lookup", "acme/secret"),
    ]


def test_the_topic_list_hash_is_pulsars_crc32c_of_the_sorted_names() -> None:
    names = ["persistent://a/b/z", "persistent://a/b/c"]
    assert topic_list.topics_hash(names) == crc32c(b"persistent://a/b/c,persistent://a/b/z").to_bytes(4, "little").hex()
    assert topic_list.topics_hash(names) == topic_list.topics_hash(list(reversed(names)))
    assert topic_list.topics_hash([]) == "00000000"


async def test_a_send_with_a_bad_checksum_gets_send_error_checksum_error(door) -> None:
    listener, _ = door
    send = pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=3, sequence_id=8))
    frame = bytearray(encode_payload_command(send, pb.MessageMetadata(producer_name="p", sequence_id=8, publish_time=1), b"x"))
    frame[-1] ^= 1
    async with await _open(listener) as conn:
        await conn.handshake()
        await conn.send_bytes(bytes(frame))
        answer = (await conn.receive()).command
        assert answer.type == T.SEND_ERROR
        assert (answer.send_error.producer_id, answer.send_error.sequence_id, answer.send_error.error) == (3, 8, pb.ChecksumError)
        await conn.send_bytes(bytes(frame[:-1]) + bytes([frame[-1] ^ 1]))  # the same SEND, intact
        answer = (await conn.receive()).command
        assert answer.send_error.error == pb.NotAllowedError and "no producer 3 on this connection" in answer.send_error.message


@pytest.mark.parametrize(
    "garbage",
    [
        b"GET / HTTP/1.1\r\n\r\n",
        struct.pack(">I", 64 * 1024 + 10 * 1024 + 1),  # over the limit: refused from its size
        struct.pack(">II", 6, 2) + b"\x08\x63",  # command type 99
        struct.pack(">II", 6, 2) + b"\xff\xff",
    ],
)
async def test_bytes_that_are_not_frames_get_error_and_close_and_others_go_on(door, garbage: bytes) -> None:
    listener, _ = door
    async with await _open(listener) as bystander, await _open(listener) as conn:
        await bystander.handshake()
        await conn.handshake()
        await conn.send_bytes(garbage)
        assert await conn.closed_by_peer()
        [frame] = conn.frames
        assert frame.command.type == T.ERROR and frame.command.error.message
        await bystander.send(commands.ping())
        assert (await bystander.receive()).command.type == T.PONG
    assert await _wait_for(lambda: listener.connections == 0)


async def test_stop_closes_every_connection(door) -> None:
    listener, _ = door
    conns = [await _open(listener) for _ in range(3)]
    for conn in conns:
        await conn.handshake()
    await listener.stop()
    for conn in conns:
        assert await conn.closed_by_peer()
        conn.writer.close()
    assert listener.connections == 0


async def _wait_for(condition, timeout_s: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.01)
    return True


def test_the_error_table_maps_by_the_nearest_class() -> None:
    assert server_error(e.TopicNotFound("x")) == pb.TopicNotFound
    assert server_error(e.NotOwner("x")) == pb.ServiceNotReady
    assert server_error(e.MetadataVersionConflict("x")) == pb.MetadataError
    assert server_error(e.ChecksumMismatch(1, 2)) == pb.ChecksumError
    assert server_error(e.ProtocolError("x")) == pb.NotAllowedError
    assert server_error(e.TlsHandshakeFailed("x")) == pb.ServiceNotReady
    assert server_error(e.MagnetarError("x")) == pb.UnknownError
    assert all(issubclass(cls, e.MagnetarError) for cls in SERVER_ERRORS)


def test_the_advertised_url_follows_the_advertised_host() -> None:
    assert pulsar_service_urls(BrokerConfig(protocol_port=0)) == ("", "")
    assert pulsar_service_urls(BrokerConfig(host="10.0.0.5", protocol_port=6670)) == ("pulsar://10.0.0.5:6670", "")
    config = BrokerConfig(host="0.0.0.0", advertised_address="broker-0.magnetar:6660", protocol_port=6670)
    assert pulsar_service_urls(config).url == "pulsar://broker-0.magnetar:6670"


def test_encode_command_is_what_the_door_writes() -> None:  # the helper's frames are the codec's
    assert encode_command(commands.pong()) == struct.pack(">II", 9, 5) + commands.pong().SerializeToString()


KEY = b"k" * 32


@pytest.fixture
async def authenticated_door() -> AsyncIterator[ProtocolListener]:
    config = BrokerConfig(protocol_port=free_port(), protocol_keepalive_s=5)
    listener = ProtocolListener(FakeService(pulsar_service_urls(config)), config, tokens.TokenAuthenticator("HS256", KEY))  # type: ignore[arg-type]
    await listener.start()
    try:
        yield listener
    finally:
        await listener.stop()


@pytest.mark.parametrize(
    ("connect", "says"),
    [
        (connect_command(), "no token was presented"),
        (connect_command(token="not-a-token"), ""),
        (connect_command(token=tokens.create_token("alice", b"x" * 32)), ""),  # another key
        (connect_command(token=tokens.create_token("alice", KEY, expires_in_s=-60)), ""),
    ],
)
async def test_with_authentication_on_connect_needs_a_valid_token(authenticated_door, connect, says: str) -> None:
    async with await _open(authenticated_door) as conn:
        await conn.send(connect)
        assert await conn.closed_by_peer()
        [frame] = conn.frames
        assert frame.command.type == T.ERROR and frame.command.error.error == pb.AuthenticationError
        assert says in frame.command.error.message


async def test_with_authentication_on_a_valid_token_connects(authenticated_door) -> None:
    async with await _open(authenticated_door) as conn:
        await conn.handshake(token=tokens.create_token("alice", KEY))
        await conn.send(lookup_command("t", 1))
        assert (await conn.receive()).command.lookupTopicResponse.response == pb.CommandLookupTopicResponse.Connect


# -- credentials that expire: AUTH_CHALLENGE / AUTH_RESPONSE ---------------------------------
def _refreshing_connect(token: str, supports_refresh: bool = True) -> pb.BaseCommand:
    command = connect_command(token=token)
    command.connect.feature_flags.supports_auth_refresh = supports_refresh
    return command


def _auth_response(token: str) -> pb.BaseCommand:
    return pb.BaseCommand(type=T.AUTH_RESPONSE, authResponse=pb.CommandAuthResponse(
        client_version="Pulsar-CPP-v4.2.0", protocol_version=20,
        response=pb.AuthData(auth_method_name="token", auth_data=token.encode()),
    ))  # fmt: skip


@pytest.fixture
async def refreshing_door(authenticated_door) -> ProtocolListener:
    authenticated_door.settings = replace(authenticated_door.settings, auth_refresh_timeout_s=0.5)
    return authenticated_door


async def test_expiring_credentials_are_challenged_and_a_fresh_answer_keeps_the_connection(refreshing_door) -> None:
    async with await _open(refreshing_door) as conn:
        await conn.send(_refreshing_connect(tokens.create_token("alice", KEY, expires_in_s=1)))
        assert (await conn.receive()).command.type == T.CONNECTED
        challenge = (await conn.receive(timeout_s=3)).command  # when the token expires
        assert challenge.type == T.AUTH_CHALLENGE and challenge.authChallenge.challenge.auth_method_name == "token"
        await conn.send(_auth_response(tokens.create_token("alice", KEY, expires_in_s=2)))
        await conn.send(lookup_command("t", 1))  # the connection goes on
        assert (await conn.receive()).command.type == T.LOOKUP_RESPONSE
        assert (await conn.receive(timeout_s=4)).command.type == T.AUTH_CHALLENGE  # the fresh token's exp, in turn
        await conn.send(_auth_response(tokens.create_token("alice", KEY)), lookup_command("t", 2))  # no exp: never again
        assert (await conn.receive()).command.lookupTopicResponse.request_id == 2
        with pytest.raises(TimeoutError):
            await conn.receive(timeout_s=1.5)


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (None, "no fresh ones came within 0.5 s"),
        (tokens.create_token("mallory", KEY), "role 'mallory', not 'alice'"),
        (tokens.create_token("alice", b"y" * 32), "refreshed credentials fail"),
    ],
)
async def test_expired_credentials_without_a_good_answer_close_the_connection(refreshing_door, answer, says: str) -> None:
    async with await _open(refreshing_door) as conn:
        await conn.send(_refreshing_connect(tokens.create_token("alice", KEY, expires_in_s=1)))
        assert (await conn.receive()).command.type == T.CONNECTED
        assert (await conn.receive(timeout_s=3)).command.type == T.AUTH_CHALLENGE
        if answer is not None:
            await conn.send(_auth_response(answer))
        assert await conn.closed_by_peer()
        error = conn.frames[-1].command
        assert error.type == T.ERROR and error.error.error == pb.AuthenticationError and says in error.error.message


async def test_a_client_that_cannot_refresh_is_closed_when_its_token_expires(refreshing_door) -> None:
    async with await _open(refreshing_door) as conn:
        await conn.send(_refreshing_connect(tokens.create_token("alice", KEY, expires_in_s=1), supports_refresh=False))
        assert (await conn.receive()).command.type == T.CONNECTED
        assert await conn.closed_by_peer()
        assert "cannot refresh them" in conn.frames[-1].command.error.message


# -- TLS (pulsar+ssl://) ----------------------------------------------------------------------


@dataclass
class TlsDoor:
    listener: ProtocolListener
    service: FakeService
    ca: TestCa
    client: Issued


async def _tls_door(tmp_path: Path, *, require_client_cert: bool) -> TlsDoor:
    ca = TestCa.create(tmp_path / "ca")
    node = ca.issue("node", ["127.0.0.1"])
    config = BrokerConfig(
        protocol_port=free_port(), protocol_tls_port=free_port(), protocol_keepalive_s=5, tls_enabled=True,
        tls_cert_file=node.cert_file, tls_key_file=node.key_file, tls_trust_certs_file=ca.cert_file,
        tls_require_client_cert=require_client_cert,
    )  # fmt: skip
    service = FakeService(pulsar_service_urls(config))
    tls = server_tls(config)
    assert tls is not None
    listener = ProtocolListener(service, config, tls=server_ssl_context(tls))  # type: ignore[arg-type]
    await listener.start()
    return TlsDoor(listener, service, ca, ca.issue("client", []))


@pytest.fixture
async def tls_door(tmp_path: Path) -> AsyncIterator[TlsDoor]:
    door = await _tls_door(tmp_path, require_client_cert=False)
    try:
        yield door
    finally:
        await door.listener.stop()


def test_with_tls_a_broker_advertises_both_urls_and_without_only_the_plain_one(tmp_path: Path) -> None:
    ca = TestCa.create(tmp_path / "ca")
    node = ca.issue("node", ["127.0.0.1"])
    tls = {"tls_enabled": True, "tls_cert_file": node.cert_file, "tls_key_file": node.key_file}
    assert pulsar_service_urls(BrokerConfig(host="10.0.0.5", **tls)) == ("pulsar://10.0.0.5:6650", "pulsar+ssl://10.0.0.5:6651")
    assert pulsar_service_urls(BrokerConfig(host="10.0.0.5", protocol_port=0, **tls)) == ("", "pulsar+ssl://10.0.0.5:6651")
    assert pulsar_service_urls(BrokerConfig(host="10.0.0.5", protocol_tls_port=0, **tls)).url_tls == ""
    # Without TLS settings there is nothing to serve pulsar+ssl:// with.
    assert pulsar_service_urls(BrokerConfig(host="10.0.0.5")) == ("pulsar://10.0.0.5:6650", "")


async def test_lookups_on_the_tls_port_answer_with_the_owners_tls_url(tls_door: TlsDoor) -> None:
    listener, service = tls_door.listener, tls_door.service
    service.owners = {
        "persistent://public/default/there": OTHER,
        "persistent://public/default/plain": PLAIN,
    }
    context = https_context(ClientTls(tls_door.ca.cert_file))
    async with await RawPulsarConnection.open("127.0.0.1", listener.port, ssl=context) as conn:
        await conn.handshake()
        await conn.send(lookup_command("here", 1), lookup_command("there", 2), lookup_command("plain", 3))
        answers = {f.command.lookupTopicResponse.request_id: f.command.lookupTopicResponse for f in [await conn.receive() for _ in range(3)]}
    kind = pb.CommandLookupTopicResponse
    assert answers[1].response == kind.Connect
    assert (answers[1].brokerServiceUrl, answers[1].brokerServiceUrlTls) == service.pulsar_urls
    assert answers[1].brokerServiceUrlTls == f"pulsar+ssl://127.0.0.1:{listener.port}"
    assert answers[2].response == kind.Redirect and answers[2].authoritative
    assert (answers[2].brokerServiceUrl, answers[2].brokerServiceUrlTls) == ("pulsar://127.0.0.1:7001", "pulsar+ssl://127.0.0.1:7002")
    # An owner serving no pulsar+ssl://: a TLS client is not sent to its plain-text port.
    assert answers[3].response == kind.Failed and answers[3].error == pb.ServiceNotReady
    assert PLAIN in answers[3].message and "pulsar+ssl://" in answers[3].message


async def test_lookups_on_the_plain_port_carry_the_tls_url_too(door) -> None:
    listener, service = door
    service.owners = {"persistent://public/default/there": OTHER}
    async with await _open(listener) as conn:
        await conn.handshake()
        await conn.send(lookup_command("there", 1))
        answer = (await conn.receive()).command.lookupTopicResponse
    assert (answer.brokerServiceUrl, answer.brokerServiceUrlTls) == ("pulsar://127.0.0.1:7001", "pulsar+ssl://127.0.0.1:7002")


async def test_a_client_not_trusting_the_brokers_ca_is_refused(tls_door: TlsDoor, tmp_path: Path) -> None:
    stranger = TestCa.create(tmp_path / "other", "Another CA")
    with pytest.raises(ssl.SSLCertVerificationError):
        await RawPulsarConnection.open("127.0.0.1", tls_door.listener.port, ssl=https_context(ClientTls(stranger.cert_file)))
    # A plain-text client on the TLS port gets no Pulsar frame back.
    async with await RawPulsarConnection.open("127.0.0.1", tls_door.listener.port) as conn:
        await conn.send(connect_command())
        assert await conn.closed_by_peer()
        assert conn.frames == []


async def test_with_client_certificates_required_only_a_client_showing_one_connects(tmp_path: Path) -> None:
    door = await _tls_door(tmp_path, require_client_cert=True)
    try:
        anonymous = https_context(ClientTls(door.ca.cert_file))
        with pytest.raises((ssl.SSLError, ConnectionError, EOFError)):  # TLS 1.3: the refusal comes with the first read
            async with await RawPulsarConnection.open("127.0.0.1", door.listener.port, ssl=anonymous) as conn:
                await conn.handshake()
        known = https_context(ClientTls(door.ca.cert_file, door.client.cert_file, door.client.key_file))
        async with await RawPulsarConnection.open("127.0.0.1", door.listener.port, ssl=known) as conn:
            assert (await conn.handshake()).server_version == SERVER_VERSION
    finally:
        await door.listener.stop()
