"""Hostile requests to every gRPC method of the broker, bookie and auditor (issue 20).

For each of the 83 RPCs, ``EXAMPLES`` inputs from :mod:`rpcfuzz` (random fields, raw
mutated bytes, oversized messages, streams cut mid-conversation), many in flight. After
every batch: each call ended with a status that is not an escaped exception, every
process is alive and its health check serves, and no new traceback is in its log. Then
"stores nothing it refused": refused adds, sends and admin changes leave no trace.

The bounded run (``make test``) uses a fixed seed; ``make fuzz`` a fresh one, printed.
Replay a run with ``MAGNETAR_FUZZ_SEED=<seed>``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from fuzzsettings import EXAMPLES, LONG, record_result
from google.protobuf.descriptor import MethodDescriptor
from rpcfuzz import (
    Outcome,
    Plan,
    RequestGenerator,
    channel_options,
    cut_connection,
    methods,
    path,
    plans,
    run_many,
)

from magnetar.common.healthcheck import grpc_health_serving
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.proto.v1 import bookie_pb2 as bpb
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.testing.processes import (
    AuditorProcess,
    BookieProcess,
    BrokerProcess,
    ServiceProcess,
    start_all,
)
from magnetar.testing.pytest_plugin import track_process

pytestmark = [pytest.mark.integration]

SEED = int(os.environ.get("MAGNETAR_FUZZ_SEED") or (random.SystemRandom().randrange(2**32) if LONG else 20))
BATCH = 5000
"""Inputs between two checks of the processes (health, logs)."""
TIMEOUT_S = 30.0
CONCURRENCY = 48
"""Calls in flight at once per method. TriggerAudit too: concurrent triggers share one
audit (they once queued one whole audit each, and CI saw 31 of 100 pass the deadline)."""
BROKER_MAX_MESSAGE = 64 * 1024
LOG_MARKERS = ("Traceback", "Task exception was never retrieved", "Unexpected [", "exception was never retrieved")
ZOOKEEPER_LOG_MARKERS = ("Len error", "OutOfMemoryError")
"""What ZooKeeper logs when a client's request is over ``jute.maxbuffer`` (it then drops
that client's session), or when it ran out of heap."""
ALL = methods()
assert len(ALL) == 89, [m.name for m in ALL]


@dataclass
class Cluster:
    """The processes under test: a bookie of its own for the Bookie fuzzing (so fenced and
    deleted ledgers hurt no one), and a broker, its bookie and an auditor."""

    bookie: BookieProcess
    broker: BrokerProcess
    auditor: AuditorProcess
    storage: BookieProcess
    zookeeper: ZooKeeperServer | None = None
    log_offsets: dict[str, int] = field(default_factory=dict)

    @property
    def processes(self) -> list[ServiceProcess]:
        return [self.bookie, self.broker, self.auditor, self.storage]

    def target(self, method: MethodDescriptor) -> ServiceProcess:
        return {"Bookie": self.bookie, "Broker": self.broker, "Auditor": self.auditor}[method.containing_service.name]

    def new_log_problems(self) -> list[str]:
        """Lines around each traceback logged since the last call, and around each
        oversized request ZooKeeper logged."""
        logs = [(p.name, Path(p.log_path), LOG_MARKERS) for p in self.processes]
        if self.zookeeper is not None:
            logs.append(("zookeeper", self.zookeeper.log_path, ZOOKEEPER_LOG_MARKERS))
        problems = []
        for name, log_path, markers in logs:
            text = log_path.read_bytes() if log_path.exists() else b""
            start = self.log_offsets.get(name, 0)
            self.log_offsets[name] = len(text)
            new = text[start:].decode(errors="replace")
            for marker in markers:
                at = new.find(marker)
                if at >= 0:
                    problems.append(f"{name}: {new[max(0, at - 600): at + 2000]}")
                    break
        return problems


@contextmanager
def start_cluster(
    zk_server: ZooKeeperServer, base: Path, prefix: str, common: dict[str, object] | None = None,
    broker: dict[str, object] | None = None, auditor: dict[str, object] | None = None,
) -> Iterator[tuple[BookieProcess, BrokerProcess, AuditorProcess, BookieProcess]]:
    """The four processes of a :class:`Cluster` (fuzzed bookie, broker, auditor, the
    broker's bookie) on metadata roots named after ``prefix``, killed on exit, with the
    settings ``common`` to all of them, and ``broker`` and ``auditor`` to those."""
    if not zk_server.alive:
        zk_server.start()
    zk, common = zk_server.connect_string, common or {}
    root, bookie_root = f"/{prefix}-{uuid.uuid4().hex[:8]}", f"/{prefix}-bookie-{uuid.uuid4().hex[:8]}"
    storage = BookieProcess(zk, root, base / "storage", name="storage-bookie", config={"flush_interval_s": 0.1, **common})
    bookie = BookieProcess(zk, bookie_root, base / "bookie", name="fuzzed-bookie", config={"flush_interval_s": 0.1, **common})
    the_broker = BrokerProcess(zk, root, base / "broker", name="broker", config={
        "ensemble_size": 1, "write_quorum": 1, "ack_quorum": 1, "max_message_bytes": BROKER_MAX_MESSAGE,
        **common, **(broker or {}),
    })  # fmt: skip
    the_auditor = AuditorProcess(zk, root, base / "auditor", name="auditor",
                                 config={"grace_period_s": 2.0, **common, **(auditor or {})})  # fmt: skip
    processes = [storage, bookie, the_broker, the_auditor]
    try:
        start_all(processes)  # their start-ups overlap
        yield bookie, the_broker, the_auditor, storage
    finally:
        for p in processes:
            p.kill()


@pytest.fixture(scope="module")
def cluster(zk_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with start_cluster(zk_server, tmp_path_factory.mktemp("rpcfuzz"), "rpcfuzz") as processes:
        yield Cluster(*processes, zookeeper=zk_server)


@pytest.fixture(autouse=True)
def _logs_on_failure(cluster: Cluster, request: pytest.FixtureRequest) -> None:
    for p in cluster.processes:
        track_process(request.node, p)


def generator(name: str, **kwargs: float) -> RequestGenerator:
    print(f"rpc fuzz seed {SEED} ({name}); replay with MAGNETAR_FUZZ_SEED={SEED}")
    return RequestGenerator(random.Random(f"{SEED}:{name}"), **kwargs)  # type: ignore[arg-type]


async def check_processes(cluster: Cluster) -> None:
    """Every process is alive, serves its health check, and logged no traceback."""
    for p in cluster.processes:
        assert p.alive, f"{p.name} died; log tail:\n{p.log_tail(60)}"
    serving = await asyncio.gather(*(asyncio.to_thread(grpc_health_serving, p.address, 5.0) for p in cluster.processes))
    for p, ok in zip(cluster.processes, serving, strict=True):
        assert ok, f"{p.name} does not serve its health check"
    problems = cluster.new_log_problems()
    assert not problems, "\n\n".join(problems)


def channel(process: ServiceProcess) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(process.address, options=channel_options())


@pytest.mark.parametrize("method", ALL, ids=lambda m: f"{m.containing_service.name}.{m.name}")
async def test_hostile_requests(cluster: Cluster, method: MethodDescriptor) -> None:
    """EXAMPLES hostile inputs: every call ends with a status, none with an escaped
    exception, and the service keeps serving."""
    gen = generator(method.full_name)
    if not LONG:
        # The bounded run still sends one oversized request to every method.
        gen.oversize_rate = 1 / EXAMPLES
    cluster.new_log_problems()  # what earlier tests left is theirs
    crashes: list[str] = []
    stuck: list[str] = []
    codes: dict[str, int] = {}

    def record(plan: Plan, outcome: Outcome) -> None:
        if outcome.code == grpc.StatusCode.DEADLINE_EXCEEDED and _waits_for_exclusive(plan):
            # A WaitForExclusive producer is answered once it holds the topic, which may
            # be never while another exclusive one holds it: waiting is its answer.
            codes["WAITING_FOR_EXCLUSIVE"] = codes.get("WAITING_FOR_EXCLUSIVE", 0) + 1
            return
        codes[outcome.code.name] = codes.get(outcome.code.name, 0) + 1
        if outcome.crashed and len(crashes) < 10:
            crashes.append(outcome.describe())
        if outcome.code == grpc.StatusCode.DEADLINE_EXCEEDED and len(stuck) < 5:
            stuck.append(outcome.describe())

    inputs = plans(gen, method, EXAMPLES)
    sent, elapsed = 0, 0.0
    async with channel(cluster.target(method)) as ch:
        while batch := list(itertools.islice(inputs, BATCH)):
            n, seconds = await run_many(ch, iter(batch), timeout=_deadline, on_outcome=record,
                                        concurrency=CONCURRENCY)  # fmt: skip
            sent, elapsed = sent + n, elapsed + seconds
            assert not crashes, f"seed {SEED}: " + "\n".join(crashes)
            await check_processes(cluster)
    print(f"{method.full_name}: {sent} inputs in {elapsed:.1f} s ({sent / max(elapsed, 1e-9):.0f}/s); {codes}")
    assert sent == EXAMPLES
    # Calls that did not even reach a status in time would hide a stuck servicer.
    for line in stuck:
        print("stuck:", line)
    assert codes.get("DEADLINE_EXCEEDED", 0) <= max(2, sent // 100), (codes, stuck)
    record_result("rpc", method.full_name, inputs=sent, seconds=elapsed, seed=SEED, codes=codes)


WAITING_S = 5.0
"""The deadline of a Produce stream that asks for WaitForExclusive access: it waits by
design (answered once it holds the topic, see ``record``), so the full TIMEOUT_S would
only make the run longer."""


def _deadline(plan: Plan) -> float:
    return WAITING_S if _waits_for_exclusive(plan) else TIMEOUT_S


def _waits_for_exclusive(plan: Plan) -> bool:
    """A Produce stream whose open (a first frame) asks for WaitForExclusive access."""
    for frame in plan.frames:
        if isinstance(frame, bytes) or not hasattr(frame, "open"):
            continue
        if frame.HasField("open") and frame.open.access_mode == pb.ACCESS_WAIT_FOR_EXCLUSIVE:
            return True
    return False


async def test_cut_connections(cluster: Cluster) -> None:
    """Hand-made HTTP/2 connections that start a call and die mid-message or mid-frame."""
    rng = random.Random(f"{SEED}:cut")
    gen = generator("cut")
    cluster.new_log_problems()
    count = min(EXAMPLES, 300) if not LONG else EXAMPLES // 10
    for i in range(count):
        method = ALL[i % len(ALL)] if rng.random() < 0.3 else rng.choice([m for m in ALL if m.client_streaming or m.server_streaming])
        body = gen.message(method.input_type).SerializeToString()
        await asyncio.to_thread(cut_connection, cluster.target(method).address, path(method), rng, body)
    await check_processes(cluster)


# --- stores nothing it refused ------------------------------------------------------------


async def test_refused_adds_are_not_stored(cluster: Cluster) -> None:
    """Entries the bookie refused (negative ids, fenced or deleted ledgers, oversized
    payloads) are not there to read afterwards."""
    gen = generator("refused-adds")
    gen.pools.ledgers = [5000, 5001, 5002]
    refused: dict[tuple[int, int], set[bytes]] = {}
    accepted: set[tuple[int, int, bytes]] = set()
    async with channel(cluster.bookie) as ch:
        stub = bpb_grpc_stub(ch)
        await stub.Fence(bpb.FenceRequest(ledger_id=5002))
        for _ in range(max(20, EXAMPLES // 10)):
            requests = [gen.message(bpb.AddRequest.DESCRIPTOR) for _ in range(gen.rng.randint(1, 4))]
            for req in requests:
                for e in req.entries[:3]:
                    if gen.rng.random() < 0.05:
                        e.payload = gen.big(6 << 20)  # over max_entry_bytes
                while req.ByteSize() > 32 << 20:  # this test wants answers, not a size refusal
                    del req.entries[-1]
            responses = [r async for r in stub.AddEntries(iter(requests), timeout=TIMEOUT_S)]
            by_id = {r.request_id: r for r in responses}
            for req in requests:
                failed = {(f.ledger_id, f.entry_id) for f in by_id[req.request_id].failed}
                keys = [(e.ledger_id, e.entry_id) for e in req.entries]
                for e in req.entries:
                    key = (e.ledger_id, e.entry_id)
                    if key in failed and keys.count(key) == 1:  # twice in a request: which one failed?
                        refused.setdefault(key, set()).add(e.payload)
                    else:
                        accepted.add((*key, e.payload))
        assert refused and accepted, "the fuzzing should see both refused and accepted adds"
        for (lid, eid), payloads in refused.items():
            try:
                reply = await stub.ReadEntry(bpb.ReadEntryRequest(ledger_id=lid, entry_id=eid))
            except grpc.aio.AioRpcError as exc:
                assert exc.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT), exc
                continue
            stored = reply.entry.payload
            if stored in payloads:
                assert (lid, eid, stored) in accepted, f"refused entry {lid}:{eid} was stored"
    await check_processes(cluster)


def bpb_grpc_stub(ch: grpc.aio.Channel):  # type: ignore[no-untyped-def]
    from magnetar.proto.v1 import bookie_pb2_grpc

    return bookie_pb2_grpc.BookieStub(ch)


def broker_stub(ch: grpc.aio.Channel):  # type: ignore[no-untyped-def]
    from magnetar.proto.v1 import broker_pb2_grpc

    return broker_pb2_grpc.BrokerStub(ch)


async def test_refused_sends_are_not_stored(cluster: Cluster) -> None:
    """A producer stream of hostile sends: the topic stores exactly the sends that got a
    receipt without error (and not as a duplicate)."""
    gen = generator("refused-sends")
    # A tenant of its own: the fuzzing may have deleted public/default.
    tenant = f"sends-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://{tenant}/ns/t"
    sends = []
    for _ in range(max(20, EXAMPLES // 5)):
        s = gen.message(pb.SendBatch.DESCRIPTOR)
        roll = gen.rng.random()
        if roll < 0.1:
            s.entry = gen.big(BROKER_MAX_MESSAGE + gen.rng.choice([1, 1000]))
        elif roll < 0.4:  # a well-formed entry among the hostile fields: the broker may store it
            n = gen.rng.randint(1, 5)
            s.entry = pb.EntryBatch(messages=[pb.SingleMessage(payload=b"m%d" % i) for i in range(n)]).SerializeToString()
            s.num_messages = n
        sends.append(s)
    for i, s in enumerate(sends):
        s.request_id = i  # receipts are matched to sends
    frames = [pb.ProduceRequest(open=pb.OpenProducer(topic=topic))]
    frames += [pb.ProduceRequest(send=s) for s in sends]
    async with channel(cluster.broker) as ch:
        stub = broker_stub(ch)
        await stub.CreateTenant(pb.CreateTenantRequest(tenant=tenant))
        await stub.CreateNamespace(pb.CreateNamespaceRequest(namespace=f"{tenant}/ns"))
        receipts: list[pb.SendReceipt] = []
        closed = None
        async for r in stub.Produce(iter(frames), timeout=TIMEOUT_S * 2):
            kind = r.WhichOneof("kind")
            if kind == "receipt":
                receipts.append(r.receipt)
            elif kind == "receipts":
                receipts.extend(r.receipts.receipts)
            elif kind == "closed":
                closed = r.closed
        assert closed is None, closed
        assert len(receipts) == len(sends)
        stored = [r for r in receipts if not r.HasField("error") and not r.duplicate]
        refused = [r for r in receipts if r.HasField("error")]
        assert stored and refused, "the fuzzing should see both stored and refused sends"
        stats = await stub.GetInternalStats(pb.InternalStatsRequest(topic=topic))
        assert stats.entries_added == len(stored), (stats.entries_added, len(stored), [r.error.code for r in refused])
        ids = {(r.message_id.ledger_id, r.message_id.entry_id) for r in stored}
        assert len(ids) == len(stored)
    await check_processes(cluster)


async def test_refused_admin_changes_are_not_stored(cluster: Cluster) -> None:
    """Create-like and update-like admin calls that were refused changed nothing."""
    gen = generator("refused-admin")
    rng = gen.rng
    suffix = uuid.uuid4().hex[:6]
    refusals: dict[str, int] = {}
    async with channel(cluster.broker) as ch:
        stub = broker_stub(ch)
        tenant = f"store-{suffix}"
        namespace = f"{tenant}/ns"
        await stub.CreateTenant(pb.CreateTenantRequest(tenant=tenant))
        await stub.CreateNamespace(pb.CreateNamespaceRequest(namespace=namespace))
        topic = f"persistent://{namespace}/t"
        await stub.CreateTopic(pb.CreateTopicRequest(topic=topic))

        async def refused(name: str, call, request) -> bool:  # type: ignore[no-untyped-def]
            try:
                await call(request, timeout=TIMEOUT_S)
            except grpc.aio.AioRpcError as exc:
                assert exc.code() not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL), exc
                if exc.code() != grpc.StatusCode.ALREADY_EXISTS:
                    refusals[name] = refusals.get(name, 0) + 1
                    return True
            return False

        async def names(call, request) -> list[str]:  # type: ignore[no-untyped-def]
            return list((await call(request)).names)

        def created(name: str, before: list[str], after: list[str]) -> list[str]:
            return [t for t in after if (t == name or t.startswith(name + "-partition-")) and t not in before]

        for _ in range(max(10, EXAMPLES // 10)):
            req = gen.message(pb.CreateTenantRequest.DESCRIPTOR)
            if rng.random() < 0.7:
                req.tenant = f"t-{suffix}-{rng.randrange(10**6)}"
            before_names = await names(stub.ListTenants, pb.ListTenantsRequest())
            if await refused("CreateTenant", stub.CreateTenant, req):
                assert not created(req.tenant, before_names, await names(stub.ListTenants, pb.ListTenantsRequest())), req

            req = gen.message(pb.CreateNamespaceRequest.DESCRIPTOR)
            if rng.random() < 0.7:
                req.namespace = f"{tenant}/ns-{rng.randrange(10**6)}"
            before_names = await names(stub.ListNamespaces, pb.ListNamespacesRequest(tenant=tenant))
            if await refused("CreateNamespace", stub.CreateNamespace, req):
                after = await names(stub.ListNamespaces, pb.ListNamespacesRequest(tenant=tenant))
                assert not created(req.namespace, before_names, after), req

            req = gen.message(pb.CreateTopicRequest.DESCRIPTOR)
            local = gen.text() if rng.random() < 0.5 else f"t-{rng.randrange(10**6)}"
            req.topic = f"persistent://{namespace}/{local}"
            before_names = await names(stub.ListTopics, pb.ListTopicsRequest(namespace=namespace))
            if await refused("CreateTopic", stub.CreateTopic, req):
                after = await names(stub.ListTopics, pb.ListTopicsRequest(namespace=namespace))
                assert not created(req.topic, before_names, after), req

            before = await stub.GetNamespacePolicies(pb.GetNamespacePoliciesRequest(namespace=namespace))
            req = gen.message(pb.SetNamespacePolicyRequest.DESCRIPTOR)
            req.namespace = namespace
            if await refused("SetNamespacePolicy", stub.SetNamespacePolicy, req):
                after = await stub.GetNamespacePolicies(pb.GetNamespacePoliciesRequest(namespace=namespace))
                assert after == before, req

            before_tenant = await stub.GetTenant(pb.GetTenantRequest(tenant=tenant))
            req = gen.message(pb.UpdateTenantRequest.DESCRIPTOR)
            req.tenant = tenant
            if await refused("UpdateTenant", stub.UpdateTenant, req):
                assert await stub.GetTenant(pb.GetTenantRequest(tenant=tenant)) == before_tenant, req

            before_perms = await stub.GetPermissions(pb.GetPermissionsRequest(namespace=namespace))
            req = gen.message(pb.GrantPermissionRequest.DESCRIPTOR)
            req.namespace = namespace
            if await refused("GrantPermission", stub.GrantPermission, req):
                assert await stub.GetPermissions(pb.GetPermissionsRequest(namespace=namespace)) == before_perms, req

            req = gen.message(pb.CreateSubscriptionRequest.DESCRIPTOR)
            req.topic = topic
            before_names = await names(stub.ListSubscriptions, pb.ListSubscriptionsRequest(topic=topic))
            if await refused("CreateSubscription", stub.CreateSubscription, req):
                after = await names(stub.ListSubscriptions, pb.ListSubscriptionsRequest(topic=topic))
                assert req.subscription in before_names or req.subscription not in after, req
    print(f"refusals checked: {refusals}")
    assert len(refusals) >= 5, refusals
    await check_processes(cluster)


# --- regressions: the bugs the fuzzing found, with the exact requests ---------------------


async def test_malformed_bytes_are_invalid_argument(cluster: Cluster) -> None:
    """Bytes that are not the request message: INVALID_ARGUMENT, not UNKNOWN with a
    traceback in the log (grpc's deserializer raised DecodeError)."""
    cluster.new_log_problems()
    async with channel(cluster.bookie) as ch:
        with pytest.raises(grpc.aio.AioRpcError) as unary:
            await ch.unary_unary("/magnetar.v1.Bookie/ReadLac")(b"\xff\xff\xff", timeout=10)
        assert unary.value.code() == grpc.StatusCode.INVALID_ARGUMENT, unary.value
        call = ch.stream_stream("/magnetar.v1.Bookie/AddEntries")(timeout=10)
        await call.write(bpb.AddRequest(request_id=7).SerializeToString())
        await call.write(b"\xff\xff\xff")
        await call.done_writing()
        replies = [bpb.AddResponse.FromString(r) async for r in _tolerant(call)]
        assert [r.request_id for r in replies] == [7]
        assert await call.code() == grpc.StatusCode.INVALID_ARGUMENT
    async with channel(cluster.broker) as ch:
        with pytest.raises(grpc.aio.AioRpcError) as unary:
            await ch.unary_unary("/magnetar.v1.Broker/CreateTenant")(b"\x0a\x05ab", timeout=10)
        assert unary.value.code() == grpc.StatusCode.INVALID_ARGUMENT, unary.value
    await check_processes(cluster)


async def _tolerant(call):  # type: ignore[no-untyped-def]
    try:
        async for reply in call:
            yield reply
    except grpc.aio.AioRpcError:
        return


async def test_unknown_subscription_type_is_refused(cluster: Cluster) -> None:
    """Subscribe with SubscriptionType 4 raised KeyError in Subscription() after the
    cursor was opened: UNKNOWN to the client, a cursor left behind."""
    cluster.new_log_problems()
    tenant = f"subtype-{uuid.uuid4().hex[:6]}"
    topic = f"persistent://{tenant}/ns/t"
    async with channel(cluster.broker) as ch:
        stub = broker_stub(ch)
        await stub.CreateTenant(pb.CreateTenantRequest(tenant=tenant))
        await stub.CreateNamespace(pb.CreateNamespaceRequest(namespace=f"{tenant}/ns"))
        await stub.CreateTopic(pb.CreateTopicRequest(topic=topic))
        subscribe = pb.ConsumeRequest(subscribe=pb.Subscribe(topic=topic, subscription="s", type=4))  # type: ignore[arg-type]
        call = stub.Consume(iter([subscribe]), timeout=10)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            [r async for r in call]
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value
        listed = await stub.ListSubscriptions(pb.ListSubscriptionsRequest(topic=topic))
        assert "s" not in listed.names
    await check_processes(cluster)


async def test_read_of_a_sparse_ledger_ends(cluster: Cluster) -> None:
    """A ledger with entries 0 and 2**62: ReadEntries 0..INT64_MAX walked the gap window
    by window and never ended (the stream hit its deadline, the bookie burnt CPU)."""
    ledger = 900_000 + random.Random(SEED).randrange(1000)
    async with channel(cluster.bookie) as ch:
        stub = bpb_grpc_stub(ch)
        adds = [bpb.AddRequest(request_id=1, entries=[
            bpb.AddEntry(ledger_id=ledger, entry_id=0, last_add_confirmed=-1, payload=b"first"),
            bpb.AddEntry(ledger_id=ledger, entry_id=2**62, last_add_confirmed=-1, payload=b"far"),
        ])]
        replies = [r async for r in stub.AddEntries(iter(adds), timeout=10)]
        assert [list(r.failed) for r in replies] == [[]]
        for last in (2**63 - 1, -1):
            request = bpb.ReadEntriesRequest(ledger_id=ledger, first_entry_id=0, last_entry_id=last, max_bytes_per_response=462725395)
            got = [e.payload async for r in stub.ReadEntries(request, timeout=20) for e in r.entries]
            assert got == [b"first", b"far"]
    await check_processes(cluster)


async def test_a_cancelled_open_leaves_no_unretrieved_error(cluster: Cluster) -> None:
    """Produce streams cancelled while their topic was still opening (its namespace does
    not exist): the opening task's error was never retrieved and asyncio logged it."""
    cluster.new_log_problems()
    async with channel(cluster.broker) as ch:
        for i in range(20):
            call = broker_stub(ch).Produce(timeout=10)
            await call.write(pb.ProduceRequest(open=pb.OpenProducer(topic=f"persistent://public/missing-{i}/t")))
            await asyncio.sleep(0.001 * (i % 5))
            call.cancel()
        await asyncio.sleep(1.0)
    await check_processes(cluster)


async def test_refused_sends_of_a_stream_cut_before_its_receipts_leave_no_unretrieved_error(cluster: Cluster) -> None:
    """Sends refused at once (an entry that is not the batch it claims) on streams the
    client cuts before their receipts are written. The bounded run found, under load,
    such refusals left in the stream's queue and logged by asyncio as exceptions never
    retrieved (the stream's end now takes them; this test did not make that happen on
    an idle machine). Here the client reads nothing and windows do not grow, so the
    broker is cut mid-message: grpc logged that as an ERROR with a traceback, now one
    WARNING line (magnetar.common.logging)."""
    cluster.new_log_problems()
    tenant = f"cut-{uuid.uuid4().hex[:8]}"
    # No window growth (BDP probing): what the client does not read holds the server.
    options = [*channel_options(), ("grpc.http2.bdp_probe", 0)]
    async with grpc.aio.insecure_channel(cluster.broker.address, options=options) as ch:
        stub = broker_stub(ch)
        await stub.CreateTenant(pb.CreateTenantRequest(tenant=tenant))
        await stub.CreateNamespace(pb.CreateNamespaceRequest(namespace=f"{tenant}/ns"))
        bad = [pb.SendBatch(request_id=i, entry=b"not a batch", num_messages=43, lowest_sequence_id=i,
                            highest_sequence_id=i) for i in range(6000)]  # fmt: skip
        for _ in range(3):
            call = stub.Produce(timeout=10)
            await call.write(pb.ProduceRequest(open=pb.OpenProducer(topic=f"persistent://{tenant}/ns/t")))
            for start in range(0, len(bad), 1000):
                await call.write(pb.ProduceRequest(sends=pb.SendBatches(batches=bad[start:start + 1000])))
            await asyncio.sleep(0.5)
            call.cancel()
        await asyncio.sleep(1.0)
    await check_processes(cluster)
