"""Authentication at the Pulsar protocol door with the real client (pulsar-client's C++
core): a token, a basic user, a wrong password, and a client presenting nothing — the
anonymous role where one is set, refused where none is. The same authentication service
as the gRPC and HTTP doors decides (common/authentication.py).

No bookies: CONNECT and partition counts open no ledger."""

from __future__ import annotations

import asyncio
import time

import pulsar
import pytest

from magnetar.common import shacrypt
from magnetar.common.netutil import free_port
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.testing.auth import Keys
from magnetar.testing.pulsarclient import LINES, pulsar_client
from magnetar.testing.pulsarwire import RawPulsarConnection, connect_command

pytestmark = pytest.mark.integration

USER, PASSWORD = "app-basic", "correct horse battery staple"


class Doors:
    def __init__(self, keys: Keys, open_url: str, closed_url: str) -> None:
        self.keys = keys
        self.open_url = open_url  # anonymous_user_role set
        self.closed_url = closed_url  # no anonymous role


@pytest.fixture(scope="module")
def doors(module_broker_factory, tmp_path_factory) -> Doors:
    directory = tmp_path_factory.mktemp("pulsar-auth")
    keys = Keys.make(directory)
    passwords = directory / "passwords"
    passwords.write_text(f"{USER}:{shacrypt.hash_password(PASSWORD)}\n")
    ways_in = {"authentication_providers": ["token", "basic"], "basic_auth_conf": str(passwords),
               "broker_client_auth_token_file": str(keys.service_token_file)}  # fmt: skip
    ports = [free_port(), free_port()]
    while ports[1] == ports[0]:
        ports[1] = free_port()
    module_broker_factory(protocol_port=ports[0], **keys.settings(anonymous_user_role="anonymous-app", **ways_in))
    module_broker_factory(protocol_port=ports[1], **keys.settings(**ways_in))
    return Doors(keys, f"pulsar://127.0.0.1:{ports[0]}", f"pulsar://127.0.0.1:{ports[1]}")


def _partitions(url: str, authentication: object | None) -> list[str] | str:
    """The topic's partitions as the client reads them, or the name of its error."""
    kwargs = {"authentication": authentication} if authentication is not None else {}
    client = pulsar_client(url, operation_timeout_seconds=2, connection_timeout_ms=2000, **kwargs)
    try:
        return client.get_topic_partitions("persistent://public/default/auth-probe")
    except Exception as exc:  # the C++ result's exception class names it
        return type(exc).__name__
    finally:
        client.close()


async def test_the_real_client_gets_in_with_a_token_a_basic_user_or_as_the_anonymous_role(doors: Doors) -> None:
    topic = ["persistent://public/default/auth-probe"]
    cases = {
        "token": (doors.closed_url, pulsar.AuthenticationToken(doors.keys.token("app-token"))),
        "basic": (doors.closed_url, pulsar.AuthenticationBasic(USER, PASSWORD)),
        "nothing, anonymous role": (doors.open_url, None),
        "wrong password": (doors.closed_url, pulsar.AuthenticationBasic(USER, "wrong")),
        "nothing, no anonymous role": (doors.closed_url, None),
    }
    got = {name: await asyncio.to_thread(_partitions, url, auth) for name, (url, auth) in cases.items()}
    # The C++ client reports a refused CONNECT as a lost connection (it closes on any
    # answer but CONNECTED, and retries until its operation timeout): the refusal's
    # reason is checked on the wire below.
    refused = {"ConnectError", "Timeout"}
    assert {k: v for k, v in got.items() if v == topic} == {k: topic for k in ("token", "basic", "nothing, anonymous role")}
    assert got["wrong password"] in refused and got["nothing, no anonymous role"] in refused, got


def _connect(method: str, data: bytes) -> pb.BaseCommand:
    command = connect_command()
    if method:
        command.connect.auth_method_name = method
        command.connect.auth_data = data
    return command


async def _answer(url: str, command: pb.BaseCommand) -> tuple[str, str]:
    host, port = url.removeprefix("pulsar://").split(":")
    async with await RawPulsarConnection.open(host, int(port)) as conn:
        await conn.send(command)
        frame = await conn.receive()
        if frame.command.type == pb.BaseCommand.CONNECTED:
            return "CONNECTED", ""
        error = frame.command.error
        assert await conn.closed_by_peer(), "a refused CONNECT closes the connection"
        return pb.ServerError.Name(error.error), error.message


async def test_each_refusal_is_an_authentication_error_with_its_reason(doors: Doors) -> None:
    basic = f"{USER}:{PASSWORD}".encode()
    cases = {
        "basic": (doors.closed_url, _connect("basic", basic)),
        "wrong password": (doors.closed_url, _connect("basic", f"{USER}:wrong".encode())),
        "unknown user": (doors.open_url, _connect("basic", f"nobody:{PASSWORD}".encode())),
        "bad token": (doors.open_url, _connect("token", b"not-a-jwt")),
        "unknown method": (doors.open_url, _connect("athenz", b"x")),
        "nothing, anonymous role": (doors.open_url, _connect("", b"")),
        "nothing, no anonymous role": (doors.closed_url, _connect("", b"")),
    }
    got = {name: await _answer(url, command) for name, (url, command) in cases.items()}
    assert got["basic"] == got["nothing, anonymous role"] == ("CONNECTED", "")
    for name in ("wrong password", "unknown user", "bad token", "unknown method", "nothing, no anonymous role"):
        assert got[name][0] == "AuthenticationError", (name, got[name])
    assert "password is wrong" in got["wrong password"][1] and got["wrong password"][1] == got["unknown user"][1]
    assert PASSWORD not in "".join(message for _, message in got.values())  # never echoed


async def test_a_token_that_expires_is_refreshed_on_the_open_connection(doors: Doors) -> None:
    """pulsar-client with a token supplier: each token lives 2 s; the broker challenges the
    connection as each expires (AUTH_CHALLENGE), the client answers with the supplier's
    next token (AUTH_RESPONSE), and the one connection serves on past several expiries."""
    issued: list[float] = []

    def supplier() -> str:
        issued.append(time.monotonic())
        return doors.keys.token("app-token", expires_in_s=2)

    def run() -> tuple[list[list[str]], int]:
        client = pulsar_client(doors.closed_url, operation_timeout_seconds=5, connection_timeout_ms=2000,
                               authentication=pulsar.AuthenticationToken(supplier))  # fmt: skip
        try:
            answers = []
            deadline = time.monotonic() + 6
            while time.monotonic() < deadline:
                answers.append(client.get_topic_partitions("persistent://public/default/refresh-probe"))
                time.sleep(0.2)
            connects = sum("Connected to broker" in line for line in LINES.lines[first_line:])
            return answers, connects
        finally:
            client.close()

    first_line = len(LINES.lines)
    answers, connects = await asyncio.to_thread(run)
    assert all(a == ["persistent://public/default/refresh-probe"] for a in answers)
    assert len(issued) >= 3, issued  # CONNECT's token and at least two refreshes in 6 s
    assert connects == 1, LINES.lines[first_line:]  # one connection throughout
