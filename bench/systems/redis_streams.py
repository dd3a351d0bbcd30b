"""Redis Streams as ``bench/compare.py`` measures it: one redis-server (Debian's package),
the append-only file fsync'd before every reply (``appendfsync always``: Redis writes and
fsyncs the AOF once per event-loop turn, before it answers the clients served in that
turn), no RDB snapshots; redis-py's asyncio client (``redis.asyncio``) in the bench's
process.

* batched: ``XADD`` pipelined, :data:`PIPELINE` commands per round trip
  (``transaction=False``), one pipeline at a time;
* unbatched: one ``XADD`` per request, at most ``window`` awaiting at once (``window``
  connections: redis-py sends one command at a time per connection);
* consume: a consumer group made at id 0 before the produce phase; ``XREADGROUP COUNT``
  :data:`READ_COUNT`, then batched: one ``XACK`` of the whole batch; unbatched ("one at a
  time"): one ``XACK`` per message, each awaited before the next, as an application that
  handles and acknowledges messages one by one does;
* latency: one ``XADD`` per message, paced; a consumer in ``XREADGROUP BLOCK`` on the same
  stream meanwhile (``XACK`` per batch read), end to end by the send time in the payload.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from pathlib import Path
from typing import Any

import redis
import redis.asyncio as aioredis
from redis.utils import HIREDIS_AVAILABLE

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

PIPELINE = 1000
READ_COUNT = 1000
LATENCY_IN_FLIGHT = 1000
GROUP = "bench"


class RedisStreams:
    name = "Redis Streams"

    def __init__(self) -> None:
        self._server: ServerProcess | None = None
        self._port = 0
        self._version = "?"

    def describe(self) -> str:
        return (f"Redis {self._version} (Debian redis-server), 1 node, appendonly yes, "
                f"appendfsync always (AOF fsync'd before replies), no RDB; "
                f"redis-py {redis.__version__} asyncio client"
                f"{' with hiredis' if HIREDIS_AVAILABLE else ''}")  # fmt: skip

    async def start(self, workdir: Path) -> None:
        # Blocking, in this thread: the server's death signal is tied to the starting thread.
        self._start(workdir)
        async with self._client() as client:
            await client.ping()

    def _start(self, workdir: Path) -> None:
        binary = ensure_debian_packages(["redis-server"], "redis-server")
        self._version = _version(binary)
        self._port = free_port()
        data = workdir / "redis"
        data.mkdir(parents=True, exist_ok=True)
        self._server = ServerProcess("redis-server", [
            binary, "--bind", "127.0.0.1", "--port", str(self._port), "--protected-mode", "no",
            "--dir", str(data), "--appendonly", "yes", "--appendfsync", "always",
            "--save", "", "--daemonize", "no", "--maxclients", "4096",
        ], workdir / "redis-server.log").start()  # fmt: skip
        self._server.wait_port(self._port, 30)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def _client(self, max_connections: int = 4) -> aioredis.Redis:
        pool = aioredis.BlockingConnectionPool(host="127.0.0.1", port=self._port,
                                               max_connections=max_connections, timeout=60)  # fmt: skip
        return aioredis.Redis.from_pool(pool)  # the client owns the pool and closes it

    async def throughput(self, *, size: int, messages: int, batched: bool, window: int) -> Throughput:
        stream = f"compare-{'b' if batched else 'u'}-{size}-{time.time_ns()}"
        payload = b"x" * size
        async with self._client(max_connections=1 if batched else window) as client:
            await client.xgroup_create(stream, GROUP, id="0", mkstream=True)
            if not batched:  # open the connections before the clock starts
                await in_flight(window, window, client.ping)
            start = time.perf_counter()
            if batched:
                for first in range(0, messages, PIPELINE):
                    pipe = client.pipeline(transaction=False)
                    for _ in range(min(PIPELINE, messages - first)):
                        pipe.xadd(stream, {"d": payload})
                    await pipe.execute()
            else:
                await in_flight(messages, window, lambda: client.xadd(stream, {"d": payload}))
            produce_s = time.perf_counter() - start
            stored = await client.xlen(stream)
            if stored != messages:
                raise RuntimeError(f"{messages} sent, yet the stream holds {stored}")
            clock = await _consume(client, stream, messages, batched)
            await client.delete(stream)
        return Throughput(messages, messages / produce_s, clock.rate(), clock.received)

    async def latency(self, *, size: int, rate: int, seconds: float, warmup_s: float) -> Latency:
        stream = f"compare-latency-{rate}-{time.time_ns()}"
        warmup, total = int(rate * warmup_s), int(rate * (warmup_s + seconds))
        run = PacedRun(rate, total, warmup)
        e2e: list[float] = []
        # Connections for up to LATENCY_IN_FLIGHT sends at once, opened before the clock
        # starts (opening one takes round trips through the same event loop as the XADDs).
        async with self._client(LATENCY_IN_FLIGHT) as client, self._client(1) as reader:
            await client.xgroup_create(stream, GROUP, id="0", mkstream=True)
            await in_flight(LATENCY_IN_FLIGHT, LATENCY_IN_FLIGHT, client.ping)

            async def consume() -> None:
                seen = 0
                while seen < total:
                    entries = await _read(reader, stream, block_ms=1000)
                    for _id, payload in entries:
                        if seen >= warmup:
                            e2e.append(age(payload))
                        seen += 1
                    if entries:
                        await reader.xack(stream, GROUP, *(entry_id for entry_id, _ in entries))

            task = asyncio.ensure_future(consume())
            try:
                await run.run(lambda _i: client.xadd(stream, {"d": stamp(size)}))
                await asyncio.wait_for(asyncio.shield(task), 60)
            finally:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            await client.delete(stream)
        return Latency(rate, total - warmup, Percentiles.of(run.publish), Percentiles.of(e2e), len(e2e))


async def _consume(client: aioredis.Redis, stream: str, messages: int, batched: bool) -> ConsumeClock:
    clock = ConsumeClock()
    while clock.received < messages:
        entries = await _read(client, stream, block_ms=60_000)
        if not entries:
            raise RuntimeError(f"consume: nothing for 60 s after {clock.received} of {messages}")
        clock.got(len(entries))
        ids = [entry_id for entry_id, _ in entries]
        if batched:
            await client.xack(stream, GROUP, *ids)
        else:
            for entry_id in ids:
                await client.xack(stream, GROUP, entry_id)
    clock.done()
    pending = (await client.xpending(stream, GROUP))["pending"]
    if pending:
        raise RuntimeError(f"consume: {pending} messages still unacknowledged")
    return clock


async def _read(client: aioredis.Redis, stream: str, block_ms: int) -> list[tuple[bytes, bytes]]:
    """``XREADGROUP ... COUNT READ_COUNT BLOCK block_ms STREAMS stream >``: (id, payload) pairs."""
    reply: Any = await client.xreadgroup(GROUP, "c", {stream: ">"}, count=READ_COUNT, block=block_ms)
    if not reply:
        return []
    # RESP2: [[stream, entries]]; RESP3: {stream: [entries]}
    entries = next(iter(reply.values()))[0] if isinstance(reply, dict) else reply[0][1]
    return [(entry_id, fields[b"d"]) for entry_id, fields in entries]


def _version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    # "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=..."
    return next((w[2:] for w in out.split() if w.startswith("v=")), "?")
