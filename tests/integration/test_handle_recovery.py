"""Every client handle recovers by itself from broker faults (issue 13).

One cluster per fault: ZooKeeper, 3 bookies, broker A (its ZooKeeper link through a
FaultProxy) and, once every handle is attached to A, broker B. The handles: a producer
per topic, an Exclusive, a Failover (2 consumers), a Shared (2) and a Key_Shared (2)
consumer, a reader, a partitioned topic's producer and consumer, a multi-topic
consumer, and a consumer with a retry letter topic whose copies the brokers move with
their own producers. After the fault each topic gets ``K`` more messages; every one
must arrive within 2 x the session timeout + 5 s of the fault, in order where the
subscription type promises it (first occurrences: a redelivery only repeats), and the
subscriptions' stats must show their type and their consumers again.

The faults run at the same time, each on a cluster of its own (its own ZooKeeper root);
each waits mostly (for a session to expire, a pause to end), so the six take about as
long as the longest. Each test reports one fault.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.common.bundles import bundle_ranges
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.metadata.ownership import ZkOwnershipStore
from magnetar.metadata.session import ZkSession
from magnetar.testing.faultproxy import FaultProxy
from magnetar.testing.processes import BookieProcess, BrokerProcess, ServiceFactory, start_all
from magnetar.testing.pytest_plugin import track_process
from magnetar.tools.admin import stats_to_dict

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SESSION_S = 5.0  # the brokers' zk_session_timeout_s (BrokerConfig's default)
BOUND_S = 2 * SESSION_S + 5  # the recovery bound docs/broker.md states
BEFORE = 10  # messages per topic before the fault
K = 20  # messages per topic after it (and again once it is over)
NS = "public/default"


def first_occurrences(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


@dataclass
class Lane:
    """Topics written by producers and read by one kind of handle."""

    kind: str
    producers: dict[str, Any]  # payload prefix -> producer
    readers: list[Any]  # consumers (or one reader)
    order: str  # "prefix": each producer's messages in order; "key": per key; "none"
    sub_type: str = ""  # the subscription type stats must show ("" for a reader)
    stats_topics: list[str] = field(default_factory=list)
    retry: bool = False
    got: list[str] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)

    def expected(self, upto: int) -> set[str]:
        return {payload(prefix, i) for prefix in self.producers for i in range(upto)}

    def check_order(self) -> None:
        seen = first_occurrences(self.got)
        if self.order == "prefix":
            groups = {prefix: [p for p in seen if p.startswith(prefix + "-")] for prefix in self.producers}
        elif self.order == "key":
            groups = {}
            for p in seen:
                groups.setdefault(p.rsplit("-", 1)[0] + f"/{key_of(int(p.rsplit('-', 1)[1]))}", []).append(p)
        else:
            return
        for group, items in groups.items():
            assert items == sorted(items), f"{self.kind}: {group} out of order: {items}"


def payload(prefix: str, i: int) -> str:
    return f"{prefix}-{i:04d}"


def key_of(i: int) -> str:
    return f"key{i % 5}"


async def pump(lane: Lane, handle: Any, stop: asyncio.Event) -> None:
    """Receive (and acknowledge) until ``stop``; the retry lane sends every original to
    its retry topic once and records the copies."""
    is_reader = isinstance(handle, mg.Reader)
    while not stop.is_set():
        try:
            msg = await (handle.read_next(200) if is_reader else handle.receive(200))
        except mg.Timeout:
            continue
        except mg.MagnetarError as exc:  # a handle that failed: the test reports it
            lane.errors.append(exc)
            await asyncio.sleep(0.2)
            continue
        text = msg.data().decode()
        if lane.retry and "RECONSUMETIMES" not in msg.properties():
            try:
                await handle.reconsume_later(msg, timedelta(seconds=1))
            except mg.MagnetarError:
                pass  # not acknowledged: it comes back and is moved then
            continue
        lane.got.append(text)
        if not is_reader:
            await handle.acknowledge(msg)


async def produce(lane: Lane, first: int, count: int) -> None:
    for prefix, producer in lane.producers.items():
        for i in range(first, first + count):
            await producer.send(payload(prefix, i).encode(), partition_key=key_of(i))


async def build_lanes(client: mg.Client, tag: str) -> list[Lane]:
    """Every handle kind, each on topics of its own (all served by the one broker up)."""

    def topic(name: str) -> str:
        return f"persistent://{NS}/{tag}-{name}"

    async def producer(name: str) -> Any:
        return await client.create_producer(topic(name), send_timeout_millis=120_000, batching_max_publish_delay_ms=1)

    def sub(name: str, sub_type: mg.ConsumerType, consumer: str, **kw: Any) -> Awaitable[Any]:
        return client.subscribe(
            topic(name), "sub", consumer_type=sub_type, consumer_name=consumer,
            initial_position=mg.InitialPosition.Earliest, **kw,
        )

    await client_admin(client).create_partitioned(topic("part"), 2)
    lanes = [
        Lane("exclusive", {"excl": await producer("excl")}, [await sub("excl", mg.ConsumerType.Exclusive, "e")],
             "prefix", "Exclusive", [topic("excl")]),
        Lane("failover", {"fail": await producer("fail")},
             [await sub("fail", mg.ConsumerType.Failover, n) for n in ("f1", "f2")], "prefix", "Failover", [topic("fail")]),
        Lane("shared", {"shar": await producer("shar")},
             [await sub("shar", mg.ConsumerType.Shared, n) for n in ("s1", "s2")], "none", "Shared", [topic("shar")]),
        Lane("key_shared", {"keys": await producer("keys")},
             [await sub("keys", mg.ConsumerType.KeyShared, n) for n in ("k1", "k2")], "key", "Key_Shared", [topic("keys")]),
        Lane("reader", {"read": await producer("read")},
             [await client.create_reader(topic("read"), mg.MessageId.earliest)], "prefix"),
        Lane("partitioned", {"part": await producer("part")}, [await sub("part", mg.ConsumerType.Failover, "p")],
             "key", "Failover", [f"{topic('part')}-partition-{i}" for i in range(2)]),
        Lane("multi_topic", {"mta": await producer("mta"), "mtb": await producer("mtb")},
             [await client.subscribe([topic("mta"), topic("mtb")], "sub", consumer_type=mg.ConsumerType.Failover,
                                     initial_position=mg.InitialPosition.Earliest)],
             "prefix", "Failover", [topic("mta"), topic("mtb")]),
        Lane("retry", {"rtry": await producer("rtry")},
             [await sub("rtry", mg.ConsumerType.Shared, "r", enable_retry=True)], "none", "Shared", [topic("rtry")],
             retry=True),
    ]  # fmt: skip
    return lanes


@dataclass
class client_admin:  # noqa: N801 - a tiny helper named for what it does
    client: mg.Client

    async def create_partitioned(self, topic: str, partitions: int) -> None:
        async with AdminClient(self.client.service_hosts[0], 10) as admin:
            await admin.create_topic(topic, partitions)


async def subscription_stats(url: str, topic: str) -> dict[str, Any]:
    async with AdminClient(url, 10) as admin:
        return stats_to_dict(await admin.topic_stats(topic))["subscriptions"]


@dataclass
class Cluster:
    """One fault's cluster: a ZooKeeper root of its own, 3 bookies, brokers A and B."""

    bookies: list[BookieProcess]
    a: BrokerProcess
    b: BrokerProcess
    proxy: FaultProxy
    zk_connect: str
    zk_root: str

    @classmethod
    def make(cls, zk_connect: str, base: Path) -> Cluster:
        """Its processes, not started; A reaches ZooKeeper through a FaultProxy (started)."""
        zk_root = f"/test-{uuid.uuid4().hex[:8]}"
        bookies = ServiceFactory(BookieProcess, zk_connect, zk_root, base / "bookies")
        host, port = zk_connect.rsplit(":", 1)
        proxy = FaultProxy(host, int(port)).start()
        a = BrokerProcess(proxy.address, zk_root, base / "broker-a", name="broker-a")
        b = BrokerProcess(zk_connect, zk_root, base / "broker-b", name="broker-b")
        return cls([bookies.create() for _ in range(3)], a, b, proxy, zk_connect, zk_root)

    @property
    def processes(self) -> list[BookieProcess | BrokerProcess]:
        return [*self.bookies, self.a, self.b]

    @property
    def url(self) -> str:
        return f"{self.a.address},{self.b.address}"

    def live_url(self) -> str:
        return ",".join(p.address for p in (self.a, self.b) if p.alive)

    def stop(self) -> None:
        for process in self.processes:
            if process.process.pid is not None and process.alive:
                os.kill(process.process.pid, signal.SIGCONT)
            process.kill()
        self.proxy.stop()


async def start(*processes: BookieProcess | BrokerProcess) -> None:
    """Start processes at once: launched from this (the main) thread, which outlives them
    (their parent-death signal is tied to it), and waited for in threads."""
    for process in processes:
        process.launch()
    await asyncio.gather(*(asyncio.to_thread(process.wait_serving) for process in processes))


STARTING = 2
"""Clusters starting processes at the same time: 24 start-ups at once on 2 loaded cores
took longer than a start-up may (30 s). They are CPU-bound, so this costs no time."""


async def sleep_then(delay: float, fn: Callable[[], object]) -> None:
    await asyncio.sleep(delay)
    await asyncio.to_thread(fn)


async def inject(fault: str, cluster: Cluster) -> asyncio.Task[None] | None:
    """Start ``fault`` on broker A (B for a restart too); returns what finishes it."""
    a, b = cluster.a, cluster.b
    if fault == "owner_killed":
        a.kill()
    elif fault == "owner_paused":
        assert a.process.pid is not None
        os.kill(a.process.pid, signal.SIGSTOP)
        pid = a.process.pid
        return asyncio.create_task(sleep_then(SESSION_S + 4, lambda: os.kill(pid, signal.SIGCONT)))
    elif fault == "bundles_unloaded":
        async with AdminClient(a.address, 10) as admin:
            assert await admin.unload_namespace(NS)  # A owned them: they were unloaded
    elif fault == "zookeeper_blip":
        cluster.proxy.refuse()  # A's ZooKeeper connection drops and stays down 1.5 s
        return asyncio.create_task(sleep_then(1.5, cluster.proxy.heal))
    elif fault == "zookeeper_partition":
        cluster.proxy.blackhole()  # A's session expires; A itself runs on
        return asyncio.create_task(sleep_then(SESSION_S + 3, cluster.proxy.heal))
    elif fault == "all_brokers_restarted":
        a.kill()
        b.kill()
        return asyncio.create_task(start(a, b))
    else:
        raise AssertionError(fault)
    return None


class DisconnectLog:
    """When each handle part (one stream) was first seen disconnected."""

    def __init__(self, lanes: list[Lane]) -> None:
        self.parts: list[tuple[str, Any]] = []
        for lane in lanes:
            for producer in lane.producers.values():
                self.parts += [(f"{lane.kind} producer {p.topic}", p) for p in producer.partitions]
            for handle in lane.readers:
                consumer = handle._consumer if isinstance(handle, mg.Reader) else handle
                parts = consumer.partitions + consumer._retry
                self.parts += [(f"{lane.kind} consumer {p.topic}", p) for p in parts]
        self.first_down: dict[str, float] = {}

    async def watch(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            now = time.monotonic()
            for name, part in self.parts:
                if not part.connected and name + str(id(part)) not in self.first_down:
                    self.first_down[name + str(id(part))] = now
            await asyncio.sleep(0.02)


async def bundles_gone_from(zk_session: Any, broker: str) -> float:
    """Wait until ``broker`` owns none of the namespace's bundles. Returns when the last
    read that still found it owning one was sent (monotonic): the bundles were released
    after that moment, so a stream seen closed before it was closed before the release."""
    store = ZkOwnershipStore(zk_session)
    tenant, ns = NS.split("/")
    last_owning = time.monotonic()
    while True:
        sent = time.monotonic()
        owners = await asyncio.gather(*(store.owner(tenant, ns, b) for b in bundle_ranges(4)))
        if broker not in owners:
            return last_owning
        last_owning = sent
        await asyncio.sleep(0.02)


FAULTS = ["owner_killed", "owner_paused", "bundles_unloaded", "zookeeper_blip", "zookeeper_partition", "all_brokers_restarted"]


# Every cluster is up and its handles attached before the first fault. The faults after
# which a new owner recovers every topic then start 2.5 s apart, so that no two new owners
# take over at the same moment: started together (and with other clusters still starting
# up), two of them missed the 15 s bound on a loaded 2-core machine.
FAULT_AT_S = {
    "owner_killed": 0.0, "bundles_unloaded": 0.0, "zookeeper_blip": 0.0,
    "zookeeper_partition": 2.5, "all_brokers_restarted": 5.0, "owner_paused": 7.5,
}  # fmt: skip


class StartLine:
    """Holds each run until every run is ready for its fault (or has failed)."""

    def __init__(self, runs: int) -> None:
        self._waiting = runs
        self._go = asyncio.Event()
        self.opened_at = 0.0

    def arrive(self) -> None:
        self._waiting -= 1
        if self._waiting == 0:
            self.opened_at = time.monotonic()
            self._go.set()

    async def wait(self) -> float:
        """Wait for the others; returns when the line opened (monotonic)."""
        await self._go.wait()
        return self.opened_at


@dataclass
class Recovery:
    """One fault's run: its cluster, what it has to say, and how it failed (if it did)."""

    cluster: Cluster
    notes: list[str] = field(default_factory=list)
    error: Exception | None = None
    at_start_line: bool = False


@pytest.fixture(scope="module")
def recoveries(
    zk_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[dict[str, Recovery]]:
    """The faults of the selected tests (``-k owner_paused`` runs one), run at the same
    time, each on a cluster of its own; what each run found, for its test to report."""
    selected = {
        item.callspec.params["fault"]
        for item in request.session.items
        if item.module is request.module and "fault" in getattr(getattr(item, "callspec", None), "params", {})
    }
    if not zk_server.alive:
        zk_server.start()
    base = tmp_path_factory.mktemp("recoveries")
    runs: dict[str, Recovery] = {}
    try:
        for fault in (f for f in FAULTS if f in selected):
            runs[fault] = Recovery(Cluster.make(zk_server.connect_string, base / fault))
        asyncio.run(recover_from_all(runs))
        yield runs
    finally:
        for run in runs.values():
            run.cluster.stop()


async def recover_from_all(runs: dict[str, Recovery]) -> None:
    # Enough threads that no fault waits for one: a process start waits in one for
    # seconds, and a fault's end (SIGCONT, a healed link) must come on time.
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=4 * len(runs)))

    line = StartLine(len(runs))
    starting = asyncio.Semaphore(STARTING)

    async def run(fault: str, recovery: Recovery) -> None:
        try:
            await recover_from(fault, recovery, line, starting)
        except Exception as exc:
            recovery.error = exc
        finally:
            if not recovery.at_start_line:  # failed before it: the others need not wait
                recovery.at_start_line = True
                line.arrive()

    await asyncio.gather(*(run(fault, recovery) for fault, recovery in runs.items()))


@pytest.mark.parametrize("fault", FAULTS)
def test_every_handle_recovers(recoveries: dict[str, Recovery], zk_connect: str, fault: str, request: pytest.FixtureRequest) -> None:
    run = recoveries[fault]
    for process in run.cluster.processes:
        track_process(request.node, process)
    for note in run.notes:
        print(note)
    if run.error is not None:
        raise run.error


async def recover_from(fault: str, run: Recovery, line: StartLine, starting: asyncio.Semaphore) -> None:
    cluster = run.cluster
    a, b = cluster.a, cluster.b
    async with starting:
        await start(*cluster.bookies, a)
    async with ZkSession(cluster.zk_connect, cluster.zk_root) as zk_session, \
            mg.Client(cluster.url, operation_timeout_seconds=60) as client:  # fmt: skip
        lanes = await build_lanes(client, fault.replace("_", ""))
        stop = asyncio.Event()
        pumps = [asyncio.create_task(pump(lane, h, stop)) for lane in lanes for h in lane.readers]
        watching = gone = None
        try:
            await asyncio.gather(*(produce(lane, 0, BEFORE) for lane in lanes))
            # Every handle is attached to A (the sends were answered): B, a place to fail
            # over to, starts while the first messages (the retry copies 1 s late) arrive.
            async with starting:
                await asyncio.gather(start(b), wait_received(lanes, BEFORE, 30))
            run.at_start_line = True
            line.arrive()
            await asyncio.sleep(await line.wait() + FAULT_AT_S[fault] - time.monotonic())

            watcher = DisconnectLog(lanes)
            watching = asyncio.create_task(watcher.watch(stop))
            gone = asyncio.create_task(bundles_gone_from(zk_session, a.address)) if fault == "zookeeper_partition" else None
            faulted_at = time.monotonic()
            ending = await inject(fault, cluster)
            await asyncio.gather(*(produce(lane, BEFORE, K) for lane in lanes))
            missing = await wait_received(lanes, BEFORE + K, faulted_at + BOUND_S - time.monotonic())
            took = time.monotonic() - faulted_at
            if ending is not None:
                await ending
            assert not missing, f"after {fault}, not received within {BOUND_S:g} s: {missing}"
            run.notes.append(f"{fault}: every handle had every message {took:.1f} s after the fault")
            # And once the fault is over (a partitioned or paused owner may have served the
            # first ones itself, legitimately, before its lease ran out): K more each.
            await asyncio.gather(*(produce(lane, BEFORE + K, K) for lane in lanes))
            missing = await wait_received(lanes, BEFORE + 2 * K, BOUND_S)
            assert not missing, f"after {fault} ended, not received within {BOUND_S:g} s: {missing}"

            for lane in lanes:
                assert not lane.errors, f"{lane.kind}: {lane.errors}"
                lane.check_order()
            await check_stats(cluster, lanes)
            if gone is not None:
                # A cut off from ZooKeeper ends every stream before its session (and with it
                # the bundles) can be gone, i.e. before another broker may serve the topics.
                gone_at = await asyncio.wait_for(gone, 30)
                assert len(watcher.first_down) == len(watcher.parts), "a stream to A was never broken"
                late = {n: t - gone_at for n, t in watcher.first_down.items() if t >= gone_at}
                assert not late, f"streams still open when A's bundles were released: {late}"
                run.notes.append(f"streams ended {gone_at - max(watcher.first_down.values()):.2f} s before A lost its bundles")
        finally:
            stop.set()
            if gone is not None:
                gone.cancel()
            await asyncio.gather(*pumps, *([watching] if watching else []), *([gone] if gone else []), return_exceptions=True)


async def wait_received(lanes: list[Lane], upto: int, timeout: float) -> dict[str, list[str]]:
    """Wait until every lane has every message below ``upto``; what is still missing."""
    deadline = time.monotonic() + timeout
    while True:
        missing = {lane.kind: sorted(lane.expected(upto) - set(lane.got)) for lane in lanes}
        missing = {k: v for k, v in missing.items() if v}
        if not missing or time.monotonic() >= deadline:
            return missing
        await asyncio.sleep(0.05)


async def check_stats(cluster: Cluster, lanes: list[Lane]) -> None:
    """Each subscription shows its type and all its consumers on the topic's owner."""
    deadline = time.monotonic() + 15
    while True:
        wrong = {}
        for lane in lanes:
            for topic in lane.stats_topics:
                try:
                    subs = await subscription_stats(cluster.live_url(), topic)
                except mg.MagnetarError as exc:  # e.g. A, back from a partition, not serving yet
                    wrong[topic] = {"error": exc.message}
                    continue
                sub = subs.get("sub", {})
                if (sub.get("type"), sub.get("consumers")) != (lane.sub_type, len(lane.readers)):
                    wrong[topic] = sub
        if not wrong or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert not wrong, f"stats after the fault: {wrong}"


async def test_handles_that_cannot_recover_fail_the_next_call(bookie_factory, broker_factory) -> None:
    """A deleted subscription or a force-deleted topic is not reconnected to: the next
    call fails with a clear error (not a wait for ever, not the topic created again)."""
    broker = broker_factory.create()
    start_all([bookie_factory.create(), bookie_factory.create(), broker])  # start-ups overlap
    topic = "persistent://public/default/doomed"
    async with mg.Client(broker.address) as client:
        producer = await client.create_producer(topic)
        gone_sub = await client.subscribe(topic, "gone", consumer_type=mg.ConsumerType.Shared)
        kept = await client.subscribe(topic, "kept", consumer_type=mg.ConsumerType.Shared)
        await producer.send(b"x")
        assert (await kept.receive(10_000)).data() == b"x"

        async with AdminClient(broker.address, 10) as admin:
            await admin.delete_subscription(topic, "gone", force=True)
            with pytest.raises(mg.SubscriptionNotFound, match="was deleted"):
                while True:  # what was queued before the deletion may still come out
                    await gone_sub.receive(10_000)
            await admin.delete_topic(topic, force=True)
        with pytest.raises(mg.TopicNotFound, match="was deleted"):
            await asyncio.wait_for(kept.receive(10_000), 15)
        deadline = time.monotonic() + 10
        with pytest.raises(mg.TopicNotFound, match="was deleted"):
            while time.monotonic() < deadline:
                await producer.send(b"y")
                await asyncio.sleep(0.05)
        async with AdminClient(broker.address, 10) as admin:
            listed = await admin.topics(NS)
        assert topic not in listed  # nobody created it again
