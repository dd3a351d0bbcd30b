"""RabbitMQ quorum queues as ``bench/compare.py`` measures them: one rabbitmq-server node
(Debian's package) started as a plain process under the workdir, with its own node name,
ports and epmd (started here on a free port and stopped here too, so no ``epmd -daemon``
outlives the run or meets another one on 4369), plugins off; one durable quorum queue per
workload; aio-pika's asyncio client in the bench's process, publisher confirms on.

Durability: a quorum queue (Raft, here a single member) confirms a message once it is in
the node's Raft write-ahead log and that log is fsync'd; the WAL batches the writes that
arrive while an fsync runs, so concurrent publishes share fsyncs.

aio-pika rather than pika in a thread: it is asyncio like every other client here, and
``Exchange.publish`` on a confirming channel returns when the broker's confirm (``basic.ack``,
often ``multiple``) for that message arrives, so in-flight publishes are plain awaits.

* batched: AMQP 0-9-1 has no batch publish; RabbitMQ users get throughput by streaming
  publishes and handling confirms asynchronously, so batched is one publish per message
  with up to :data:`CONFIRM_WINDOW` unconfirmed;
* unbatched: the same with at most ``window`` unconfirmed;
* consume: ``basic.consume`` with prefetch :data:`PREFETCH`, messages taken in order from
  aio-pika's queue iterator; batched: one ``basic.ack`` with ``multiple`` every
  :data:`ACK_EVERY` messages (and at the end); unbatched ("one at a time"): one
  ``basic.ack`` per message (no reply is awaited for an ack in AMQP);
* latency: one publish per message awaiting its confirm, paced; a consumer (prefetch
  :data:`PREFETCH`, ``basic.ack`` each) on the queue meanwhile.

Publishers and consumers use separate connections, as RabbitMQ's documentation advises
(flow control throttles a publishing connection; and aiormq writes, and waits for the
drain of, one frame at a time per connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from pathlib import Path

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractQueue
from pamqp.common import FieldTable

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

CONFIRM_WINDOW = 10_000
PREFETCH = 1000
ACK_EVERY = 500
RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")
QUORUM: FieldTable = {"x-queue-type": "quorum"}


class RabbitQuorum:
    name = "RabbitMQ quorum"

    def __init__(self) -> None:
        self._epmd: ServerProcess | None = None
        self._server: ServerProcess | None = None
        self._port = 0
        self._version = "?"

    def describe(self) -> str:
        return (f"RabbitMQ {self._version} (Debian rabbitmq-server), 1 node, durable quorum "
                "queue (confirm after the Raft WAL's fsync), persistent messages, publisher "
                f"confirms; aio-pika {aio_pika.__version__} asyncio client")  # fmt: skip

    async def start(self, workdir: Path) -> None:
        # Blocking, in this thread: the servers' death signal is tied to the starting thread.
        self._start(workdir)
        connection = await self._connect()
        try:
            assert connection.transport is not None
            version = connection.transport.connection.server_properties.get("version", b"?")
            self._version = version.decode() if isinstance(version, bytes) else str(version)
        finally:
            await connection.close()

    def _start(self, workdir: Path) -> None:
        ensure_debian_packages(["rabbitmq-server"], "rabbitmq-server")
        server = RABBITMQ_BIN / "rabbitmq-server"  # the real script, not Debian's su wrapper
        epmd = shutil.which("epmd") or str(next(Path("/usr/lib/erlang").glob("erts-*/bin/epmd")))
        home = workdir / "rabbitmq"
        home.mkdir(parents=True, exist_ok=True)
        ports: set[int] = set()
        while len(ports) < 3:  # three different ones
            ports.add(free_port())
        self._port, dist_port, epmd_port = sorted(ports)
        (home / "enabled_plugins").write_text("[].\n")
        (home / "rabbitmq-env.conf").write_text("")
        (home / "rabbitmq.conf").write_text(
            f"listeners.tcp.1 = 127.0.0.1:{self._port}\nlog.console = true\nlog.file = false\n"
        )
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "HOME": str(home),  # the Erlang cookie is made here
            "RABBITMQ_NODENAME": f"bench-{os.getpid()}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1", "RABBITMQ_NODE_PORT": str(self._port),
            "RABBITMQ_DIST_PORT": str(dist_port),
            "ERL_EPMD_PORT": str(epmd_port), "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_CONF_ENV_FILE": str(home / "rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(home / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(home / "advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(home / "enabled_plugins"),
            "RABBITMQ_PLUGINS_EXPAND_DIR": str(home / "plugins-expand"),
            "RABBITMQ_MNESIA_BASE": str(home / "mnesia"), "RABBITMQ_LOG_BASE": str(home / "log"),
            "RABBITMQ_PID_FILE": str(home / "rabbitmq.pid"),
            # exec erl (no signal-forwarding shell in between): the PID is the VM's
            "RABBITMQ_ALLOW_INPUT": "1", "RABBITMQ_SERVER_START_ARGS": "-noinput",
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        }  # fmt: skip
        self._epmd = ServerProcess("epmd", [epmd, "-port", str(epmd_port)], workdir / "epmd.log",
                                   env={**env, "ERL_EPMD_ADDRESS": "127.0.0.1"}).start()  # fmt: skip
        self._epmd.wait_port(epmd_port, 10)
        self._server = ServerProcess("rabbitmq-server", [str(server)], workdir / "rabbitmq.log",
                                     env=env, cwd=home).start()  # fmt: skip
        self._server.wait_port(self._port, 180)

    async def stop(self) -> None:
        for proc in (self._server, self._epmd):
            if proc is not None:
                proc.stop(grace_s=30)
        self._server = self._epmd = None

    async def _connect(self) -> aio_pika.abc.AbstractConnection:
        last: Exception | None = None
        for _ in range(100):  # the listener opens a moment before the node takes logins
            try:
                return await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{self._port}/")
            except Exception as exc:
                last = exc
                await asyncio.sleep(0.2)
        raise RuntimeError(f"cannot connect to RabbitMQ on {self._port}: {last!r}")

    async def throughput(self, *, size: int, messages: int, batched: bool, window: int) -> Throughput:
        name = f"compare-{'b' if batched else 'u'}-{size}-{time.time_ns()}"
        payload = b"x" * size
        connection = await self._connect()
        try:
            publisher = await connection.channel(publisher_confirms=True)
            queue = await publisher.declare_queue(name, durable=True, arguments=QUORUM)
            exchange = publisher.default_exchange

            async def send() -> None:
                msg = aio_pika.Message(payload, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
                await exchange.publish(msg, routing_key=name)

            start = time.perf_counter()
            await in_flight(messages, CONFIRM_WINDOW if batched else window, send)
            produce_s = time.perf_counter() - start
            consuming = await self._connect()
            try:
                clock = await _consume(await consuming.channel(), name, messages, batched)
            finally:
                await consuming.close()
            await queue.delete(if_unused=False, if_empty=False)
        finally:
            await connection.close()
        return Throughput(messages, messages / produce_s, clock.rate(), clock.received)

    async def latency(self, *, size: int, rate: int, seconds: float, warmup_s: float) -> Latency:
        name = f"compare-latency-{rate}-{time.time_ns()}"
        warmup, total = int(rate * warmup_s), int(rate * (warmup_s + seconds))
        run = PacedRun(rate, total, warmup)
        e2e: list[float] = []
        connection, consuming = await self._connect(), await self._connect()
        try:
            publisher = await connection.channel(publisher_confirms=True)
            queue = await publisher.declare_queue(name, durable=True, arguments=QUORUM)
            consumer = await consuming.channel()
            await consumer.set_qos(prefetch_count=PREFETCH)
            reading = await consumer.get_queue(name)

            async def consume() -> None:
                seen = 0
                async with reading.iterator() as messages:
                    async for msg in messages:
                        if seen >= warmup:
                            e2e.append(age(msg.body))
                        seen += 1
                        await msg.ack()
                        if seen >= total:
                            return

            task = asyncio.ensure_future(consume())
            try:
                await run.run(lambda _i: publisher.default_exchange.publish(
                    aio_pika.Message(stamp(size), delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                    routing_key=name))  # fmt: skip
                await asyncio.wait_for(asyncio.shield(task), 60)
            finally:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            await queue.delete(if_unused=False, if_empty=False)
        finally:
            await consuming.close()
            await connection.close()
        return Latency(rate, total - warmup, Percentiles.of(run.publish), Percentiles.of(e2e), len(e2e))


async def _consume(channel: AbstractChannel, name: str, messages: int, batched: bool) -> ConsumeClock:
    await channel.set_qos(prefetch_count=PREFETCH)
    queue: AbstractQueue = await channel.get_queue(name)
    clock = ConsumeClock()
    async with queue.iterator() as incoming:
        async for msg in incoming:
            clock.got()
            if not batched:
                await msg.ack()
            elif clock.received % ACK_EVERY == 0 or clock.received == messages:
                await msg.ack(multiple=True)
            if clock.received >= messages:
                break
        clock.done()
    # The consumer is cancelled: anything unacknowledged goes back to the queue.
    for _ in range(50):
        await asyncio.sleep(0.1)
        left = (await channel.declare_queue(name, passive=True)).declaration_result.message_count
        if not left:
            return clock
    raise RuntimeError(f"consume: {left} messages left in the queue")
