"""Topic scale on one broker (issue 19): memory per topic, 1 msg/s per topic, topics in the metadata.

Starts a real ZooKeeper, 3 bookies and 1 broker (E=3 Qw=2 Qa=2), then:

A. active topics (``--topics``, 10,000): client processes (``--workers``, 4; one
   ``aio.Client`` each) own a quarter of the topics each and, stage by stage, ``create``
   them (admin create of a non-partitioned topic: its metadata only; the ``subscribe``
   stage loads it), ``subscribe`` one
   consumer each (Exclusive, earliest), ``produce`` (one SDK producer each), then
   ``traffic``: every producer sends ``--rate`` msgs/s (1; spread over the second) for
   ``--duration`` (900 s; ``--traffic-seconds`` is the same) and every consumer receives and acknowledges. The broker's RSS
   (/proc/<pid>/status VmRSS) is read after a warm-up topic (the baseline) and after each
   stage has settled; per idle topic = (RSS with producers and consumers attached -
   baseline) / N, split into the bare topic, the consumer and the producer; the broker's
   and the client processes' CPU share while idle too. The traffic stage reports the
   messages received per second across all consumers, the latency, the broker's CPU per
   message and ZooKeeper's requests/s, and checks that every message sent was received
   (each payload names its topic and sequence number).
   ``--consumers sdk`` (default) uses the SDK's consumers; each wakes every 100 ms even
   when idle (about 0.4 ms of CPU a second each: 10,000 of them need more than the 2 cores
   of a small machine and starve the broker). ``--consumers raw`` speaks the same Consume
   stream through the SDK's connection pool without that timer (:class:`RawConsumer`), so
   the broker can be measured with 10,000 consumers on one machine.
B. metadata (``--metadata-topics``, 100,000): the same client processes create that many
   non-partitioned topics through the admin API in a namespace of their own (on a freshly
   restarted broker, so nothing of A is loaded), ``--concurrency`` creates in flight per
   process; the rate overall and per 10,000, ZooKeeper's znode count and data size
   (``mntr``), the broker's RSS before and after, and listing the namespace. Stops
   creating after ``--metadata-max-seconds`` (900) and reports the rate of what it did.

Targets: <= 20 KiB of broker RSS per idle topic (issue 19); 10,000 topics at 1 msg/s
each held for 15 minutes (issue 35): no lease lapse (the broker's log says when it stopped
serving), nothing lost (every message sent arrives), end-to-end p99 <= 100 ms. The
verdict of each is printed last, with the load average at the start and at the end.
``make bench-topics`` runs part A alone (``--metadata-topics 0 --consumers raw``).

The broker runs at log level INFO; its log is read at the end for its full garbage
collections (and their length) and for the times it stopped serving (lease run out,
ZooKeeper session lost: every topic is unloaded then). ``--gc-stats``: after each RSS
reading the broker is asked (SIGUSR2, through a ``sitecustomize`` hook this bench puts on
its PYTHONPATH) for a full garbage collection, the cyclic garbage it found and its live
objects by type and shallow size (its event loop stops meanwhile). ``--heap-profile N``
also runs the broker under tracemalloc (N frames) and prints the allocations each stage
added by the Magnetar line that made them (slow: RSS and rates of such a run are not
representative). ``--profile`` records the broker with py-spy while idle, during the
traffic stage and during the creates (speedscope files next to the results, the hottest
functions printed). Writes bench/results/topics.json.

    python bench/topics.py [--topics 10000] [--metadata-topics 100000] [--quick]
                           [--consumers sdk|raw] [--rate 1] [--duration 900]
                           [--workers 4] [--profile] [--gc-stats] [--heap-profile 3]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from magnetar.client import aio
from magnetar.client.admin import AdminClient
from magnetar.client.connection import BrokerStream, ConnectionPool
from magnetar.client.options import InitialPosition
from magnetar.client.session import SessionStream
from magnetar.common.errors import AlreadyExists, MagnetarError, NotConnected, from_code
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.testing.processes import BookieProcess, BrokerProcess

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procstats import cpu_seconds, rss_kib, zk_mntr  # noqa: E402

TARGET_IDLE_KIB = 20.0
TENANT = "bench"
PROGRESS_EVERY = 1000
"""Topics between two progress lines."""
WORKER_REPORT_EVERY = 100
"""Topics between two progress reports of a client process."""
SUBSCRIPTION = "bench"

HOOK = '''
import os
if os.environ.get("MAGNETAR_BENCH_HOOK"):
    import signal

    def _magnetar_bench_dump(signum, frame):
        import collections, gc, json, sys, time, tracemalloc
        started = time.perf_counter()
        base = os.environ["MAGNETAR_BENCH_HOOK"]
        with open(base + ".tag") as fh:
            tag = fh.read().strip()
        traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else None
        if tracemalloc.is_tracing():
            tracemalloc.take_snapshot().dump(f"{base}.{tag}.snap")
        gc.unfreeze()
        gc.set_debug(gc.DEBUG_SAVEALL)  # the cyclic garbage kept in gc.garbage, to count it by type
        gc.collect()
        garbage = collections.Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.garbage)
        collected = len(gc.garbage)
        gc.garbage.clear()
        gc.set_debug(0)
        gc.collect()
        counts = collections.Counter()
        sizes = collections.Counter()
        for o in gc.get_objects():
            name = f"{type(o).__module__}.{type(o).__qualname__}"
            counts[name] += 1
            sizes[name] += sys.getsizeof(o)
        gc.freeze()
        out = {"collected": collected, "garbage_types": garbage.most_common(40),
               "objects": sum(counts.values()), "types": counts.most_common(250),
               "type_bytes": sizes.most_common(250), "object_bytes": sum(sizes.values()),
               "blocks": sys.getallocatedblocks(), "traced_bytes": traced,
               "seconds": time.perf_counter() - started}
        with open(f"{base}.{tag}.json.tmp", "w") as fh:
            json.dump(out, fh)
        os.rename(f"{base}.{tag}.json.tmp", f"{base}.{tag}.json")

    signal.signal(signal.SIGUSR2, _magnetar_bench_dump)
    if os.environ.get("MAGNETAR_BENCH_TRACEMALLOC"):
        import tracemalloc
        tracemalloc.start(int(os.environ["MAGNETAR_BENCH_TRACEMALLOC"]))
'''


# -- /proc and ZooKeeper figures ----------------------------------------------------------
def open_fds(pid: int | None) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def threads(pid: int | None) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def zk_stats(zk: ZooKeeperServer) -> dict[str, int]:
    """ZooKeeper's znode count, approximate data size and more (``mntr``)."""
    keys = ("znode_count", "approximate_data_size", "watch_count", "ephemerals_count", "avg_latency",
            "max_latency", "outstanding_requests", "packets_received", "packets_sent")  # fmt: skip
    figures = zk_mntr(zk, 5.0)
    return {k: figures[k] for k in keys if k in figures}


def raise_nofile() -> tuple[int, int]:
    """Soft RLIMIT_NOFILE up to the hard limit (inherited by every process started here)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


# -- the client processes (``topics.py --worker``) --------------------------------------------
def emit(obj: dict[str, Any]) -> None:
    print(json.dumps(obj), flush=True)


class RawConsumer:
    """A consumer on the bare consume stream (``--consumers raw``): the SDK's transport
    (its connection pool, lookup and stream: a handle on the pool's session) and wire messages, without the SDK
    consumer's writer task, which wakes every 100 ms per consumer even when idle
    (``PartitionConsumer._write_loop``). Exclusive, from the earliest message; each
    delivery is acknowledged and its permits granted again at once; no reconnects."""

    QUEUE = 1000

    def __init__(self, pool: ConnectionPool, topic: str) -> None:
        self.pool = pool
        self.topic = topic
        self.stream: BrokerStream | SessionStream | None = None

    async def open(self) -> None:
        address = await self.pool.lookup(self.topic)
        stream = self.pool.open_consume(address, f"broker {address} (consumer on {self.topic})")
        subscribe = pb.Subscribe(topic=self.topic, subscription=SUBSCRIPTION, type=pb.EXCLUSIVE,
                                 consumer_name=f"raw-{os.getpid()}", initial_position=pb.EARLIEST,
                                 receiver_queue_size=self.QUEUE)  # fmt: skip
        resp = await stream.open(pb.ConsumeRequest(subscribe=subscribe), self.pool.operation_timeout_s)
        if resp.WhichOneof("kind") != "subscribed":
            stream.cancel()
            raise MagnetarError(f"subscribe to {self.topic} answered with {resp}")
        await stream.write(pb.ConsumeRequest(flow=pb.Flow(permits=self.QUEUE)))
        self.stream = stream

    async def batches(self) -> AsyncIterator[list[bytes]]:
        """The payloads of each delivery message, acknowledged once yielded."""
        assert self.stream is not None
        while (resp := await self.stream.read()) is not None:
            kind = resp.WhichOneof("kind")
            if kind == "error":
                raise from_code(resp.error.code, resp.error.message)
            if kind != "deliveries":
                continue
            ids: list[pb.MessageIdData] = []
            payloads: list[bytes] = []
            for d in resp.deliveries.deliveries:
                payloads.extend(m.payload for m in pb.EntryBatch.FromString(d.entry).messages)
                ids.append(pb.MessageIdData(ledger_id=d.message_id.ledger_id, entry_id=d.message_id.entry_id,
                                            partition=-1, batch_index=-1))  # fmt: skip
            yield payloads
            await self.stream.write(pb.ConsumeRequest(ack=pb.Ack(type=pb.INDIVIDUAL, message_ids=ids)))
            await self.stream.write(pb.ConsumeRequest(flow=pb.Flow(permits=len(payloads))))
        raise NotConnected(f"the broker ended the consume stream of {self.topic}")

    def close(self) -> None:
        if self.stream is not None:
            self.stream.cancel()


class Worker:
    """One client process: its share of the topics, one aio.Client and one AdminClient."""

    def __init__(self, url: str, namespace: str, first: int, count: int, concurrency: int, consumers: str) -> None:
        self.topics = [f"persistent://{namespace}/t-{i:06d}" for i in range(first, first + count)]
        self.first = first
        self.concurrency = concurrency
        self.client = aio.Client(url, operation_timeout_seconds=120)
        self.admin = AdminClient(url, 120)
        self.raw_pool = ConnectionPool(url, 120) if consumers == "raw" else None
        self.producers: list[aio.Producer | None] = [None] * count
        self.consumers: list[aio.Consumer | RawConsumer | None] = [None] * count
        self.deadline = float("inf")

    async def each(self, stage: str, fn: Any) -> dict[str, Any]:
        """``fn(i)`` for every topic, ``concurrency`` at a time; progress on stdout."""
        errors: collections.Counter[str] = collections.Counter()
        first_error: dict[str, str] = {}
        done = failed = skipped = 0
        started = time.monotonic()
        todo = iter(range(len(self.topics)))

        async def run() -> None:
            nonlocal done, failed, skipped
            for i in todo:
                if time.monotonic() >= self.deadline:
                    skipped += 1
                    continue
                try:
                    await fn(i)
                except Exception as exc:  # counted and reported: the bench goes on
                    failed += 1
                    kind = type(exc).__name__
                    errors[kind] += 1
                    first_error.setdefault(kind, str(exc)[:300])
                done += 1
                if done % WORKER_REPORT_EVERY == 0:
                    emit({"progress": stage, "done": done, "failed": failed, "t": time.time()})

        await asyncio.gather(*(run() for _ in range(self.concurrency)))
        return {"stage": stage, "done": done, "failed": failed, "skipped": skipped, "errors": dict(errors),
                "first_error": first_error, "seconds": time.monotonic() - started, "rss_kib": rss_kib(os.getpid())}

    async def create(self, i: int) -> None:
        with contextlib.suppress(AlreadyExists):
            await self.admin.create_topic(self.topics[i])

    async def subscribe(self, i: int) -> None:
        if self.raw_pool is not None:
            raw = RawConsumer(self.raw_pool, self.topics[i])
            await raw.open()
            self.consumers[i] = raw
            return
        self.consumers[i] = await self.client.subscribe(
            self.topics[i], SUBSCRIPTION, initial_position=InitialPosition.Earliest)

    async def produce(self, i: int) -> None:
        self.producers[i] = await self.client.create_producer(self.topics[i])

    async def traffic(self, seconds: float, drain_s: float, rate: float) -> dict[str, Any]:
        """``rate`` msgs/s per producer for ``seconds``, each producer at its own offset in
        the period; every consumer receives and acks. Then waits up to ``drain_s`` for the rest."""
        loop = asyncio.get_running_loop()
        n = len(self.topics)
        received = [0] * n
        seen: list[set[int]] = [set() for _ in range(n)]
        duplicates = 0
        latencies: list[float] = []
        recv_by_s: collections.Counter[int] = collections.Counter()
        sent_by_s: collections.Counter[int] = collections.Counter()
        send_errors: collections.Counter[str] = collections.Counter()
        sent = [0] * n
        confirmed = 0
        futures: list[asyncio.Future[Any]] = []
        all_in = asyncio.Event()
        total_received = 0

        def got(i: int, payload: bytes) -> None:
            nonlocal duplicates, total_received
            now = time.time()
            _, seq, stamp = payload.split(b":")
            s = int(seq)
            if s in seen[i]:
                duplicates += 1
            else:
                seen[i].add(s)
                received[i] += 1
                total_received += 1
                latencies.append(now - float(stamp))
            recv_by_s[int(now)] += 1
            if total_received >= confirmed and sending_done and not pending_sends():
                all_in.set()

        async def drain(i: int, consumer: aio.Consumer | RawConsumer) -> None:
            if isinstance(consumer, RawConsumer):
                async for payloads in consumer.batches():
                    for payload in payloads:
                        got(i, payload)
                return
            while True:
                msg = await consumer.receive()
                got(i, msg.data())
                await consumer.acknowledge(msg)

        def on_sent(fut: asyncio.Future[Any]) -> None:
            nonlocal confirmed
            exc = fut.exception() if not fut.cancelled() else asyncio.CancelledError()
            if exc is None:
                confirmed += 1
            else:
                send_errors[type(exc).__name__] += 1

        def pending_sends() -> int:
            return sum(1 for f in futures if not f.done())

        sending_done = False
        drains = [asyncio.create_task(drain(i, c)) for i, c in enumerate(self.consumers) if c is not None]
        live = [i for i, p in enumerate(self.producers) if p is not None]
        random.shuffle(live)  # offsets in the second: no topic order on the wire
        per_s = len(live)
        total = int(seconds * rate * per_s)
        start = loop.time() + 0.1
        k = 0
        while k < total:
            due = min(total, int((loop.time() - start) * rate * per_s) + 1)
            while k < due:
                i = live[k % per_s]
                producer = self.producers[i]
                assert producer is not None
                payload = f"{self.first + i}:{sent[i]}:{time.time():.6f}".encode()
                try:
                    fut = producer.send_async(payload, None)
                except MagnetarError as exc:
                    send_errors[type(exc).__name__] += 1
                else:
                    fut.add_done_callback(on_sent)
                    futures.append(fut)
                    sent[i] += 1
                    sent_by_s[int(time.time())] += 1
                k += 1
            await asyncio.sleep(0.005)
        sending_done = True
        send_end = time.time()
        if futures:
            await asyncio.wait(futures, timeout=drain_s)
        if total_received < confirmed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(all_in.wait(), max(1.0, drain_s - (time.time() - send_end)))
        for t in drains:
            t.cancel()
        await asyncio.gather(*drains, return_exceptions=True)
        missing = sum(max(0, sent[i] - received[i]) for i in range(n))
        lat = sorted(latencies)
        sample = lat if len(lat) <= 20_000 else [lat[int(j * len(lat) / 20_000)] for j in range(20_000)]
        return {
            "stage": "traffic", "topics_sending": per_s, "sent": sum(sent), "confirmed": confirmed,
            "send_errors": dict(send_errors), "received": total_received, "duplicates": duplicates,
            "missing": missing, "topics_missing": sum(1 for i in range(n) if sent[i] > received[i]),
            "recv_by_s": dict(recv_by_s), "sent_by_s": dict(sent_by_s), "latency_sample": sample,
            "rss_kib": rss_kib(os.getpid()),
        }  # fmt: skip

    async def close(self) -> None:
        for c in self.consumers:
            if isinstance(c, RawConsumer):
                c.close()
        if self.raw_pool is not None:
            await self.raw_pool.close()
        await self.client.close()
        await self.admin.close()


async def worker_main(url: str, namespace: str, first: int, count: int, concurrency: int, consumers: str) -> None:
    """Serve the parent's commands (one per stdin line) until ``close``."""
    w = Worker(url, namespace, first, count, concurrency, consumers)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    emit({"ready": True, "rss_kib": rss_kib(os.getpid())})
    while line := (await reader.readline()).decode().strip():
        cmd, *rest = line.split()
        if cmd == "deadline":
            w.deadline = time.monotonic() + float(rest[0])
            emit({"stage": "deadline"})
        elif cmd in ("create", "subscribe", "produce"):
            emit(await w.each(cmd, getattr(w, cmd)))
        elif cmd == "traffic":
            emit(await w.traffic(float(rest[0]), float(rest[1]), float(rest[2])))
        elif cmd == "close":
            started = time.monotonic()
            await w.close()
            emit({"stage": "close", "seconds": time.monotonic() - started})
            return


# -- the parent: cluster, stages, figures ---------------------------------------------------
class Cluster:
    """ZooKeeper, 3 bookies and a broker under one work directory."""

    def __init__(self, work: Path, heap_frames: int, gc_stats: bool) -> None:
        self.work = work
        self.zk = ZooKeeperServer(work / "zk", force_sync=False)
        self.bookies: list[BookieProcess] = []
        self.broker: BrokerProcess | None = None
        self.heap_frames = heap_frames
        self.gc_stats = gc_stats or bool(heap_frames)
        """Ask the broker for a full collection and object counts after each reading (its
        event loop stops meanwhile: about a second per million objects)."""
        self.hook_base = work / "hook" / "broker"
        self.dump_n = 0

    def start(self) -> None:
        self.zk.start()
        quiet = {"log_level": "WARNING"}
        for i in range(3):
            b = BookieProcess(self.zk.connect_string, "/bench", self.work / f"bookie-{i}",
                              config={"min_free_disk_bytes": 0, **quiet})  # fmt: skip
            self.bookies.append(b.start(60))
        hook_dir = self.hook_base.parent
        hook_dir.mkdir(parents=True, exist_ok=True)
        (hook_dir / "sitecustomize.py").write_text(HOOK)
        extra = {"PYTHONPATH": os.pathsep.join(p for p in (str(hook_dir), os.environ.get("PYTHONPATH", "")) if p),
                 "MAGNETAR_BENCH_HOOK": str(self.hook_base)}  # fmt: skip
        if self.heap_frames:
            extra["MAGNETAR_BENCH_TRACEMALLOC"] = str(self.heap_frames)
        saved = {k: os.environ.get(k) for k in extra}
        os.environ.update(extra)  # the broker's environment is taken from ours when it is made
        try:
            # INFO: the broker's full collections and lease lapses are read from its log.
            self.broker = BrokerProcess(self.zk.connect_string, "/bench", self.work / "broker", config={
                "ensemble_size": 3, "write_quorum": 2, "ack_quorum": 2, "log_level": "INFO"})
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.broker.start(60)

    @property
    def pid(self) -> int | None:
        assert self.broker is not None
        return self.broker.process.pid

    @property
    def url(self) -> str:
        assert self.broker is not None
        return f"magnetar://{self.broker.address}"

    def others_rss(self) -> dict[str, int]:
        zk_proc = self.zk.process
        return {"zookeeper": rss_kib(zk_proc.pid if zk_proc else None),
                "bookies": sum(rss_kib(b.process.pid) for b in self.bookies)}  # fmt: skip

    async def dump(self, tag: str, timeout_s: float = 120.0) -> dict[str, Any] | None:
        """Ask the broker for a full collection and its object counts (and a tracemalloc
        snapshot when traced); None when it did not answer in time."""
        self.dump_n += 1
        return await asyncio.to_thread(self._dump, f"{self.dump_n:02d}-{tag}", timeout_s)

    def _dump(self, tag: str, timeout_s: float) -> dict[str, Any] | None:
        Path(f"{self.hook_base}.tag").write_text(tag)
        out = Path(f"{self.hook_base}.{tag}.json")
        assert self.pid is not None
        os.kill(self.pid, signal.SIGUSR2)
        deadline = time.monotonic() + timeout_s
        while not out.exists():
            if time.monotonic() > deadline:
                return None
            time.sleep(0.2)
        result: dict[str, Any] = json.loads(out.read_text())
        snap = Path(f"{self.hook_base}.{tag}.snap")
        result["snapshot"] = str(snap) if snap.exists() else None
        return result

    def broker_log(self) -> dict[str, Any]:
        """What the broker's log says: lines by level, full garbage collections (ms), times
        it stopped serving (lease lapses, sessions lost), its warnings by kind."""
        if self.broker is None or not self.broker.log_path.exists():
            return {}
        levels: collections.Counter[str] = collections.Counter()
        warnings: collections.Counter[str] = collections.Counter()
        gc_ms: list[float] = []
        lapses: list[str] = []
        with self.broker.log_path.open(errors="replace") as fh:
            for line in fh:
                parts = line.split(" ", 4)
                if len(parts) < 5 or parts[1] not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
                    continue
                levels[parts[1]] += 1
                text = parts[4].strip()
                if "full garbage collection" in text:
                    with contextlib.suppress(ValueError, IndexError):
                        gc_ms.append(float(text.rsplit(" in ", 1)[1].split()[0]))
                if "not serving until ZooKeeper answers" in text or "ZooKeeper session lost" in text:
                    lapses.append(f"{parts[0]} {text[:160]}")
                if parts[1] in ("WARNING", "ERROR", "CRITICAL"):
                    warnings[re.sub(r"\d+(\.\d+)?", "N", re.sub(r"persistent://\S+", "<topic>", text))[:140]] += 1
        return {"lines_by_level": dict(levels), "full_gc_ms": gc_ms, "stopped_serving": lapses,
                "warnings": warnings.most_common(15)}  # fmt: skip

    def stop(self) -> None:
        for p in [self.broker, *reversed(self.bookies)]:
            if p is not None:
                with contextlib.suppress(Exception):
                    p.stop()
        self.zk.stop()


class Workers:
    """The client processes, each serving commands on stdin, answering JSON lines."""

    def __init__(self, procs: list[asyncio.subprocess.Process], sizes: list[int]) -> None:
        self.procs = procs
        self.sizes = sizes

    @classmethod
    async def start(cls, url: str, namespace: str, total: int, count: int, concurrency: int, consumers: str = "sdk") -> Workers:
        sizes = [total // count + (1 if i < total % count else 0) for i in range(count)]
        firsts = [sum(sizes[:i]) for i in range(count)]
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--worker", url, namespace, str(first), str(size), str(concurrency), consumers,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, limit=64 * 1024 * 1024)
            for first, size in zip(firsts, sizes, strict=True) if size
        ]  # fmt: skip
        workers = cls(procs, [s for s in sizes if s])
        for p in procs:
            line = await cls._line(p)
            if not line.get("ready"):
                raise RuntimeError(f"a client process did not start: {line}")
        return workers

    @staticmethod
    async def _line(p: asyncio.subprocess.Process) -> dict[str, Any]:
        assert p.stdout is not None
        raw = await p.stdout.readline()
        if not raw:
            raise RuntimeError(f"client process {p.pid} exited (code {await p.wait()})")
        return json.loads(raw)

    def rss(self) -> int:
        return sum(rss_kib(p.pid) for p in self.procs)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    async def command(self, cmd: str, on_progress: Any = None) -> list[dict[str, Any]]:
        """Send ``cmd`` to every process; ``on_progress(total done, total failed)`` as
        reports come; the final answers."""
        for p in self.procs:
            assert p.stdin is not None
            p.stdin.write(cmd.encode() + b"\n")
            await p.stdin.drain()
        done = [0] * len(self.procs)
        failed = [0] * len(self.procs)

        async def follow(k: int) -> dict[str, Any]:
            while True:
                msg = await self._line(self.procs[k])
                if "progress" not in msg:
                    return msg
                done[k], failed[k] = msg["done"], msg["failed"]
                if on_progress is not None:
                    await on_progress(sum(done), sum(failed))

        return list(await asyncio.gather(*(follow(k) for k in range(len(self.procs)))))

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.command("close"), 60)
        for p in self.procs:
            if p.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
            await p.wait()


class Progress:
    """Prints a line every PROGRESS_EVERY topics: count, elapsed, rate, broker RSS; keeps
    the times at which each multiple of ``window`` was reached."""

    def __init__(self, stage: str, cluster: Cluster, window: int = 10_000) -> None:
        self.stage, self.cluster, self.window = stage, cluster, window
        self.started = time.monotonic()
        self.printed = 0
        self.marks: list[tuple[int, float, int]] = [(0, 0.0, rss_kib(cluster.pid))]  # (count, elapsed, rss)
        self.zk: list[dict[str, Any]] = []

    async def __call__(self, done: int, failed: int) -> None:
        if done // PROGRESS_EVERY <= self.printed // PROGRESS_EVERY:
            return
        self.printed = done
        elapsed = time.monotonic() - self.started
        rss = rss_kib(self.cluster.pid)
        print(f"  {self.stage}: {done:>7,} topics  {elapsed:7.1f} s  {done / elapsed:7.1f} topics/s  "
              f"broker RSS {rss / 1024:8.1f} MiB  failed {failed}", flush=True)  # fmt: skip
        if done // self.window > self.marks[-1][0] // self.window:
            self.marks.append((done, elapsed, rss))
            self.zk.append({"topics": done, **zk_stats(self.cluster.zk)})

    def windows(self) -> list[dict[str, Any]]:
        out = []
        for (c0, t0, _), (c1, t1, rss) in zip(self.marks, self.marks[1:], strict=False):
            out.append({"from": c0, "to": c1, "seconds": t1 - t0, "topics_per_s": (c1 - c0) / max(1e-9, t1 - t0),
                        "broker_rss_kib": rss})  # fmt: skip
        return out


async def settle(cluster: Cluster, seconds: float, clients: Sequence[int] = ()) -> dict[str, Any]:
    """Broker RSS after ``seconds`` of quiet (sampled each second; the last and the peak),
    its CPU share meanwhile, and the RSS after a full garbage collection."""
    cpu0, t0 = cpu_seconds(cluster.pid), time.monotonic()
    client0 = sum(cpu_seconds(pid) for pid in clients)
    samples = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        await asyncio.sleep(1.0)
        samples.append(rss_kib(cluster.pid))
    elapsed = max(1e-9, time.monotonic() - t0)
    cpu = (cpu_seconds(cluster.pid) - cpu0) / elapsed
    client_cpu = (sum(cpu_seconds(pid) for pid in clients) - client0) / elapsed
    out: dict[str, Any] = {"rss_kib": samples[-1] if samples else rss_kib(cluster.pid), "rss_peak_kib": max(samples, default=0),
                           "broker_cpu_share": cpu, "client_cpu_share": client_cpu if clients else None,
                           "fds": open_fds(cluster.pid), "threads": threads(cluster.pid),
                           **{f"{k}_rss_kib": v for k, v in cluster.others_rss().items()}}  # fmt: skip
    return out


async def measure(cluster: Cluster, tag: str, seconds: float, clients: Sequence[int] = ()) -> dict[str, Any]:
    """:func:`settle` (``clients``: pids whose CPU share is taken too), then the broker's
    full collection and object counts."""
    m = await settle(cluster, seconds, clients)
    if not cluster.gc_stats:
        return m
    dump = await cluster.dump(tag)
    await asyncio.sleep(1.0)
    m["rss_after_gc_kib"] = rss_kib(cluster.pid)
    if dump is not None:
        m.update({"gc_collected": dump["collected"], "gc_garbage_types": dump["garbage_types"],
                  "gc_objects": dump["objects"], "object_types": dump["types"],
                  "object_type_bytes": dump["type_bytes"], "gc_object_bytes": dump["object_bytes"],
                  "pymalloc_blocks": dump["blocks"], "traced_bytes": dump["traced_bytes"],
                  "snapshot": dump["snapshot"], "dump_seconds": dump["seconds"]})  # fmt: skip
    return m


def per_topic(after: dict[str, Any], before: dict[str, Any], n: int, key: str = "rss_kib") -> float | None:
    """(after - before) / n of one figure; None when either reading lacks it."""
    if after.get(key) is None or before.get(key) is None:
        return None
    return (after[key] - before[key]) / max(1, n)


def type_growth(after: dict[str, Any], before: dict[str, Any], n: int, top: int = 25,
                key: str = "object_types") -> list[tuple[str, float]]:
    """Live objects (``object_type_bytes``: their shallow bytes) per topic added between
    two measurements, by type (most first)."""
    a = dict(after.get(key, []))
    b = dict(before.get(key, []))
    grown = [(t, (a[t] - b.get(t, 0)) / max(1, n)) for t in a]
    return [(t, round(g, 2)) for t, g in sorted(grown, key=lambda x: -x[1])[:top] if g > 0]


def heap_growth(after: str | None, before: str | None, n: int, top: int = 30) -> list[dict[str, Any]]:
    """tracemalloc: bytes per topic added between two snapshots, grouped by the innermost
    Magnetar frame of the allocation (the allocating line kept alongside)."""
    if not after or not before:
        return []
    snap_a = tracemalloc.Snapshot.load(after)
    snap_b = tracemalloc.Snapshot.load(before)
    grouped: dict[tuple[str, str], list[int]] = collections.defaultdict(lambda: [0, 0])
    for stat in snap_a.compare_to(snap_b, "traceback"):
        if stat.size_diff <= 0:
            continue
        frames = list(reversed(stat.traceback))  # tracemalloc keeps them oldest first
        alloc = f"{_short(frames[0].filename)}:{frames[0].lineno}" if frames else "?"
        owner = next((f"{_short(f.filename)}:{f.lineno}" for f in frames if "/magnetar/" in f.filename
                      and "/magnetar/common/service_main.py" not in f.filename), "(no Magnetar frame)")
        g = grouped[(owner, alloc)]
        g[0] += stat.size_diff
        g[1] += stat.count_diff
    rows = sorted(grouped.items(), key=lambda kv: -kv[1][0])[:top]
    return [{"magnetar_frame": o, "allocated_at": a, "bytes_per_topic": round(s / max(1, n), 1),
             "blocks_per_topic": round(c / max(1, n), 2)} for (o, a), (s, c) in rows]  # fmt: skip


def _short(path: str) -> str:
    """``magnetar/broker/topic.py`` for a Magnetar file, ``grpc/aio/_call.py`` for a
    package, ``asyncio/events.py`` for the standard library."""
    for marker in ("/magnetar/", "/site-packages/"):
        if marker in path:
            rest = path.split(marker, 1)[1]
            return "magnetar/" + rest if marker == "/magnetar/" else rest
    if "/lib/python3" in path:
        return path.split("/lib/python3", 1)[1].split("/", 1)[-1]
    return path


def py_spy(pid: int | None, seconds: float, out: Path) -> subprocess.Popen[bytes] | None:
    """``py-spy record`` of the broker for ``seconds`` into a speedscope file (None: no py-spy)."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(exe).exists():
        print("  (py-spy is not installed: `.venv/bin/pip install py-spy` to profile)")
        return None
    return subprocess.Popen([exe, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "50",
                             "--format", "speedscope", "--nonblocking", "--output", str(out)],
                            stdout=subprocess.DEVNULL, stderr=out.with_suffix(".log").open("wb"))  # fmt: skip


def spy_result(proc: subprocess.Popen[bytes], out: Path) -> dict[str, Any]:
    """Wait for a :func:`py_spy` run; its hottest functions (its stderr file is kept only
    when it said something)."""
    proc.wait()
    log = out.with_suffix(".log")
    if log.exists() and log.stat().st_size == 0:
        log.unlink()
    return hot_functions(out)


def hot_functions(speedscope: Path, top: int = 20) -> dict[str, Any]:
    """Share of the samples per function of a py-spy speedscope profile (every thread;
    py-spy leaves out threads it sees idle): where the sample was (self) and anywhere on
    its stack (inclusive)."""
    try:
        doc = json.loads(speedscope.read_text())
    except (OSError, ValueError):
        return {}
    frames = doc["shared"]["frames"]
    names = [f"{f['name']} ({_short(f.get('file', '?'))}:{f.get('line', 0)})" for f in frames]
    self_n: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0.0
    for prof in doc["profiles"]:
        for sample, weight in zip(prof["samples"], prof["weights"], strict=True):
            if not sample:
                continue
            total += weight
            self_n[names[sample[-1]]] += weight
            for name in {names[i] for i in sample}:
                incl[name] += weight
    return {
        "samples": round(total, 2),
        "self": [(k, round(v / max(1e-9, total), 4)) for k, v in self_n.most_common(top)],
        "inclusive": [(k, round(v / max(1e-9, total), 4)) for k, v in incl.most_common(top * 2)],
    }  # fmt: skip


def _kib(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.1f} KiB"


async def active_phase(args: argparse.Namespace, cluster: Cluster, results_dir: Path) -> dict[str, Any]:
    n, ns = args.topics, f"{TENANT}/active"
    async with AdminClient(cluster.url, 60) as admin:
        for namespace in (ns, f"{TENANT}/warmup"):
            await admin.create_namespace(namespace)
    # Warm-up: one topic through every path (imports, caches, first ledger), then the baseline.
    async with aio.Client(cluster.url) as client:
        warm = f"persistent://{TENANT}/warmup/w"
        consumer = await client.subscribe(warm, SUBSCRIPTION, initial_position=InitialPosition.Earliest)
        producer = await client.create_producer(warm)
        await producer.send(b"0:0:0")
        await consumer.acknowledge(await consumer.receive(timeout_millis=30_000))
    stages: dict[str, dict[str, Any]] = {}
    print(f"A. {n:,} active topics on one broker; {args.workers} client processes ({args.consumers} consumers), "
          f"{args.concurrency} opens in flight each", flush=True)  # fmt: skip
    stages["baseline"] = await measure(cluster, "baseline", args.settle_seconds)
    print(f"  baseline: broker RSS {stages['baseline']['rss_kib'] / 1024:.1f} MiB", flush=True)
    workers = await Workers.start(cluster.url, ns, n, args.workers, args.concurrency, args.consumers)
    client_rss = {"start": workers.rss()}
    answers: dict[str, list[dict[str, Any]]] = {}
    try:
        for stage, label in (("create", "admin create (the broker loads each topic)"),
                             ("subscribe", "a consumer on each"), ("produce", "a producer on each")):  # fmt: skip
            print(f"  stage {stage}: {label}", flush=True)
            progress = Progress(stage, cluster)
            answers[stage] = await workers.command(stage, progress)
            took = time.monotonic() - progress.started
            failed = sum(a["failed"] for a in answers[stage])
            stages[stage] = await measure(cluster, stage, args.settle_seconds, workers.pids)
            stages[stage].update({"seconds": took, "per_s": n / took, "failed": failed,
                                  "errors": _merge_errors(answers[stage])})  # fmt: skip
            client_rss[stage] = workers.rss()
            print(f"  {stage}: {n:,} in {took:.1f} s ({n / took:,.0f}/s), {failed} failed; broker RSS "
                  f"{stages[stage]['rss_kib'] / 1024:.1f} MiB (+{_kib(per_topic(stages[stage], stages['baseline'], n))} "
                  f"per topic since the baseline), CPU {stages[stage]['broker_cpu_share']:.0%} while idle",
                  flush=True)  # fmt: skip
            if failed:
                print(f"    errors: {_merge_errors(answers[stage])}", flush=True)
        profile = None
        if args.profile:
            idle_out = results_dir / "topics-broker-idle.speedscope.json"
            proc = py_spy(cluster.pid, 10, idle_out)
            if proc is not None:
                profile = {"idle": spy_result(proc, idle_out)}
        # Traffic: 1 msg/s per topic.
        print(f"  stage traffic: {args.rate:g} msg/s on each of {n:,} topics for {args.traffic_seconds:g} s", flush=True)
        samples: list[dict[str, Any]] = []
        spy = py_spy(cluster.pid, min(30, args.traffic_seconds - 5), results_dir / "topics-broker-traffic.speedscope.json") \
            if args.profile and args.traffic_seconds > 10 else None
        sampler = asyncio.create_task(_sample(cluster, samples))
        cpu0, t0, zk0 = cpu_seconds(cluster.pid), time.monotonic(), zk_stats(cluster.zk)
        traffic = await workers.command(f"traffic {args.traffic_seconds} {args.drain_seconds} {args.rate}")
        elapsed = time.monotonic() - t0
        cpu_s = cpu_seconds(cluster.pid) - cpu0
        zk1 = zk_stats(cluster.zk)
        cpu_share = cpu_s / elapsed
        zk_rate = (zk1.get("packets_received", 0) - zk0.get("packets_received", 0)) / elapsed
        sampler.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
        if spy is not None:
            profile = {**(profile or {}), "traffic": spy_result(spy, results_dir / "topics-broker-traffic.speedscope.json")}
        stages["traffic"] = await measure(cluster, "traffic", args.settle_seconds, workers.pids)
        client_rss["traffic"] = workers.rss()
    finally:
        await workers.close()
    stages["closed"] = await measure(cluster, "clients-closed", args.settle_seconds)
    report = _active_report(args, stages, answers, traffic, samples, cpu_share, client_rss, profile)
    report["traffic"].update({"broker_cpu_ms_per_message": cpu_s * 1000 / max(1, report["traffic"]["received"]),
                              "zk_requests_per_s": zk_rate, "seconds_with_drain": elapsed})  # fmt: skip
    return report


async def _sample(cluster: Cluster, out: list[dict[str, Any]]) -> None:
    """Broker RSS and CPU every 2 s; a progress line every 10 s."""
    started = time.monotonic()
    while True:
        out.append({"t": time.time(), "rss_kib": rss_kib(cluster.pid), "cpu_s": cpu_seconds(cluster.pid)})
        if len(out) % 5 == 0:
            first = out[max(0, len(out) - 6)]
            cpu = (out[-1]["cpu_s"] - first["cpu_s"]) / max(1e-9, out[-1]["t"] - first["t"])
            print(f"  traffic: {time.monotonic() - started:5.0f} s  broker RSS {out[-1]['rss_kib'] / 1024:8.1f} MiB  "
                  f"CPU {cpu:4.0%}", flush=True)  # fmt: skip
        await asyncio.sleep(2.0)


def _merge_errors(answers: list[dict[str, Any]]) -> dict[str, Any]:
    merged: collections.Counter[str] = collections.Counter()
    first: dict[str, str] = {}
    for a in answers:
        merged.update(a.get("errors", {}))
        for k, v in a.get("first_error", {}).items():
            first.setdefault(k, v)
    return {k: {"count": c, "first": first.get(k, "")} for k, c in merged.items()}


def _active_report(args: argparse.Namespace, stages: dict[str, dict[str, Any]], answers: dict[str, list[dict[str, Any]]],
                   traffic: list[dict[str, Any]], samples: list[dict[str, Any]], cpu_share: float,
                   client_rss: dict[str, int], profile: dict[str, Any] | None) -> dict[str, Any]:  # fmt: skip
    n = args.topics
    base = stages["baseline"]
    recv_by_s: collections.Counter[int] = collections.Counter()
    sent_by_s: collections.Counter[int] = collections.Counter()
    for t in traffic:
        recv_by_s.update({int(k): v for k, v in t["recv_by_s"].items()})
        sent_by_s.update({int(k): v for k, v in t["sent_by_s"].items()})
    secs = sorted(sent_by_s)
    steady = [recv_by_s.get(s, 0) for s in secs[2:-2]] if len(secs) > 6 else [recv_by_s.get(s, 0) for s in secs]
    lat = sorted(x for t in traffic for x in t["latency_sample"])
    sent = sum(t["sent"] for t in traffic)
    received = sum(t["received"] for t in traffic)
    rss_during = [s["rss_kib"] for s in samples]
    t_report = {
        "seconds": args.traffic_seconds, "offered_msgs_per_s": sum(t["topics_sending"] for t in traffic) * args.rate,
        "sent": sent, "confirmed": sum(t["confirmed"] for t in traffic), "received": received,
        "duplicates": sum(t["duplicates"] for t in traffic), "missing": sum(t["missing"] for t in traffic),
        "topics_missing_messages": sum(t["topics_missing"] for t in traffic),
        "send_errors": dict(sum((collections.Counter(t["send_errors"]) for t in traffic), collections.Counter())),
        "received_msgs_per_s_median": statistics.median(steady) if steady else 0.0,
        "received_msgs_per_s_min": min(steady, default=0), "received_msgs_per_s_max": max(steady, default=0),
        "latency_ms": {"p50": _pct(lat, 0.50), "p99": _pct(lat, 0.99), "max": lat[-1] * 1000 if lat else None},
        "broker_cpu_share": cpu_share, "broker_rss_kib_max": max(rss_during, default=0),
        "broker_rss_kib_samples": rss_during,
    }  # fmt: skip
    t_report["lossless"] = (t_report["missing"] == 0 and sent == t_report["confirmed"] and sent > 0
                            and not t_report["send_errors"])  # fmt: skip
    idle = per_topic(stages["produce"], base, n)
    out = {
        "topics": n, "workers": args.workers, "concurrency_per_worker": args.concurrency, "consumers": args.consumers,
        "stages": stages,
        "per_topic_kib": {
            "loaded_topic": per_topic(stages["create"], base, n),
            "consumer": per_topic(stages["subscribe"], stages["create"], n),
            "producer": per_topic(stages["produce"], stages["subscribe"], n),
            "idle_topic": idle,
            "idle_topic_after_gc": per_topic(stages["produce"], base, n, "rss_after_gc_kib"),
            "idle_topic_python_objects": _kib_of(per_topic(stages["produce"], base, n, "gc_object_bytes")),
            "idle_topic_traced_python_heap": _kib_of(per_topic(stages["produce"], base, n, "traced_bytes")),
            "active_topic_end": per_topic(stages["traffic"], base, n),
            "active_topic_peak": (t_report["broker_rss_kib_max"] - base["rss_kib"]) / n,
            "after_clients_closed": per_topic(stages["closed"], base, n),
        },
        "objects_per_topic": {
            "loaded_topic": type_growth(stages["create"], base, n),
            "consumer": type_growth(stages["subscribe"], stages["create"], n),
            "producer": type_growth(stages["produce"], stages["subscribe"], n),
            "traffic": type_growth(stages["traffic"], stages["produce"], n),
        },
        "object_bytes_per_topic": {
            "loaded_topic": type_growth(stages["create"], base, n, key="object_type_bytes"),
            "consumer": type_growth(stages["subscribe"], stages["create"], n, key="object_type_bytes"),
            "producer": type_growth(stages["produce"], stages["subscribe"], n, key="object_type_bytes"),
        },
        "client_rss_kib": client_rss,
        "client_per_stream_kib": {
            "consumer": (client_rss["subscribe"] - client_rss["create"]) / n,
            "producer": (client_rss["produce"] - client_rss["subscribe"]) / n,
        },
        "open_rates_per_s": {s: stages[s]["per_s"] for s in ("create", "subscribe", "produce")},
        "traffic": t_report, "target_idle_kib": TARGET_IDLE_KIB, "target_met": idle is not None and idle <= TARGET_IDLE_KIB,
        "profile": profile,
    }  # fmt: skip
    if args.heap_profile:
        snaps = {k: v.get("snapshot") for k, v in stages.items()}
        out["heap_per_topic"] = {
            "loaded_topic": heap_growth(snaps["create"], snaps["baseline"], n),
            "consumer": heap_growth(snaps["subscribe"], snaps["create"], n),
            "producer": heap_growth(snaps["produce"], snaps["subscribe"], n),
            "traffic": heap_growth(snaps["traffic"], snaps["produce"], n),
            "clients_closed": heap_growth(snaps["closed"], snaps["produce"], n),
        }
    return out


def _kib_of(b: float | None) -> float | None:
    return None if b is None else b / 1024


def _pct(values: list[float], q: float) -> float | None:
    return values[min(len(values) - 1, int(len(values) * q))] * 1000 if values else None


async def metadata_phase(args: argparse.Namespace, cluster: Cluster) -> dict[str, Any]:
    m, ns = args.metadata_topics, f"{TENANT}/metadata"
    async with AdminClient(cluster.url, 60) as admin:
        await admin.create_namespace(ns)
    print(f"B. {m:,} topics created through the admin API (namespace {ns}); {args.workers} client processes, "
          f"{args.concurrency} creates in flight each; at most {args.metadata_max_seconds:g} s", flush=True)  # fmt: skip
    before = await measure(cluster, "metadata-before", args.settle_seconds)
    zk_before = zk_stats(cluster.zk)
    workers = await Workers.start(cluster.url, ns, m, args.workers, args.concurrency)
    spy_proc = None
    try:
        await workers.command(f"deadline {args.metadata_max_seconds}")
        progress = Progress("metadata", cluster)
        if args.profile:
            spy_proc = py_spy(cluster.pid, 30, Path(args.out).parent / "topics-broker-create.speedscope.json")
        cpu0 = cpu_seconds(cluster.pid)
        answers = await workers.command("create", progress)
        took = time.monotonic() - progress.started
        cpu = cpu_seconds(cluster.pid) - cpu0
    finally:
        await workers.close()
    created = sum(a["done"] - a["failed"] for a in answers)
    failed = sum(a["failed"] for a in answers)
    skipped = sum(a["skipped"] for a in answers)
    progress.marks.append((created + failed, took, rss_kib(cluster.pid)))
    zk_after = zk_stats(cluster.zk)
    after = await measure(cluster, "metadata-after", args.settle_seconds)
    listed: dict[str, Any] = {}
    async with AdminClient(cluster.url, 300) as admin:
        t0 = time.monotonic()
        try:
            listed = {"count": len(await admin.topics(ns)), "seconds": time.monotonic() - t0}
        except MagnetarError as exc:
            listed = {"error": f"{type(exc).__name__}: {str(exc)[:300]}", "seconds": time.monotonic() - t0}
    profile = None
    if spy_proc is not None:
        profile = spy_result(spy_proc, Path(args.out).parent / "topics-broker-create.speedscope.json")
    return {
        "asked": m, "created": created, "failed": failed, "not_tried_deadline": skipped, "seconds": took,
        "topics_per_s": created / max(1e-9, took), "per_window": progress.windows(),
        "errors": _merge_errors(answers), "broker_cpu_s_per_topic": cpu / max(1, created),
        "broker_rss_before": before, "broker_rss_after": after,
        "broker_rss_per_created_topic_kib": per_topic(after, before, created),
        "objects_per_created_topic": type_growth(after, before, max(1, created)),
        "zk_before": zk_before, "zk_after": zk_after, "zk_by_10k": progress.zk,
        "zk_znodes_per_topic": (zk_after.get("znode_count", 0) - zk_before.get("znode_count", 0)) / max(1, created),
        "zk_bytes_per_topic": (zk_after.get("approximate_data_size", 0) - zk_before.get("approximate_data_size", 0))
        / max(1, created),
        "list_topics": listed, "profile": profile,
    }  # fmt: skip


def print_summary(result: dict[str, Any]) -> None:
    a = result.get("active")
    if a:
        p, t = a["per_topic_kib"], a["traffic"]
        print(f"\nA. {a['topics']:,} topics, broker RSS per topic (since the baseline):")
        print(f"   admin create (not loaded)       {_kib(p['loaded_topic'])}")
        print(f"   + a consumer (subscription)     {_kib(p['consumer'])}")
        print(f"   + a producer                    {_kib(p['producer'])}")
        print(f"   = idle topic                    {_kib(p['idle_topic'])}; target <= {TARGET_IDLE_KIB:g} KiB: "
              f"{'MET' if a['target_met'] else 'NOT MET'}")
        if p["idle_topic_after_gc"] is not None:
            print(f"     after a full collection {_kib(p['idle_topic_after_gc'])}; of which Python objects the collector "
                  f"tracks (shallow sizes) {_kib(p['idle_topic_python_objects'])}"
                  + (f", tracemalloc's Python heap {_kib(p['idle_topic_traced_python_heap'])}"
                     if p["idle_topic_traced_python_heap"] is not None else ""))
        print(f"   active topic ({t['offered_msgs_per_s'] / a['topics']:g} msg/s) at end  {_kib(p['active_topic_end'])} "
              f"(peak {_kib(p['active_topic_peak'])})")
        print(f"   clients closed, topics loaded   {_kib(p['after_clients_closed'])}")
        print(f"   opens/s: create {a['open_rates_per_s']['create']:,.0f}, subscribe "
              f"{a['open_rates_per_s']['subscribe']:,.0f}, produce {a['open_rates_per_s']['produce']:,.0f}; client RSS "
              f"per consumer {_kib(a['client_per_stream_kib']['consumer'])}, per producer "
              f"{_kib(a['client_per_stream_kib']['producer'])}")
        idle = a["stages"]["produce"]
        print(f"   CPU while idle with {a['topics']:,} idle topics: broker {idle['broker_cpu_share']:.0%} of a core; client "
              f"processes {idle['client_cpu_share'] or 0:.0%} (after subscribe: "
              f"{a['stages']['subscribe']['client_cpu_share'] or 0:.0%}, after create: "
              f"{a['stages']['create']['client_cpu_share'] or 0:.0%})")
        print(f"   traffic: offered {t['offered_msgs_per_s']:,} msgs/s, received median {t['received_msgs_per_s_median']:,.0f} "
              f"msgs/s (min {t['received_msgs_per_s_min']:,}, max {t['received_msgs_per_s_max']:,}); latency p50 "
              f"{t['latency_ms']['p50'] or 0:.1f} ms p99 {t['latency_ms']['p99'] or 0:.1f} ms; broker CPU "
              f"{t['broker_cpu_share']:.0%}, {t['broker_cpu_ms_per_message']:.2f} ms per message; ZooKeeper "
              f"{t['zk_requests_per_s']:,.0f} requests/s")
        print(f"   sent {t['sent']:,}, confirmed {t['confirmed']:,}, received {t['received']:,}, missing {t['missing']:,} "
              f"({t['topics_missing_messages']} topics), duplicates {t['duplicates']}, send errors {t['send_errors'] or 'none'}: "
              f"{'nothing lost' if t['lossless'] else 'LOST OR FAILED MESSAGES'}")
        if a["objects_per_topic"]["loaded_topic"]:
            idle_parts = {k: v for k, v in a["objects_per_topic"].items() if k != "traffic"}
            print("   live objects added per idle topic (broker):",
                  ", ".join(f"{k.rsplit('.', 1)[-1]} {v:g}" for k, v in _sum_types(idle_parts).items()))
            print("   their shallow bytes per idle topic by type:",
                  ", ".join(f"{k.rsplit('.', 1)[-1]} {v:,.0f}" for k, v in _sum_types(a["object_bytes_per_topic"]).items()))
            print("   objects added per topic by the traffic:",
                  ", ".join(f"{k.rsplit('.', 1)[-1]} {v:g}" for k, v in _sum_types({"t": a["objects_per_topic"]["traffic"]}).items()))
        for part, rows in (a.get("heap_per_topic") or {}).items():
            print(f"   tracemalloc, {part}: bytes per topic by Magnetar frame (top 12)")
            for r in rows[:12]:
                print(f"     {r['bytes_per_topic']:>9,.0f} B  {r['magnetar_frame']:<58} at {r['allocated_at']}")
        for kind, prof in (a.get("profile") or {}).items():
            if prof:
                print(f"   py-spy, broker {kind} ({prof['samples']:g} sample-seconds); hottest (self):")
                for name, share in prof["self"][:10]:
                    print(f"     {share:6.1%}  {name}")
    b = result.get("metadata")
    if b:
        print(f"\nB. metadata: {b['created']:,} of {b['asked']:,} topics created in {b['seconds']:.1f} s: "
              f"{b['topics_per_s']:,.1f} topics/s ({b['failed']} failed, {b['not_tried_deadline']:,} not tried)")
        for w in b["per_window"]:
            print(f"   {w['from']:>7,} -> {w['to']:>7,}: {w['topics_per_s']:7.1f} topics/s, broker RSS "
                  f"{w['broker_rss_kib'] / 1024:.0f} MiB")
        print(f"   broker RSS {b['broker_rss_before']['rss_kib'] / 1024:.0f} -> {b['broker_rss_after']['rss_kib'] / 1024:.0f} "
              f"MiB ({_kib(b['broker_rss_per_created_topic_kib'])} per created topic); broker CPU "
              f"{b['broker_cpu_s_per_topic'] * 1000:.1f} ms per create")
        print(f"   ZooKeeper: {b['zk_after'].get('znode_count', 0):,} znodes, "
              f"{b['zk_after'].get('approximate_data_size', 0) / 1e6:.1f} MB ({b['zk_znodes_per_topic']:.2f} znodes, "
              f"{b['zk_bytes_per_topic']:.0f} B per topic); list_topics: {b['list_topics']}")
        if b.get("profile"):
            print(f"   py-spy, broker during the creates ({b['profile']['samples']:g} sample-seconds); hottest (self):")
            for name, share in b["profile"]["self"][:10]:
                print(f"     {share:6.1%}  {name}")


TARGET_P99_MS = 100.0


def verdict(result: dict[str, Any]) -> bool:
    """Print the active topics' verdict: held, nothing lost, p99; True if all met."""
    a = result.get("active")
    if not a:
        return True
    t = a["traffic"]
    lapses = result.get("broker_log", {}).get("stopped_serving", [])
    p99 = t["latency_ms"]["p99"]
    checks = [
        (f"held: no lease lapse in {t['seconds']:g} s", not lapses, f"{len(lapses)} times stopped serving"),
        ("nothing lost (every message sent arrived)", t["lossless"],
         f"sent {t['sent']:,}, confirmed {t['confirmed']:,}, missing {t['missing']:,}, send errors {t['send_errors'] or 'none'}"),
        (f"end-to-end p99 <= {TARGET_P99_MS:g} ms", p99 is not None and p99 <= TARGET_P99_MS,
         f"p50 {t['latency_ms']['p50'] or 0:.1f} ms, p99 {p99 or 0:.1f} ms"),
    ]
    print(f"\nverdict, {a['topics']:,} topics at {t['offered_msgs_per_s'] / a['topics']:g} msg/s each for {t['seconds']:g} s "
          f"(broker CPU {t['broker_cpu_share']:.0%}; load average {result['load_average_start']:.2f} at start, "
          f"{result.get('load_average_end', 0):.2f} at end):")
    for name, ok, figure in checks:
        print(f"   {'pass' if ok else 'FAIL'}  {name}: {figure}")
    return all(ok for _, ok, _ in checks)


def print_log(log: dict[str, Any]) -> None:
    if not log:
        return
    gc_ms = log["full_gc_ms"]
    print(f"\nbroker log: {log['lines_by_level']}; full garbage collections: "
          + (", ".join(f"{ms:,.0f} ms" for ms in gc_ms) if gc_ms else "none"))
    for line in log["stopped_serving"][:10]:
        print(f"   STOPPED SERVING: {line}")
    for text, count in log["warnings"][:10]:
        print(f"   {count:>6,} x {text}")


def _sum_types(parts: dict[str, list[tuple[str, float]]], top: int = 12) -> dict[str, float]:
    total: dict[str, float] = collections.defaultdict(float)
    for rows in parts.values():
        for k, v in rows:
            total[k] += v
    return {k: round(v, 1) for k, v in sorted(total.items(), key=lambda kv: -kv[1])[:top]}


async def run(args: argparse.Namespace, cluster: Cluster) -> dict[str, Any]:
    result: dict[str, Any] = {"cpus": os.cpu_count(), "load_average_start": os.getloadavg()[0],
                              "cluster": "ZooKeeper, 3 bookies, 1 broker; E=3 Qw=2 Qa=2", "note": args.note}  # fmt: skip
    async with AdminClient(cluster.url, 60) as admin:
        await admin.create_tenant(TENANT)
    results_dir = Path(args.out).parent
    results_dir.mkdir(parents=True, exist_ok=True)
    if args.topics:
        result["active"] = await active_phase(args, cluster, results_dir)
    if args.metadata_topics:
        if args.topics:  # a fresh broker: nothing of A loaded
            assert cluster.broker is not None
            print("  restarting the broker (A's topics unloaded)", flush=True)
            cluster.broker.restart(60)
        result["metadata"] = await metadata_phase(args, cluster)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10_000, help="active topics (0: skip part A)")
    parser.add_argument("--metadata-topics", type=int, default=100_000, help="topics to create (0: skip part B)")
    parser.add_argument("--quick", action="store_true", help="a small run: 200 topics, 2,000 in the metadata, 20 s")
    parser.add_argument("--workers", type=int, default=4, help="client processes")
    parser.add_argument("--concurrency", type=int, default=32, help="opens/creates in flight per client process")
    parser.add_argument("--duration", "--traffic-seconds", dest="traffic_seconds", type=float, default=900.0,
                        help="seconds of traffic (the 1 msg/s per topic stage)")
    parser.add_argument("--rate", type=float, default=1.0, help="msgs/s per topic in the traffic stage")
    parser.add_argument("--drain-seconds", type=float, default=30.0, help="wait for the last receipts and messages")
    parser.add_argument("--settle-seconds", type=float, default=8.0, help="quiet time before each RSS reading")
    parser.add_argument("--metadata-max-seconds", type=float, default=900.0, help="stop creating after this long")
    parser.add_argument("--profile", action="store_true", help="py-spy the broker (idle, traffic, creates)")
    parser.add_argument("--heap-profile", type=int, default=0, metavar="FRAMES",
                        help="run the broker under tracemalloc with FRAMES frames (RSS figures inflated)")
    parser.add_argument("--gc-stats", action="store_true",
                        help="after each RSS reading, a full collection in the broker and its live objects by type")
    parser.add_argument("--note", default="", help="a remark kept in the results")
    parser.add_argument("--out", default="bench/results/topics.json")
    parser.add_argument("--consumers", choices=("sdk", "raw"), default="sdk",
                        help="sdk: aio.Client consumers; raw: the bare Consume stream (see RawConsumer)")
    parser.add_argument("--worker", nargs=6, metavar=("URL", "NS", "FIRST", "COUNT", "CONC", "KIND"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        url, ns, first, count, conc, kind = args.worker
        asyncio.run(worker_main(url, ns, int(first), int(count), int(conc), kind))
        return 0
    if args.quick:
        args.topics, args.metadata_topics, args.traffic_seconds = min(args.topics, 200), min(args.metadata_topics, 2000), 20.0
        args.settle_seconds = min(args.settle_seconds, 4.0)
    if args.topics < 0 or args.metadata_topics < 0 or args.workers < 1 or args.concurrency < 1 or args.traffic_seconds < 5 \
            or args.rate <= 0:
        parser.error("--topics and --metadata-topics must be >= 0, --workers and --concurrency >= 1, --duration >= 5, "
                     "--rate > 0")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    nofile = raise_nofile()
    work = Path(tempfile.mkdtemp(prefix="magnetar-bench-topics-"))
    cluster = Cluster(work, args.heap_profile, args.gc_stats)
    try:
        cluster.start()
        print(f"zk, 3 bookies, 1 broker (E=3 Qw=2 Qa=2) up; RLIMIT_NOFILE {nofile[0]:,}; {os.cpu_count()} CPUs, "
              f"load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
        result = asyncio.run(run(args, cluster))
        result["heap_profile_frames"] = args.heap_profile
        result["broker_log"] = cluster.broker_log()
        result["load_average_end"] = os.getloadavg()[0]
        print_summary(result)
        print_log(result["broker_log"])
        result["verdict_met"] = verdict(result)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1, default=str))
        print(f"wrote {args.out}")
        # Not meeting the targets (or losing messages under overload) is the finding, not a
        # failure of the bench: it exits non-zero only when it could not run.
        return 0
    finally:
        if cluster.broker is not None and cluster.broker.process.pid and not cluster.broker.alive:
            print(f"the broker died (exit code {cluster.broker.process.returncode}); its log ends:\n"
                  f"{cluster.broker.log_tail(40)}")  # fmt: skip
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
