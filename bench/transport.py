"""What one message costs on the wire: a gRPC stream message vs a framed TCP message.

Magnetar's services talk gRPC (grpc.aio); each message on a stream costs CPU in
grpcio's machinery no matter how small. This bench measures that cost alone, between
two processes on loopback, against the same exchange over plain asyncio TCP streams
with length-prefixed frames (what Pulsar's and BookKeeper's binary protocols do over
Netty), each on asyncio's default loop and on uvloop:

* ping-pong: the client writes 100 bytes and waits for the echo, one at a time
  (the paced, unbatched case: nothing to coalesce);
* streaming: the client keeps ``--window`` messages in flight.

Printed per case: round trips or messages per second and the CPU µs per message of
the client and of the server (both directions included). No protobuf is involved: the
gRPC method passes bytes through, so this is the transport alone.

    python bench/transport.py [--messages 20000] [--window 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import struct
import subprocess
import sys
import time
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procstats import cpu_seconds  # noqa: E402

METHOD = "/magnetar.bench.Echo/Stream"
PAYLOAD = b"x" * 100
_LEN = struct.Struct(">I")


# -- servers (a child process each) ----------------------------------------------------
async def grpc_server() -> None:
    async def echo(requests: object, _context: grpc.aio.ServicerContext) -> object:
        async for frame in requests:  # type: ignore[attr-defined]
            yield frame

    server = grpc.aio.server()
    handler = grpc.stream_stream_rpc_method_handler(echo)  # bytes in, bytes out
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("magnetar.bench.Echo", {"Stream": handler}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await server.wait_for_termination()


async def tcp_server() -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                header = await reader.readexactly(4)
                body = await reader.readexactly(_LEN.unpack(header)[0])
                writer.write(header + body)
        except asyncio.IncompleteReadError:
            writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


# -- clients (this process) -------------------------------------------------------------
async def grpc_client(port: int, messages: int, window: int) -> tuple[float, float]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.stream_stream(METHOD)()
        for _ in range(100):  # warm
            await call.write(PAYLOAD)
            await call.read()
        t0 = time.perf_counter()
        for _ in range(messages):
            await call.write(PAYLOAD)
            await call.read()
        ping = (time.perf_counter() - t0) / messages
        sem = asyncio.Semaphore(window)

        async def drain() -> None:
            for _ in range(messages):
                await call.read()
                sem.release()

        t0 = time.perf_counter()
        reader = asyncio.ensure_future(drain())
        for _ in range(messages):
            await sem.acquire()
            await call.write(PAYLOAD)
        await reader
        stream = (time.perf_counter() - t0) / messages
        await call.done_writing()
        return ping, stream


async def tcp_client(port: int, messages: int, window: int) -> tuple[float, float]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    frame = _LEN.pack(len(PAYLOAD)) + PAYLOAD

    async def read_one() -> bytes:
        header = await reader.readexactly(4)
        return await reader.readexactly(_LEN.unpack(header)[0])

    for _ in range(100):
        writer.write(frame)
        await read_one()
    t0 = time.perf_counter()
    for _ in range(messages):
        writer.write(frame)
        await read_one()
    ping = (time.perf_counter() - t0) / messages
    sem = asyncio.Semaphore(window)

    async def drain() -> None:
        for _ in range(messages):
            await read_one()
            sem.release()

    t0 = time.perf_counter()
    task = asyncio.ensure_future(drain())
    for _ in range(messages):
        await sem.acquire()
        writer.write(frame)
        if writer.transport.get_write_buffer_size() > 1 << 20:
            await writer.drain()
    await task
    stream = (time.perf_counter() - t0) / messages
    writer.close()
    return ping, stream


def run(coro_factory: object, use_uvloop: bool) -> object:
    if use_uvloop:
        import uvloop

        return uvloop.run(coro_factory())  # type: ignore[operator]
    return asyncio.run(coro_factory())  # type: ignore[operator]


def measure(kind: str, use_uvloop: bool, messages: int, window: int) -> dict[str, float]:
    loop_arg = "uvloop" if use_uvloop else "asyncio"
    server = subprocess.Popen([sys.executable, __file__, "--serve", kind, loop_arg], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        me0 = resource.getrusage(resource.RUSAGE_SELF)
        s0 = cpu_seconds(server.pid)
        client = grpc_client if kind == "grpc" else tcp_client
        ping, stream = run(lambda: client(port, messages, window), use_uvloop)  # type: ignore[misc]
        me1 = resource.getrusage(resource.RUSAGE_SELF)
        s1 = cpu_seconds(server.pid)
    finally:
        server.kill()
        server.wait()
    n = 2 * messages + 100  # ping-pong and streaming, plus the warm-up
    return {
        "ping_pong_us": ping * 1e6,
        "streaming_msgs_s": 1 / stream,
        "client_cpu_us_per_msg": ((me1.ru_utime + me1.ru_stime) - (me0.ru_utime + me0.ru_stime)) / n * 1e6,
        "server_cpu_us_per_msg": (s1 - s0) / n * 1e6,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "transport.json"))
    parser.add_argument("--serve", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        kind, loop_arg = args.serve
        run(grpc_server if kind == "grpc" else tcp_server, loop_arg == "uvloop")
        return 0
    results = {}
    print(f"{'transport':<10} {'loop':<8} {'ping-pong µs':>13} {'streaming msgs/s':>17} {'client CPU µs/msg':>18} "
          f"{'server CPU µs/msg':>18}   (load {os.getloadavg()[0]:.2f})")  # fmt: skip
    for kind in ("grpc", "tcp"):
        for use_uvloop in (False, True):
            r = measure(kind, use_uvloop, args.messages, args.window)
            name = f"{kind}/{'uvloop' if use_uvloop else 'asyncio'}"
            results[name] = r
            print(f"{kind:<10} {'uvloop' if use_uvloop else 'asyncio':<8} {r['ping_pong_us']:>13.0f} {r['streaming_msgs_s']:>17,.0f} "
                  f"{r['client_cpu_us_per_msg']:>18.1f} {r['server_cpu_us_per_msg']:>18.1f}", flush=True)  # fmt: skip
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"messages": args.messages, "window": args.window, "payload_bytes": len(PAYLOAD),
                                          "grpcio": grpc.__version__, "results": results}, indent=2))  # fmt: skip
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
