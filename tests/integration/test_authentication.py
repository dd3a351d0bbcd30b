"""Token authentication with real processes: bookies and a broker with authentication
on, the broker presenting its service token to the bookies.

- a bookie refuses a direct AddEntries without a token (UNAUTHENTICATED) or with a
  token of a role that is not a superuser (PERMISSION_DENIED), and takes it with a
  superuser's token; its health check stays open;
- the broker refuses an anonymous producer and a token signed with another key
  (AuthenticationError, not retried), and a valid token produces and consumes;
- ``magnetar admin``, ``produce`` and ``consume`` present ``--auth-token``,
  ``--auth-token-file`` or ``MAGNETAR_AUTH_TOKEN``;
- the gateway presents its service token to the brokers (one without gets 401s);
- an auditor with authentication on answers superuser roles only.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest

import magnetar.asyncio as ma
from magnetar.auditor.rpc.client import fetch_status, forward_trigger
from magnetar.client.framed import FramedSessionTransport
from magnetar.common import tokens
from magnetar.common.errors import AuthenticationError, AuthorizationError
from magnetar.common.grpcauth import BEARER
from magnetar.common.healthcheck import grpc_health_serving
from magnetar.ledger.bookie_client import BookieClient, Entry
from magnetar.testing.auth import SERVICE_ROLE, Keys
from magnetar.testing.processes import (
    AuditorProcess,
    BookieProcess,
    BrokerProcess,
    GatewayProcess,
    ServiceFactory,
    start_all,
)
from magnetar.testing.shell import MAGNETAR

pytestmark = pytest.mark.integration

@pytest.fixture
def broker(keys: Keys, bookie_factory: ServiceFactory[BookieProcess],
           broker_factory: ServiceFactory[BrokerProcess]) -> BrokerProcess:
    broker = broker_factory.create(
        ensemble_size=2, write_quorum=2, ack_quorum=2,
        **keys.settings(broker_client_auth_token_file=str(keys.service_token_file)),
    )
    start_all([bookie_factory.create(**keys.settings()), bookie_factory.create(**keys.settings()), broker])  # start-ups overlap
    return broker


async def test_a_bookie_with_authentication_on_takes_adds_from_superusers_only(
    keys: Keys, bookie_factory: ServiceFactory[BookieProcess]
) -> None:
    bookie = bookie_factory(**keys.settings())
    assert grpc_health_serving(bookie.address)  # probes need no token
    entry = Entry(ledger_id=4242, entry_id=0, last_add_confirmed=-1, payload=b"x")
    refusals = [
        (None, AuthenticationError, "no token"),
        (tokens.create_token(SERVICE_ROLE, b"another key of 32 bytes or more!!"), AuthenticationError, "signature"),
        (keys.token(SERVICE_ROLE, expires_in_s=1, now=1_000_000), AuthenticationError, "expired"),
        (keys.token("app-1"), AuthorizationError, "superuser role is required"),
    ]
    for token, error, reason in refusals:
        async with BookieClient(bookie.address, timeout_s=5, token=token) as client:
            with pytest.raises(error, match=reason):
                await client.add_entries([entry])
            with pytest.raises(error, match=reason):
                await client.fence(entry.ledger_id)
    async with BookieClient(bookie.address, timeout_s=5, token=keys.service_token) as client:
        assert await client.add_entries([entry]) == []
        assert (await client.read_entry(4242, 0)).payload == b"x"
    log = bookie.log_tail(400)
    assert "bookie refused /magnetar.v1.Bookie/AddEntries: authentication required" in log
    assert keys.service_token not in log


async def test_the_broker_refuses_anonymous_and_foreign_tokens_and_serves_valid_ones(
    keys: Keys, broker: BrokerProcess
) -> None:
    foreign = tokens.create_token("app-1", tokens.generate_secret_key())
    for auth, reason in ((None, "no token was presented"), (ma.AuthenticationToken(foreign), "does not verify")):
        client = ma.Client(broker.address, authentication=auth, operation_timeout_seconds=20)
        started = time.monotonic()
        try:
            with pytest.raises(AuthenticationError, match=reason):
                await client.create_producer("secured")
            with pytest.raises(AuthenticationError):
                await client.subscribe("secured", "sub")
        finally:
            await client.close()
        assert time.monotonic() - started < 10  # fatal: not retried until the timeout

    # A valid token of any role: produce, then consume (the broker writes to the bookies
    # with its own service token).
    client = ma.Client(broker.address, authentication=ma.AuthenticationToken(lambda: keys.token("app-1")))
    try:
        consumer = await client.subscribe("secured", "sub", initial_position=ma.InitialPosition.Earliest)
        producer = await client.create_producer("secured")
        sent = [await producer.send(f"m{i}".encode()) for i in range(5)]
        got = []
        for _ in sent:
            msg = await consumer.receive(timeout_millis=10_000)
            got.append(msg.data())
            await consumer.acknowledge(msg)
        assert got == [f"m{i}".encode() for i in range(5)]
        # over the broker's framed session, whose first frame carried the token
        assert isinstance(client._pool.session(broker.address).transport, FramedSessionTransport)
    finally:
        await client.close()
    # The framed session's first frame is checked as a gRPC call's metadata is.
    for header, reason in (("", "no token was presented"), (BEARER + foreign, "does not verify")):
        framed = FramedSessionTransport(f"{broker.host}:{broker.session_port}", "the broker", authorization=header)
        try:
            with pytest.raises(AuthenticationError, match=reason):
                await asyncio.wait_for(framed.read(), 10)
        finally:
            framed.cancel()
    log = broker.log_tail(400)
    assert "broker refused /magnetar.v1.Broker/" in log and foreign not in log
    assert "broker refused framed session from" in log


def _magnetar(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "MAGNETAR_AUTH_TOKEN"}
    return subprocess.run([MAGNETAR, *args], capture_output=True, text=True, timeout=60, env=base | (env or {}))


def test_the_cli_tools_present_a_token(keys: Keys, broker: BrokerProcess, tmp_path: Path) -> None:
    url = ["--url", broker.address]
    refused = _magnetar("admin", *url, "tenants", "list")
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.strip().splitlines() == ["magnetar admin: authentication required: no token was presented"]

    token = keys.token("ops")
    created = _magnetar("admin", *url, "--auth-token", token, "tenants", "create", "acme")
    assert created.returncode == 0, created.stderr
    token_file = tmp_path / "ops.token"
    token_file.write_text(token)
    listed = _magnetar("admin", *url, "--auth-token-file", str(token_file), "tenants", "list")
    assert listed.returncode == 0 and "acme" in listed.stdout.splitlines(), listed.stderr

    env = {"MAGNETAR_AUTH_TOKEN": token}
    produced = _magnetar("produce", "cli-secured", *url, "-m", "hello", "-n", "2", env=env)
    assert produced.returncode == 0, produced.stderr
    consumed = _magnetar("consume", "cli-secured", *url, "-s", "s", "-p", "Earliest", "-n", "2", "--timeout", "10",
                         env=env)
    assert consumed.returncode == 0 and consumed.stdout.count("content:hello") == 2, consumed.stderr
    wrong = _magnetar("produce", "cli-secured", *url, "-m", "x", "--auth-token", "not-a-token")
    assert wrong.returncode == 1 and wrong.stderr.strip().splitlines() == [
        "magnetar produce: the token is malformed (not a JWT)"
    ]


async def test_the_gateway_presents_its_service_token_to_the_brokers(
    keys: Keys, broker: BrokerProcess, gateway_factory: ServiceFactory[GatewayProcess]
) -> None:
    with_token = gateway_factory(broker_refresh_interval_s=0.5, broker_client_auth_token_file=str(keys.service_token_file))
    without = gateway_factory(broker_refresh_interval_s=0.5)
    topic = "/admin/v2/persistent/public/default/gw-secured"
    async with httpx.AsyncClient(base_url=with_token.url, timeout=30) as http:
        assert (await http.put(topic)).status_code == 204
        assert (await http.get(f"{topic}/stats")).status_code == 200
    async with httpx.AsyncClient(base_url=without.url, timeout=30) as http:
        refused = await http.get(f"{topic}/stats")
        assert refused.status_code == 401 and "no token" in refused.json()["reason"]


async def test_an_auditor_with_authentication_on_answers_superusers_only(
    keys: Keys, bookie_factory: ServiceFactory[BookieProcess], auditor_factory: ServiceFactory[AuditorProcess]
) -> None:
    bookie_factory(**keys.settings())
    auditor = auditor_factory(**keys.settings(broker_client_auth_token_file=str(keys.service_token_file)))
    with pytest.raises(AuthenticationError, match="no token"):
        await fetch_status(auditor.address)
    with pytest.raises(AuthorizationError, match="superuser"):
        await forward_trigger(auditor.address, token=keys.token("app-1"))
    status = await fetch_status(auditor.address, token=keys.service_token)
    assert status.auditor_id == auditor.address
    report = await forward_trigger(auditor.address, token=keys.service_token)
    assert report.auditor_id == auditor.address
