"""NATS JetStream as ``bench/compare.py`` measures it: one nats-server (Debian's package)
with JetStream on, one file-storage stream per workload (1 replica); nats-py's asyncio
client in the bench's process.

Durability: nats-server 2.9 writes every message to the stream's block file (a ``write``
to the OS, no fsync: ``AsyncFlush`` off) before it sends the PubAck, and fsyncs the files
from a background timer every 2 minutes (``SyncInterval`` fixed at 2 min in 2.9's
``stream.go``). There is no ``sync_interval`` option in 2.9 (its config parser refuses it as
an unknown field; ``sync_interval: always`` came with 2.10), so an acknowledged message
can be lost to an OS crash or power cut, unlike the other systems measured here.

* batched: ``js.publish_async`` (futures, at most :data:`ASYNC_MAX_PENDING` unacknowledged:
  nats-py's and the Go client's default), then ``publish_async_completed``;
* unbatched: ``await js.publish`` (a request and its PubAck) with at most ``window``
  awaiting at once. On the wire both are the same, one PUB with a reply subject and one
  PubAck per message: JetStream has no batch publish in 2.9; the difference is in the client;
* consume: a durable pull consumer from the start of the stream, ``fetch``
  :data:`FETCH` at a time; batched: ``AckPolicy.ALL`` and one ack of each batch's last
  message; unbatched ("one at a time"): ``AckPolicy.EXPLICIT``, ``msg.ack()`` on every message
  (an ack is a fire-and-forget publish in NATS; no reply is awaited);
* latency: ``await js.publish`` per message, paced; a push consumer (callback,
  ``msg.ack()`` each) on the stream meanwhile.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import nats
from nats.aio.client import __version__ as nats_py_version
from nats.aio.msg import Msg
from nats.js import api

from systems.base import (
    ConsumeClock,
    Latency,
    PacedRun,
    Percentiles,
    ServerProcess,
    Throughput,
    age,
    ensure_debian_packages,
    free_port,
    in_flight,
    stamp,
)

ASYNC_MAX_PENDING = 4000
FETCH = 1000


class NatsJetStream:
    name = "NATS JetStream"

    def __init__(self) -> None:
        self._server: ServerProcess | None = None
        self._port = 0
        self._version = "?"

    def describe(self) -> str:
        return (f"nats-server {self._version} (Debian nats-server), JetStream, file storage, "
                "1 replica; no fsync before the PubAck (2.9 fsyncs every 2 min and has no "
                f"sync_interval option); nats-py {nats_py_version} asyncio client")  # fmt: skip

    async def start(self, workdir: Path) -> None:
        # Blocking, in this thread: the server's death signal is tied to the starting thread.
        self._start(workdir)
        nc = await self._connect()
        try:
            for _ in range(100):  # JetStream answers a little after the port opens
                try:
                    await nc.jetstream().account_info()
                    break
                except Exception:
                    await asyncio.sleep(0.1)
        finally:
            await nc.close()

    def _start(self, workdir: Path) -> None:
        binary = ensure_debian_packages(["nats-server"], "nats-server")
        self._version = _version(binary)
        self._port = free_port()
        store = workdir / "nats"
        store.mkdir(parents=True, exist_ok=True)
        conf = workdir / "nats-server.conf"
        conf.write_text(f'server_name: "bench"\nlisten: "127.0.0.1:{self._port}"\n'
                        f'jetstream {{\n  store_dir: "{store}"\n}}\n')  # fmt: skip
        self._server = ServerProcess("nats-server", [binary, "-c", str(conf)],
                                     workdir / "nats-server.log").start()  # fmt: skip
        self._server.wait_port(self._port, 30)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    async def _connect(self) -> nats.NATS:
        return await nats.connect(f"nats://127.0.0.1:{self._port}", allow_reconnect=False,
                                  pending_size=8 * 1024 * 1024)  # fmt: skip

    async def throughput(self, *, size: int, messages: int, batched: bool, window: int) -> Throughput:
        stream = f"compare-{'b' if batched else 'u'}-{size}-{time.time_ns()}"
        payload = b"x" * size
        nc = await self._connect()
        try:
            js = nc.jetstream(publish_async_max_pending=ASYNC_MAX_PENDING)
            await js.add_stream(name=stream, subjects=[stream], storage=api.StorageType.FILE)
            start = time.perf_counter()
            if batched:
                futures = [await js.publish_async(stream, payload) for _ in range(messages)]
                await js.publish_async_completed()
                failed = [f.exception() for f in futures if f.exception() is not None]
                if failed:
                    raise RuntimeError(f"{len(failed)} of {messages} publishes failed: {failed[0]!r}")
            else:
                await in_flight(messages, window, lambda: js.publish(stream, payload, timeout=60))
            produce_s = time.perf_counter() - start
            stored = (await js.stream_info(stream)).state.messages
            if stored != messages:
                raise RuntimeError(f"{messages} sent, yet the stream holds {stored}")
            clock = await _consume(nc, stream, messages, batched)
            await js.delete_stream(stream)
        finally:
            await nc.close()
        return Throughput(messages, messages / produce_s, clock.rate(), clock.received)

    async def latency(self, *, size: int, rate: int, seconds: float, warmup_s: float) -> Latency:
        stream = f"compare-latency-{rate}-{time.time_ns()}"
        warmup, total = int(rate * warmup_s), int(rate * (warmup_s + seconds))
        run = PacedRun(rate, total, warmup)
        e2e: list[float] = []
        seen = 0
        all_in = asyncio.Event()
        nc = await self._connect()
        try:
            js = nc.jetstream()
            await js.add_stream(name=stream, subjects=[stream], storage=api.StorageType.FILE)

            async def on_message(msg: Msg) -> None:
                nonlocal seen
                if seen >= warmup:
                    e2e.append(age(msg.data))
                seen += 1
                await msg.ack()
                if seen >= total:
                    all_in.set()

            sub = await js.subscribe(stream, durable="bench", cb=on_message, manual_ack=True,
                                     config=api.ConsumerConfig(max_ack_pending=total))  # fmt: skip
            await run.run(lambda _i: js.publish(stream, stamp(size), timeout=60))
            await asyncio.wait_for(all_in.wait(), 60)
            await sub.unsubscribe()
            await js.delete_stream(stream)
        finally:
            await nc.close()
        return Latency(rate, total - warmup, Percentiles.of(run.publish), Percentiles.of(e2e), len(e2e))


async def _consume(nc: nats.NATS, stream: str, messages: int, batched: bool) -> ConsumeClock:
    js = nc.jetstream()
    policy = api.AckPolicy.ALL if batched else api.AckPolicy.EXPLICIT
    sub = await js.pull_subscribe(stream, durable="bench", stream=stream,
                                  config=api.ConsumerConfig(ack_policy=policy, max_ack_pending=-1))  # fmt: skip
    clock = ConsumeClock()
    while clock.received < messages:
        batch = await sub.fetch(min(FETCH, messages - clock.received), timeout=60)
        clock.got(len(batch))
        if batched:
            await batch[-1].ack()
        else:
            for msg in batch:
                await msg.ack()
    await nc.flush()  # every ack written and the server's PONG back: all were read before it
    clock.done()
    for _ in range(100):  # the server applies acks asynchronously
        info = await js.consumer_info(stream, "bench")
        if info.num_ack_pending == 0:
            break
        await asyncio.sleep(0.05)
    else:
        raise RuntimeError(f"consume: {info.num_ack_pending} messages still unacknowledged")
    await sub.unsubscribe()
    return clock


def _version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    return out.strip().rsplit("v", 1)[-1] or "?"  # "nats-server: v2.9.10"
