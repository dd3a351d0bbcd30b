"""Hostile requests with authentication on (issue 20): the RPC fuzzer's inputs to every
gRPC method of the broker, bookie and auditor, each carrying a token that must not let
it in (none, garbage, signed with another key, expired) or a valid token of an ordinary
role ("app": the bookie and the auditor take superusers only; the broker checks its
permissions, with authorization on and no grant to "app").

Every call ends with a status (no escaped exception); a refused call gets no response and
a refusal status; every process keeps serving and logs no traceback; and nothing changed:
the tenants, namespaces and topics a superuser sees, and the fuzzed bookie's ledgers, are
what they were. The fuzzing with a superuser's token (everything let in) is
test_rpc_fuzz.py's, against services with authentication off.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest
from fuzzsettings import EXAMPLES, LONG, record_result
from rpcfuzz import Outcome, Plan, methods, plans, run_many
from test_rpc_fuzz import (
    CONCURRENCY,
    SEED,
    TIMEOUT_S,
    bpb_grpc_stub,
    broker_stub,
    channel,
    check_processes,
    generator,
    start_cluster,
)
from test_rpc_fuzz import Cluster as PlainCluster

from magnetar.common.grpcauth import AUTHORIZATION_KEY, BEARER
from magnetar.common.tokens import create_token
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.proto.v1 import bookie_pb2 as bpb
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.testing.auth import SERVICE_ROLE, Keys
from magnetar.testing.pytest_plugin import track_process

pytestmark = [pytest.mark.integration]

PER_TOKEN = max(3, EXAMPLES // 200) if LONG else 3
"""Inputs per method and token kind: 3 in the bounded run, EXAMPLES/200 in a long one."""
OUT = ("none", "garbage", "other-key", "expired")
"""Tokens that must not let a call in."""
REFUSED = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED}
# Refusals that come before authentication: request bytes that are not the message
# (MalformedRequestGuard is the first interceptor) and messages over the size limit.
BEFORE_AUTH = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED}
CLIENT_SIDE = "Internal error from Core"
"""What grpc's client reports when it still writes frames of a stream the server already
ended (refused): a failed send, INTERNAL of its own; the server's status is lost."""


@dataclass
class AuthCluster(PlainCluster):
    keys: Keys | None = None

    def metadata(self, kind: str) -> tuple[tuple[str, str], ...]:
        assert self.keys is not None
        token = {
            "none": None,
            "garbage": "eyJhbGciOiJIUzI1NiJ9.not-json.c2lnbmF0dXJl",
            "other-key": create_token(SERVICE_ROLE, b"another secret key, 32 bytes or more"),
            "expired": self.keys.token(SERVICE_ROLE, expires_in_s=1, now=1_000_000),
            "app": self.keys.token("app"),
            "superuser": self.keys.service_token,
        }[kind]
        return () if token is None else ((AUTHORIZATION_KEY, BEARER + token),)


@pytest.fixture(scope="module")
def cluster(zk_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthCluster]:
    base = tmp_path_factory.mktemp("rpcfuzz-auth")
    keys = Keys.make(base)
    # The broker and the auditor reach the bookies (and the broker itself) as the service.
    service = {"broker_client_auth_token_file": str(keys.service_token_file)}
    with start_cluster(
        zk_server, base, "rpcfuzz-auth", keys.settings(), broker={"authorization_enabled": True, **service}, auditor=service,
    ) as (bookie, broker, auditor, storage):
        yield AuthCluster(bookie, broker, auditor, storage, keys=keys)


@pytest.fixture(autouse=True)
def _logs_on_failure(cluster: AuthCluster, request: pytest.FixtureRequest) -> None:
    for p in cluster.processes:
        track_process(request.node, p)


async def what_a_superuser_sees(cluster: AuthCluster) -> dict[str, object]:
    """Tenants, their namespaces and topics (the broker), and the fuzzed bookie's ledgers."""
    su = cluster.metadata("superuser")
    seen: dict[str, object] = {}
    async with channel(cluster.broker) as ch:
        stub = broker_stub(ch)
        for tenant in (await stub.ListTenants(pb.ListTenantsRequest(), metadata=su, timeout=TIMEOUT_S)).names:
            namespaces = (await stub.ListNamespaces(pb.ListNamespacesRequest(tenant=tenant), metadata=su, timeout=TIMEOUT_S)).names
            seen[tenant] = {
                ns: sorted((await stub.ListTopics(pb.ListTopicsRequest(namespace=ns), metadata=su, timeout=TIMEOUT_S)).names)
                for ns in namespaces
            }
    async with channel(cluster.bookie) as ch:
        ledgers = await bpb_grpc_stub(ch).ListLedgers(bpb.ListLedgersRequest(), metadata=su, timeout=TIMEOUT_S)
        seen["bookie ledgers"] = sorted(ledgers.ledger_ids)
    return seen


def refusal(outcome: Outcome) -> bool:
    """The call ended as a refused one does: a refusal status, or one that came before
    the door, or a stream we cut or grpc's client ended (see CLIENT_SIDE)."""
    if outcome.code in REFUSED | BEFORE_AUTH:
        return True
    if outcome.code == grpc.StatusCode.CANCELLED:
        return outcome.cancelled_by_us
    return outcome.method in STREAMS and outcome.code == grpc.StatusCode.INTERNAL and outcome.details == CLIENT_SIDE


STREAMS = {m.name for m in methods() if m.client_streaming}


@pytest.mark.parametrize("service", ["Broker", "Bookie", "Auditor"])
async def test_hostile_requests_with_tokens_that_must_not_let_them_in(cluster: AuthCluster, service: str) -> None:
    cluster.new_log_problems()
    before = await what_a_superuser_sees(cluster)
    problems: list[str] = []
    codes: dict[str, dict[str, int]] = {}
    sent = 0
    seconds = 0.0
    # The bookie and the auditor let superusers in only; the broker lets "app" in and
    # checks its permissions per call (it has none).
    kinds = [*OUT, "app"]
    for method in [m for m in methods() if m.containing_service.name == service]:
        gen = generator(f"auth:{method.full_name}")
        for kind in kinds:
            counted = codes.setdefault(kind, {})
            refused_at_door = kind in OUT or service != "Broker"

            def check(plan: Plan, outcome: Outcome, kind: str = kind, refused_at_door: bool = refused_at_door,
                      counted: dict[str, int] = counted) -> None:  # fmt: skip
                counted[outcome.code.name] = counted.get(outcome.code.name, 0) + 1
                if outcome.crashed:
                    problems.append(f"{kind}: crashed: {outcome.describe()}")
                elif refused_at_door and (outcome.responses or not refusal(outcome)):
                    problems.append(f"{kind}: let in: {outcome.describe()} ({len(outcome.responses)} responses)")

            async with channel(cluster.target(method)) as ch:
                n, s = await run_many(ch, itertools.islice(plans(gen, method, PER_TOKEN), PER_TOKEN), timeout=TIMEOUT_S,
                                      on_outcome=check, concurrency=CONCURRENCY, metadata=cluster.metadata(kind))  # fmt: skip
            sent, seconds = sent + n, seconds + s
            assert not problems, f"seed {SEED}, {method.full_name}:\n" + "\n".join(problems[:10])
    print(f"{service} with tokens {kinds}: {sent} inputs in {seconds:.1f} s; {codes}")
    for kind in OUT:
        assert codes[kind].get("UNAUTHENTICATED", 0) > 0, codes  # the door was reached
    await check_processes(cluster)
    assert await what_a_superuser_sees(cluster) == before
    record_result("rpc-auth", service, inputs=sent, seconds=seconds, seed=SEED, codes=codes)
