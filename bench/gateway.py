"""The gateway's throughput: REST admin calls (topic stats) and WebSocket produce.

Starts a real ZooKeeper, two bookies, one broker (E=Qw=Qa=2) and the gateway, then:

a. REST: ``GET /admin/v2/persistent/public/default/<topic>/stats`` from ``--concurrency``
   kept-alive connections (a minimal HTTP/1.1 client, this process) for ``--seconds``;
   calls/s. Baseline, in the same run: the same stats over the broker's gRPC admin RPC
   (the admin client, same concurrency), so the ratio shows what HTTP + the gateway add.
b. WebSocket: one producer socket (``/ws/v2/producer/...?batchingEnabled=true``) with
   Pulsar's JSON frames (base64 100-byte payloads), ``--window`` frames in flight;
   msgs/s from the first frame to the last ack. Baseline: the SDK's batching producer
   (asyncio) sending the same messages with the same window.

Targets (issue 15): >= 2,000 stats/s; >= 20,000 WebSocket msgs/s with batching.
Writes bench/results/gateway.json.

    python bench/gateway.py [--seconds 10] [--concurrency 32] [--messages 100000] [--window 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import shutil
import signal
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

import websockets

from magnetar.client import aio
from magnetar.client.admin import AdminClient
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.testing.processes import BookieProcess, BrokerProcess, GatewayProcess, ServiceProcess

SIZE = 100
TARGET_STATS = 2000
TARGET_WS = 20_000


async def _for(seconds: float, concurrency: int, call: object) -> float:
    """Calls/s of ``call()`` run by ``concurrency`` workers for ``seconds``."""
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await call()  # type: ignore[operator]
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done / (time.perf_counter() - started)


class KeepAlive:
    """A minimal HTTP/1.1 client on one kept-alive connection (as wrk drives a server): the
    bench measures the gateway, not the client library (httpx costs more CPU per request
    than the gateway does, on the same two cores)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port

    async def __aenter__(self) -> KeepAlive:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.writer.close()

    async def get(self, path: str) -> bytes:
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        body = await self.reader.readexactly(length)
        if status != 200:
            raise RuntimeError(f"GET {path}: {status} {body[:200]!r}")
        return body


async def stats_rest(gateway: str, topic: str, seconds: float, concurrency: int) -> float:
    host, port = gateway.removeprefix("http://").rsplit(":", 1)
    path = f"/admin/v2/persistent/{topic.removeprefix('persistent://')}/stats"
    connections = [await KeepAlive(host, int(port)).__aenter__() for _ in range(concurrency)]
    free = list(connections)

    async def call() -> None:
        connection = free.pop()
        try:
            await connection.get(path)
        finally:
            free.append(connection)

    try:
        await _for(1.0, concurrency, call)  # warm-up
        return await _for(seconds, concurrency, call)
    finally:
        for connection in connections:
            await connection.__aexit__()


async def stats_grpc(url: str, topic: str, seconds: float, concurrency: int) -> float:
    async with AdminClient(url) as admin:
        async def call() -> None:
            await admin.topic_stats(topic)

        await _for(1.0, concurrency, call)
        return await _for(seconds, concurrency, call)


async def ws_produce(gateway: str, topic: str, messages: int, window: int) -> float:
    uri = f"{gateway.replace('http', 'ws', 1)}/ws/v2/producer/{topic.replace('://', '/')}?batchingEnabled=true&maxPendingMessages={window}"
    payload = base64.b64encode(b"x" * SIZE).decode()
    async with websockets.connect(uri, max_queue=None) as ws:
        in_flight: deque[int] = deque()
        acked = 0
        started = time.perf_counter()
        sent = 0
        while acked < messages:
            while sent < messages and len(in_flight) < window:
                await ws.send(json.dumps({"payload": payload, "context": str(sent)}))
                in_flight.append(sent)
                sent += 1
            ack = json.loads(await ws.recv())
            if ack.get("result") != "ok":
                raise RuntimeError(f"send failed: {ack}")
            in_flight.popleft()
            acked += 1
        return messages / (time.perf_counter() - started)


async def sdk_produce(url: str, topic: str, messages: int, window: int) -> float:
    async with aio.Client(url) as client:
        producer = await client.create_producer(topic, batching_enabled=True, max_pending_messages=window,
                                                block_if_queue_full=True)
        payload = b"x" * SIZE
        started = time.perf_counter()
        pending: deque[asyncio.Future[object]] = deque()
        for _ in range(messages):
            if len(pending) >= window:
                await pending.popleft()
            pending.append(producer.send_async(payload, None))
        await asyncio.gather(*pending)
        return messages / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=2000)
    parser.add_argument("--out", default="bench/results/gateway.json")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix="magnetar-bench-gateway-"))
    zk = ZooKeeperServer(work / "zk", force_sync=False)
    procs: list[ServiceProcess] = []
    try:
        zk.start()
        quiet = {"log_level": "WARNING"}
        for i in range(2):
            procs.append(BookieProcess(zk.connect_string, "/bench", work / f"bookie-{i}",
                                       config={"min_free_disk_bytes": 0, **quiet}).start(60))
        broker = BrokerProcess(zk.connect_string, "/bench", work / "broker",
                               config={"ensemble_size": 2, "write_quorum": 2, "ack_quorum": 2, **quiet})
        procs.append(broker.start(60))
        gateway = GatewayProcess(zk.connect_string, "/bench", work / "gateway", config=quiet)
        procs.append(gateway.start(60))
        url = f"magnetar://{broker.address}"
        print(f"zk, 2 bookies, 1 broker (E=Qw=Qa=2), the gateway at {gateway.url}", flush=True)

        async def run() -> dict[str, float]:
            topic = "persistent://public/default/bench-stats"
            async with aio.Client(url) as client:
                producer = await client.create_producer(topic)
                await producer.send(b"x")
                await client.subscribe(topic, "s")
            rest = await stats_rest(gateway.url, topic, args.seconds, args.concurrency)
            grpc_ = await stats_grpc(url, topic, args.seconds, args.concurrency)
            print(f"(a) topic stats: REST via the gateway {rest:,.0f} calls/s; gRPC to the broker {grpc_:,.0f} calls/s "
                  f"(ratio {rest / grpc_:.2f})", flush=True)
            ws = await ws_produce(gateway.url, "persistent://public/default/bench-ws", args.messages, args.window)
            sdk = await sdk_produce(url, "persistent://public/default/bench-sdk", args.messages, args.window)
            print(f"(b) produce {SIZE} B: WebSocket {ws:,.0f} msgs/s; SDK {sdk:,.0f} msgs/s (ratio {ws / sdk:.2f})",
                  flush=True)
            return {"stats_rest_per_s": rest, "stats_grpc_per_s": grpc_, "ws_produce_msgs_per_s": ws,
                    "sdk_produce_msgs_per_s": sdk}

        result = asyncio.run(run())
        stats_ok = result["stats_rest_per_s"] >= TARGET_STATS
        ws_ok = result["ws_produce_msgs_per_s"] >= TARGET_WS
        print(f"target >= {TARGET_STATS:,} stats/s: {'MET' if stats_ok else 'NOT MET'} ({result['stats_rest_per_s']:,.0f})")
        print(f"target >= {TARGET_WS:,} WebSocket msgs/s: {'MET' if ws_ok else 'NOT MET'} ({result['ws_produce_msgs_per_s']:,.0f})")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({**result, "message_size": SIZE, "concurrency": args.concurrency,
                                              "window": args.window, "stats_target_met": stats_ok,
                                              "ws_target_met": ws_ok}, indent=2))
        return 0
    finally:
        for p in reversed(procs):
            p.stop()
        zk.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
