"""The chaos workload: producers and consumers that record every outcome in a History.

Six topics under ``topic_prefix`` (a full ``persistent://tenant/ns/name`` prefix, or a
bare name in ``public/default``), every producer named (deduplication on). Four are
produced by Magnetar's SDK (the brokers' gRPC door), two by pulsar-client (Pulsar's
Python client over its C++ core, through the brokers' Pulsar protocol door); subscriptions
marked *(pulsar)* are pulsar-client consumers, the others the SDK's:

========  ============  ========  ==========================================================
topic     partitions    batching  subscriptions (all from the earliest message)
========  ============  ========  ==========================================================
``-fo``   none          on        ``fo-failover`` (Failover, 2 consumers), a reader,
                                  ``fo-pulsar-shared`` (Shared, 2, *pulsar*)
``-ks``   3             on        ``ks-keyshared`` (Key_Shared, 2), ``ks-failover`` (Failover, 2)
``-sh``   none          off       ``sh-retry`` (Shared, 2, retry + DLQ, max_redeliver_count 2);
                                  its DLQ read by ``sh-retry-DLQ-sub``
``-dl``   none          off       ``dl-delayed`` (Shared, 2); every message delayed 1–10 s (``delay_range_s``)
``-pf``   none          on        *pulsar-client producer*; ``pf-failover`` (Failover, 2, *pulsar*),
                                  ``pf-sdk-failover`` (Failover, 2)
``-ps``   none          off       *pulsar-client producer*; ``ps-shared`` (Shared, 2, *pulsar*)
========  ============  ========  ==========================================================

pulsar-client is blocking and callback based: its producers (one pacing thread each,
``send_async`` with a callback) and consumers (one thread each: receive, record,
acknowledge) run in threads, record in the History directly (it is thread-safe) and hand
every change of the workload's own state to its event loop.

Each message carries its topic, key and per-key sequence number in its properties
(``ct``, ``ck``, ``cs``; delayed ones also ``cda``, the intended deliver_at in ms), so
the checker needs no SDK and retry / DLQ copies (which keep the properties) still say
which message they are. On ``-sh`` a fixed fraction is failed on purpose, chosen by a
hash of seed, key and sequence number: "poison" messages fail every time (they must end
in the DLQ), "flaky" ones fail once (they must end acknowledged); half of each fail with
a negative ack, half with ``reconsume_later`` (the retry letter topic).

Every delivery is recorded before it is acknowledged. README.md has the event schema.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
import zlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulsar
from checker import SeqBits
from history import History

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.common.errors import AlreadyExists, MagnetarError
from magnetar.testing.pulsarclient import pulsar_client

log = logging.getLogger(__name__)

KEYS = 16
PAYLOAD = b"m" * 100
MAX_REDELIVER = 2
POISON_PER_MILLE = 30
FLAKY_PER_MILLE = 20
NACK_DELAY_MS = 300
RETRY_DELAY_MS = 1000
DELAY_RANGE_S = (1.0, 10.0)
SHARE = {"fo": 0.35, "ks": 0.35, "sh": 0.25, "dl": 0.05, "pf": 0.10, "ps": 0.05}
"""Each topic's part of the total rate (relative: they are scaled to sum to 1)."""
PULSAR_RECEIVE_MS = 200
"""A pulsar-client consumer thread's receive timeout (how soon it sees the stop)."""


def fail_plan(seed: int, key: str, seq: int) -> tuple[str | None, str]:
    """What the retry subscription's consumer does with a message: (None | "poison" |
    "flaky", "nack" | "retry")."""
    h = zlib.crc32(f"{seed}:{key}:{seq}".encode())
    per_mille = h % 1000
    via = "nack" if (h >> 10) & 1 else "retry"
    if per_mille < POISON_PER_MILLE:
        return "poison", via
    if per_mille < POISON_PER_MILLE + FLAKY_PER_MILLE:
        return "flaky", via
    return None, via


@dataclass
class _Topic:
    short: str
    name: str
    partitions: int
    batching: bool
    delayed: bool = False
    door: str = "sdk"
    """Who produces it: ``sdk`` (Magnetar's SDK, the gRPC door) or ``pulsar``
    (pulsar-client, Pulsar's binary protocol door)."""


class _Pacer:
    """Paces a producer at ``rate`` messages/s; one stalled by a fault skips what it
    missed rather than bursting afterwards."""

    def __init__(self, rate: float, counts: Callable[[str, int], None]) -> None:
        self.rate = rate
        self.sent = 0
        self.t0 = time.monotonic()
        self._count = counts

    def due(self) -> int:
        """How many to send now (0: wait a little); counts each one as sent."""
        due = int((time.monotonic() - self.t0) * self.rate) - self.sent
        if due > self.rate:  # stalled (a fault): skip what was missed instead of bursting
            self._count("skipped", due - int(self.rate))
            self.sent += due - int(self.rate)
            due = int(self.rate)
        due = max(0, min(due, 500))
        self.sent += due
        return due

    @property
    def idle_s(self) -> float:
        return min(0.01, 1.0 / self.rate)


class Workload:
    """Runs the workload against ``service_url`` and records it in ``history``."""

    def __init__(self, service_url: str, history: History, *, pulsar_url: str, rate: float = 2000.0, seed: int,
                 topic_prefix: str, delay_range_s: tuple[float, float] = DELAY_RANGE_S) -> None:
        """``pulsar_url``: the brokers' Pulsar protocol doors (``pulsar://h1:p1,h2:p2``),
        for the pulsar-client producers and consumers. ``delay_range_s``: the ``-dl``
        topic's delays are drawn from it (a short test run takes a shorter one, with a
        broker whose ``delayed_bucket_s`` is as much shorter)."""
        self.url = service_url
        self.pulsar_url = pulsar_url
        self.delay_range_s = delay_range_s
        self.history = history
        self.rate = rate
        self.seed = seed
        prefix = topic_prefix if "://" in topic_prefix else f"persistent://public/default/{topic_prefix}"
        self.namespace = prefix.split("://", 1)[1].rsplit("/", 1)[0]
        self.topics = {
            "fo": _Topic("fo", f"{prefix}-fo", 0, True),
            "ks": _Topic("ks", f"{prefix}-ks", 3, True),
            "sh": _Topic("sh", f"{prefix}-sh", 0, False),
            "dl": _Topic("dl", f"{prefix}-dl", 0, False, delayed=True),
            "pf": _Topic("pf", f"{prefix}-pf", 0, True, door="pulsar"),
            "ps": _Topic("ps", f"{prefix}-ps", 0, False, door="pulsar"),
        }
        self.dlq_topic = f"{self.topics['sh'].name}-sh-retry-DLQ"
        self._client: mg.Client | None = None
        self._admin: AdminClient | None = None
        self._producers: dict[str, Any] = {}
        self._consumers: list[Any] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._producing: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()
        self._pending: set[asyncio.Future[Any]] = set()
        self._rng = random.Random(seed)
        # For drain(): what must still arrive (bitmaps, so an hour's run stays small).
        self._ok: dict[tuple[str, str], SeqBits] = defaultdict(SeqBits)  # (topic short, key) → acked seqs
        self._seen: dict[tuple[str, str], SeqBits] = defaultdict(SeqBits)  # (sub, key) → delivered seqs
        self._subs: dict[str, str] = {}  # sub → topic short (the subscriptions that must see everything)
        self._unresolved: dict[tuple[str, int], str] = {}  # failed on purpose, outcome not seen yet
        # Outcome seen: a redelivery after it (a move's ack lost in a hand-over; the move
        # itself is deduplicated, so no second DLQ copy comes) does not unsettle it.
        self._settled: set[tuple[str, int]] = set()
        self._last_due = 0.0
        self._counts: dict[str, int] = defaultdict(int)
        # pulsar-client is blocking and callback based: its producers and consumers run
        # in threads, which record in the (thread-safe) History at once and hand every
        # change of the state above to the loop (call_soon_threadsafe).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pulsar: pulsar.Client | None = None
        self._pulsar_producing: list[threading.Thread] = []
        self._pulsar_consuming: list[threading.Thread] = []
        self._pulsar_stop_producing = threading.Event()
        self._pulsar_stop = threading.Event()
        self._pulsar_pending = 0
        self._pulsar_lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        """Create topics and subscriptions (retrying: faults may be under way), then
        start consuming and producing."""
        self.history.record("workload", seed=self.seed, rate=self.rate, topics={t.short: t.name for t in self.topics.values()},
                            max_redeliver_count=MAX_REDELIVER, poison_per_mille=POISON_PER_MILLE,
                            flaky_per_mille=FLAKY_PER_MILLE, dlq_topic=self.dlq_topic)
        self._loop = asyncio.get_running_loop()
        self._admin = AdminClient(self.url, operation_timeout_s=30)
        self._client = mg.Client(self.url, operation_timeout_seconds=30)
        self._pulsar = pulsar_client(self.pulsar_url, operation_timeout_seconds=30)
        await self._retry("dedup policy", lambda: self._admin_call(lambda a: a.set_namespace_policy(self.namespace, deduplication=True)))
        for t in self.topics.values():
            if t.partitions:
                await self._retry(f"create {t.name}", lambda t=t: self._admin_call(lambda a: a.create_topic(t.name, t.partitions)))
        fo, ks, sh, dl, pf, ps = (self.topics[k] for k in ("fo", "ks", "sh", "dl", "pf", "ps"))
        await self._subscribe(fo, "fo-failover", mg.ConsumerType.Failover, "failover", ordered=True)
        await self._subscribe(ks, "ks-keyshared", mg.ConsumerType.KeyShared, "key_shared", ordered=True)
        await self._subscribe(ks, "ks-failover", mg.ConsumerType.Failover, "failover", ordered=True)
        await self._subscribe(sh, "sh-retry", mg.ConsumerType.Shared, "shared_retry", ordered=False, retry=True)
        await self._subscribe(dl, "dl-delayed", mg.ConsumerType.Shared, "shared_delayed", ordered=False)
        await self._subscribe_dlq()
        await self._start_reader(fo)
        # Through the Pulsar protocol door, and across the doors: pulsar-client reads an
        # SDK-produced topic, the SDK a pulsar-client-produced one.
        await self._pulsar_subscribe(pf, "pf-failover", pulsar.ConsumerType.Failover, "failover", ordered=True)
        await self._subscribe(pf, "pf-sdk-failover", mg.ConsumerType.Failover, "failover", ordered=True)
        await self._pulsar_subscribe(ps, "ps-shared", pulsar.ConsumerType.Shared, "shared", ordered=False)
        await self._pulsar_subscribe(fo, "fo-pulsar-shared", pulsar.ConsumerType.Shared, "shared", ordered=False)
        for t in self.topics.values():
            create = self._create_pulsar_producer if t.door == "pulsar" else self._create_producer
            self._producers[t.short] = await self._retry(f"producer {t.name}", lambda t=t, create=create: create(t))
        self.history.record("phase", name="producing")
        total = sum(SHARE.values())
        for t in self.topics.values():
            rate = self.rate * SHARE[t.short] / total
            if t.door == "pulsar":
                thread = threading.Thread(target=self._pulsar_produce, args=(t, rate), name=f"produce-{t.short}", daemon=True)
                thread.start()
                self._pulsar_producing.append(thread)
            else:
                self._producing.append(asyncio.create_task(self._produce(t, rate), name=f"produce-{t.short}"))

    async def stop_producing(self) -> None:
        """Stop sending; wait (up to the send timeout) for the outcome of every send."""
        self._stop.set()
        self._pulsar_stop_producing.set()
        await asyncio.gather(*self._producing, *(asyncio.to_thread(t.join) for t in self._pulsar_producing),
                             return_exceptions=True)
        if self._pending:
            await asyncio.wait(list(self._pending), timeout=60)
        deadline = time.monotonic() + 60  # pulsar-client's sends: their callbacks come from its threads
        while self._pulsar_pending and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        self.history.record("phase", name="stopped_producing", pending=len(self._pending) + self._pulsar_pending)

    async def drain(self, timeout_s: float) -> None:
        """Consume until every subscription got every acknowledged send, every message
        failed on purpose is settled and every delayed message is due, or ``timeout_s``."""
        self.history.record("phase", name="draining")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            missing = self.missing()
            if not missing and time.time() >= self._last_due:
                break
            await asyncio.sleep(0.5)
        await asyncio.sleep(1.0)  # let the last acks reach the broker (grouped every 100 ms)
        self.history.record("phase", name="drained", missing=self.missing())

    def missing(self) -> dict[str, int]:
        """Per subscription, acknowledged sends not delivered yet; "unsettled": messages
        failed on purpose whose outcome (DLQ or ack) was not seen yet."""
        out: dict[str, int] = {}
        for sub, short in self._subs.items():
            n = 0
            for (topic, key), ok in list(self._ok.items()):
                if topic == short:
                    n += (ok.as_int() & ~self._seen[sub, key].as_int()).bit_count()
            if n:
                out[sub] = n
        if self._unresolved:
            out["unsettled"] = len(self._unresolved)
        return out

    async def close(self) -> None:
        self._stop.set()
        self._pulsar_stop_producing.set()
        self._pulsar_stop.set()
        tasks = self._producing + self._tasks
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for thread in self._pulsar_producing + self._pulsar_consuming:
            await asyncio.to_thread(thread.join, 10)
        if self._pulsar is not None:
            await asyncio.to_thread(self._pulsar.close)
        if self._client is not None:
            await self._client.close()
        if self._admin is not None:
            await self._admin.close()
        self.history.record("phase", name="closed")

    def counters(self) -> dict[str, int]:
        """Running totals for a progress line: sent, acked, send_failed, delivered, …"""
        return dict(self._counts)

    # -- setup -----------------------------------------------------------------------
    async def _retry(self, what: str, fn: Callable[[], Any], deadline_s: float = 300.0) -> Any:
        deadline = time.monotonic() + deadline_s
        delay = 0.5
        while True:
            try:
                return await fn()
            except (MagnetarError, pulsar.PulsarException) as exc:
                if time.monotonic() > deadline:
                    raise
                self.history.record("error", what=what, error=f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _admin_call(self, fn: Callable[[AdminClient], Any]) -> None:
        assert self._admin is not None
        try:
            await fn(self._admin)
        except AlreadyExists:
            pass

    async def _create_producer(self, t: _Topic) -> Any:
        assert self._client is not None
        return await self._client.create_producer(
            t.name, producer_name=f"chaos-{self.seed}-{t.short}", batching_enabled=t.batching,
            batching_max_publish_delay_ms=5, block_if_queue_full=True, max_pending_messages=2000,
            send_timeout_millis=30_000,
        )

    async def _subscribe(
        self, t: _Topic, sub: str, ctype: mg.ConsumerType, kind: str, *, ordered: bool, retry: bool = False
    ) -> None:
        assert self._client is not None
        client = self._client
        self.history.record("subscription", sub=sub, topic=t.name, kind=kind, ordered=ordered, required=True)
        self._subs[sub] = t.short
        extra: dict[str, Any] = {}
        if retry:
            extra = dict(
                enable_retry=True, retry_delay_levels="1s", negative_ack_redelivery_delay_ms=NACK_DELAY_MS,
                dead_letter_policy=mg.ConsumerDeadLetterPolicy(max_redeliver_count=MAX_REDELIVER),
            )
        for i in range(2):
            name = f"{sub}-{i}"
            consumer = await self._retry(f"subscribe {sub}", lambda name=name: client.subscribe(
                t.name, sub, consumer_type=ctype, consumer_name=name, initial_position=mg.InitialPosition.Earliest,
                receiver_queue_size=500, batch_receive_policy=mg.ConsumerBatchReceivePolicy(200, -1, 100), **extra,
            ))
            self._consumers.append(consumer)
            self._tasks.append(asyncio.create_task(self._consume(consumer, sub, kind, name), name=f"consume-{name}"))

    async def _subscribe_dlq(self) -> None:
        assert self._client is not None
        client = self._client
        sub = "sh-retry-DLQ-sub"
        self.history.record("subscription", sub=sub, topic=self.dlq_topic, kind="dlq", ordered=False, required=False)
        consumer = await self._retry("subscribe dlq", lambda: client.subscribe(
            self.dlq_topic, sub, consumer_type=mg.ConsumerType.Shared, consumer_name="dlq-0",
            initial_position=mg.InitialPosition.Earliest,
        ))
        self._consumers.append(consumer)
        self._tasks.append(asyncio.create_task(self._consume(consumer, sub, "dlq", "dlq-0"), name="consume-dlq"))

    async def _start_reader(self, t: _Topic) -> None:
        assert self._client is not None
        client = self._client
        sub = "fo-reader"
        self.history.record("subscription", sub=sub, topic=t.name, kind="reader", ordered=True, required=True)
        self._subs[sub] = t.short
        reader = await self._retry("reader", lambda: client.create_reader(t.name, mg.MessageId.earliest, reader_name="fo-reader"))
        self._tasks.append(asyncio.create_task(self._read(reader, sub), name="reader"))

    # -- producing -------------------------------------------------------------------
    async def _produce(self, t: _Topic, rate: float) -> None:
        rng = random.Random(f"{self.seed}:{t.short}")
        next_seq = [0] * KEYS
        producer = self._producers[t.short]
        pacer = _Pacer(rate, self._count)
        while not self._stop.is_set():
            due = pacer.due()
            if not due:
                await asyncio.sleep(pacer.idle_s)
                continue
            for _ in range(due):
                k = rng.randrange(KEYS)
                key, seq = f"k{k:02d}", next_seq[k]
                next_seq[k] += 1
                await self._send_one(t, producer, rng, key, seq)
                if self._stop.is_set():
                    return

    def _count(self, what: str, n: int = 1) -> None:
        self._counts[what] += n

    async def _send_one(self, t: _Topic, producer: Any, rng: random.Random, key: str, seq: int) -> None:
        props = {"ct": t.name, "ck": key, "cs": str(seq)}
        fields: dict[str, Any] = {}
        deliver_at = None
        if t.delayed:
            deliver_at = int((time.time() + rng.uniform(*self.delay_range_s)) * 1000)
            props["cda"] = str(deliver_at)
            fields["deliver_at"] = deliver_at
            self._last_due = max(self._last_due, deliver_at / 1000)
        if t.short == "sh":
            fail, via = fail_plan(self.seed, key, seq)
            if fail:
                fields.update(fail=fail, via=via)
        self._counts["sent"] += 1
        try:
            fut = await producer.enqueue(PAYLOAD, properties=props, partition_key=key, deliver_at=deliver_at)
        except MagnetarError as exc:
            self._send_failed(t, key, seq, fields, exc)
            return
        self._pending.add(fut)
        fut.add_done_callback(lambda f: self._send_done(f, t, key, seq, fields))

    def _send_done(self, fut: asyncio.Future[Any], t: _Topic, key: str, seq: int, fields: dict[str, Any]) -> None:
        self._pending.discard(fut)
        exc = fut.exception() if not fut.cancelled() else MagnetarError("cancelled")
        if exc is not None:
            self._send_failed(t, key, seq, fields, exc)
            return
        self._mark_ok(t.short, key, seq)
        self.history.record("send_ok", topic=t.name, key=key, seq=seq, id=str(fut.result()), **fields)

    def _send_failed(self, t: _Topic, key: str, seq: int, fields: dict[str, Any], exc: BaseException) -> None:
        self._counts["send_failed"] += 1
        self.history.record("send_fail", topic=t.name, key=key, seq=seq, error=f"{type(exc).__name__}: {exc}", **fields)

    # -- consuming -------------------------------------------------------------------
    async def _consume(self, consumer: Any, sub: str, kind: str, name: str) -> None:
        while True:
            try:
                batch = await consumer.batch_receive()
            except asyncio.CancelledError:
                raise
            except MagnetarError as exc:
                self._counts["errors"] += 1
                self.history.record("error", what=f"receive {name}", error=f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(0.5)
                continue
            for msg in batch:
                try:
                    await self._handle(consumer, sub, kind, name, msg)
                except MagnetarError as exc:
                    self._counts["errors"] += 1
                    self.history.record("error", what=f"handle {name}", error=f"{type(exc).__name__}: {exc}")

    async def _handle(self, consumer: Any, sub: str, kind: str, name: str, msg: Any) -> None:
        props = msg.properties()
        topic, key, seq = props.get("ct", "?"), props.get("ck", "?"), int(props.get("cs", -1))
        retry = int(props.get("RECONSUMETIMES", 0))
        rc = msg.redelivery_count()
        mid = str(msg.message_id())
        if kind == "dlq":
            self._counts["dlq"] += 1
            self.history.record("dlq", sub=sub, topic=topic, key=key, seq=seq, id=mid, rc=rc,
                                reason=props.get("DEAD_LETTER_REASON", ""), origin=props.get("ORIGIN_MESSAGE_ID", ""))
            self._settle(key, seq)
            await consumer.acknowledge(msg)
            return
        fields: dict[str, Any] = {}
        if "cda" in props:
            fields = {"deliver_at": int(props["cda"]), "wall": round(time.time(), 6)}
        if retry:
            fields["retry"] = retry
        self._counts["delivered"] += 1
        if msg.topic_name() != topic:
            fields["src"] = msg.topic_name()  # a partition, or the retry letter topic
        self.history.record("deliver", sub=sub, topic=topic, key=key, seq=seq, id=mid, rc=rc, consumer=name, **fields)
        if retry == 0:
            self._seen[sub, key].add(seq)
        if kind == "shared_retry":
            fail, via = fail_plan(self.seed, key, seq)
            if fail == "poison" or (fail == "flaky" and retry + rc == 0):
                if (key, seq) not in self._settled:
                    self._unresolved.setdefault((key, seq), fail)
                await self._fail(consumer, sub, msg, topic, key, seq, fail, via, retry, rc, mid)
                return
            self.history.record("ack", sub=sub, topic=topic, key=key, seq=seq, id=mid, retry=retry)
            self._settle(key, seq)
        await consumer.acknowledge(msg)

    def _settle(self, key: str, seq: int) -> None:
        """The outcome of ``(key, seq)`` is seen (acknowledged, or in the DLQ). A message
        planned to fail is remembered as settled even when no failure was seen first: one
        consumer may acknowledge a redelivery (count 1) while the other still holds a
        stale copy (count 0) that it then fails, and that failure must not reopen it (the
        broker refuses to redeliver a message already acknowledged)."""
        self._unresolved.pop((key, seq), None)
        if fail_plan(self.seed, key, seq)[0] is not None:
            self._settled.add((key, seq))

    async def _fail(self, consumer: Any, sub: str, msg: Any, topic: str, key: str, seq: int, fail: str, via: str,
                    retry: int, rc: int, mid: str) -> None:
        if via == "nack":
            self._counts["nacked"] += 1
            self.history.record("nack", sub=sub, topic=topic, key=key, seq=seq, id=mid, rc=rc, fail=fail)
            await consumer.negative_acknowledge(msg)
            return
        try:
            await consumer.reconsume_later(msg, RETRY_DELAY_MS)
        except MagnetarError as exc:  # nothing acknowledged: the message comes back
            self.history.record("reconsume_fail", sub=sub, topic=topic, key=key, seq=seq, id=mid,
                                error=f"{type(exc).__name__}: {exc}")
            return
        self._counts["reconsumed"] += 1
        self.history.record("reconsume", sub=sub, topic=topic, key=key, seq=seq, id=mid, retry=retry, fail=fail)

    async def _read(self, reader: Any, sub: str) -> None:
        while True:
            try:
                msg = await reader.read_next(timeout_millis=1000)
            except asyncio.CancelledError:
                raise
            except mg.Timeout:
                continue
            except MagnetarError as exc:
                self._counts["errors"] += 1
                self.history.record("error", what="reader", error=f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(0.5)
                continue
            props = msg.properties()
            key, seq = props.get("ck", "?"), int(props.get("cs", -1))
            self._counts["delivered"] += 1
            self.history.record("deliver", sub=sub, topic=props.get("ct", "?"), key=key, seq=seq,
                                id=str(msg.message_id()), rc=msg.redelivery_count(), consumer="reader")
            self._seen[sub, key].add(seq)


    # -- pulsar-client (Pulsar's binary protocol door), in threads ---------------------
    def _from_thread(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the workload's loop (the state drain() reads lives there)."""
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: the run is over
            pass

    async def _create_pulsar_producer(self, t: _Topic) -> Any:
        assert self._pulsar is not None
        return await asyncio.to_thread(
            self._pulsar.create_producer, t.name, producer_name=f"chaos-{self.seed}-{t.short}",
            batching_enabled=t.batching, batching_max_publish_delay_ms=5, block_if_queue_full=True,
            max_pending_messages=2000, send_timeout_millis=30_000,
        )

    async def _pulsar_subscribe(self, t: _Topic, sub: str, ctype: Any, kind: str, *, ordered: bool) -> None:
        assert self._pulsar is not None
        client = self._pulsar
        self.history.record("subscription", sub=sub, topic=t.name, kind=kind, ordered=ordered, required=True,
                            door="pulsar")
        self._subs[sub] = t.short
        for i in range(2):
            name = f"{sub}-{i}"
            consumer = await self._retry(f"subscribe {sub}", lambda name=name: asyncio.to_thread(
                client.subscribe, t.name, sub, consumer_type=ctype, consumer_name=name,
                initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=500,
            ))
            thread = threading.Thread(target=self._pulsar_consume, args=(consumer, sub, name), name=f"consume-{name}",
                                      daemon=True)
            thread.start()
            self._pulsar_consuming.append(thread)

    def _pulsar_produce(self, t: _Topic, rate: float) -> None:
        rng = random.Random(f"{self.seed}:{t.short}")
        next_seq = [0] * KEYS
        producer = self._producers[t.short]
        pacer = _Pacer(rate, lambda what, n: self._from_thread(self._count, what, n))
        while not self._pulsar_stop_producing.is_set():
            due = pacer.due()
            if not due:
                time.sleep(pacer.idle_s)
                continue
            for _ in range(due):
                k = rng.randrange(KEYS)
                key, seq = f"k{k:02d}", next_seq[k]
                next_seq[k] += 1
                self._pulsar_send_one(t, producer, key, seq)
                if self._pulsar_stop_producing.is_set():
                    return

    def _pulsar_send_one(self, t: _Topic, producer: Any, key: str, seq: int) -> None:
        self._from_thread(self._count, "sent", 1)
        with self._pulsar_lock:
            self._pulsar_pending += 1
        try:  # blocks while the producer's queue is full (block_if_queue_full)
            producer.send_async(PAYLOAD, lambda res, mid: self._pulsar_sent(t, key, seq, res, mid),
                                properties={"ct": t.name, "ck": key, "cs": str(seq)}, partition_key=key)
        except pulsar.PulsarException as exc:
            self._pulsar_sent(t, key, seq, exc, None)

    def _pulsar_sent(self, t: _Topic, key: str, seq: int, res: Any, mid: Any) -> None:
        """A send's outcome (pulsar-client's callback, on one of its threads)."""
        if res == pulsar.Result.Ok:
            self.history.record("send_ok", topic=t.name, key=key, seq=seq, id=str(mid))
            self._from_thread(self._mark_ok, t.short, key, seq)
        else:
            error = f"{type(res).__name__}: {res}"
            self.history.record("send_fail", topic=t.name, key=key, seq=seq, error=error)
            self._from_thread(self._count, "send_failed", 1)
        with self._pulsar_lock:
            self._pulsar_pending -= 1

    def _mark_ok(self, short: str, key: str, seq: int) -> None:
        self._counts["acked"] += 1
        self._ok[short, key].add(seq)

    def _mark_seen(self, sub: str, key: str, seq: int) -> None:
        self._counts["delivered"] += 1
        self._seen[sub, key].add(seq)

    def _pulsar_consume(self, consumer: Any, sub: str, name: str) -> None:
        """Receive, record, acknowledge, until the workload closes."""
        while not self._pulsar_stop.is_set():
            try:
                msg = consumer.receive(timeout_millis=PULSAR_RECEIVE_MS)
            except pulsar.Timeout:
                continue
            except pulsar.PulsarException as exc:
                self.history.record("error", what=f"receive {name}", error=f"{type(exc).__name__}: {exc}")
                self._from_thread(self._count, "errors", 1)
                self._pulsar_stop.wait(0.5)
                continue
            props = msg.properties()
            topic, key, seq = props.get("ct", "?"), props.get("ck", "?"), int(props.get("cs", -1))
            fields: dict[str, Any] = {}
            if msg.topic_name() != topic:
                fields["src"] = msg.topic_name()
            self.history.record("deliver", sub=sub, topic=topic, key=key, seq=seq, id=str(msg.message_id()),
                                rc=msg.redelivery_count(), consumer=name, **fields)
            self._from_thread(self._mark_seen, sub, key, seq)
            try:
                consumer.acknowledge(msg)
            except pulsar.PulsarException as exc:  # not acknowledged: it comes again, flagged
                self.history.record("error", what=f"ack {name}", error=f"{type(exc).__name__}: {exc}")
