"""End to end through a real broker: producer -> broker -> 2 bookies -> consumer.

Starts a real ZooKeeper, two bookie processes and one broker (ensemble 2, write and
ack quorum 2: every entry replicated and fsync'd on both bookies), then, with the
clients below:

a. throughput: one producer (batching on; asyncio client, this process) and one
   consumer (asyncio client, a process of its own, as pulsar-perf runs them) at the
   same time, 100-byte messages; produce msgs/s (first send to last receipt) and
   consume msgs/s (first to last message received);
c. Shared subscription: 4 consumers (each its own process, asyncio client) drain a
   backlog of --messages batched messages; consume msgs/s from the first message any
   of them received to the last (target >= 100,000 msgs/s);
b. publish latency without batching at a paced 2,000 msgs/s with the asyncio client,
   after one second of warm-up at that rate: send -> receipt per message (p50/p99); the
   same with the blocking client (``magnetar.Client``) is printed for comparison.

Targets (issues 4 and 5): >= 100,000 msgs/s end to end; publish p99 <= 10 ms; Shared
consume with 4 consumers >= 100,000 msgs/s.
Writes bench/results/e2e.json.

    python bench/e2e.py [--messages 300000] [--seconds 20] [--latency-seconds 3] [--auth]

With ``--auth`` the cluster runs with token authentication on (docs/security.md): a fresh
HS256 secret key, bookies and broker with ``authentication_enabled`` and
``superuser_roles = ["magnetar-service"]``, the broker presenting a service token to the
bookies, and every client (producer, consumer processes) an
``AuthenticationToken`` of the ordinary role "bench-app".

Issue 16 (throughput with authentication on within 10% of off):

    python bench/e2e.py --compare-auth [--rounds 5] [--messages 300000] [--authorization]

runs (c) and (a) on a fresh cluster per run, alternating off, on, off, on, ... (the
machine is noisy), prints every run's figures, the medians off and on and their ratio
on/off, and writes bench/results/e2e-auth.json. With ``--authorization`` the "on"
clusters (and ``--auth``'s) also have broker authorization on, and a superuser grants
"bench-app" produce and consume on public/default (bench/results/e2e-authz.json).
Each "on" cluster is first checked to refuse a client without a token (and, with
authorization, the app role before its grant).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from magnetar.client import aio, sync
from magnetar.client.admin import AdminClient
from magnetar.client.auth import AuthenticationToken
from magnetar.client.options import ConsumerType, InitialPosition
from magnetar.common import tokens
from magnetar.common.errors import AuthenticationError, AuthorizationError, Timeout
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.testing.processes import BookieProcess, BrokerProcess

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procstats import cpu_seconds  # noqa: E402

SIZE = 100
RATE = 2000
TARGET_RATE = 100_000
TARGET_P99_MS = 10.0
SERVICE_ROLE = "magnetar-service"
APP_ROLE = "bench-app"
BENCH_NAMESPACE = "public/default"
"""Where the bench's topics live (they are given by their short names)."""
TOKEN_ENV = "MAGNETAR_BENCH_AUTH_TOKEN"
"""How this process hands the app token to the consumer processes it starts (never argv)."""
AUTH_RATIO_TARGET = 0.9


class BenchAuth:
    """Token authentication for one bench run: a fresh HS256 secret key in ``directory``,
    the service token (role ``magnetar-service``, a superuser) in a file for the broker,
    and the token of the ordinary role ``bench-app`` for the clients. With
    ``authorization`` the broker also checks permissions, and ``bench-app`` is granted
    produce and consume on the bench's namespace once the cluster is up."""

    def __init__(self, directory: Path, authorization: bool = False) -> None:
        self.authorization = authorization
        directory.mkdir(parents=True, exist_ok=True)
        key = tokens.generate_secret_key("HS256")
        self.key_file = directory / "secret.key"
        self.key_file.write_bytes(key)
        self.key_file.chmod(0o600)
        self.service_token = tokens.create_token(SERVICE_ROLE, key, "HS256")
        self.service_token_file = directory / "service.token"
        self.service_token_file.write_text(self.service_token)
        self.service_token_file.chmod(0o600)
        self.app_token = tokens.create_token(APP_ROLE, key, "HS256")

    def service_config(self) -> dict[str, object]:
        """The settings bookies and brokers share."""
        return {"authentication_enabled": True, "token_algorithm": "HS256",
                "token_secret_key_file": str(self.key_file), "superuser_roles": [SERVICE_ROLE]}  # fmt: skip

    def broker_config(self) -> dict[str, object]:
        """The service settings plus the token the broker presents to the bookies."""
        return {**self.service_config(), "broker_client_auth_token_file": str(self.service_token_file),
                **({"authorization_enabled": True} if self.authorization else {})}  # fmt: skip


def _auth(token: str | None) -> AuthenticationToken | None:
    return AuthenticationToken(token) if token else None


def check_refuses_anonymous(url: str) -> None:
    """Make sure authentication is really on: a client without a token is refused.

    Raises:
        RuntimeError: the broker let an anonymous client open a producer.
    """

    async def run() -> None:
        async with aio.Client(url, operation_timeout_seconds=10) as client:
            try:
                producer = await client.create_producer(f"bench-anonymous-{time.time_ns()}")
            except AuthenticationError:
                return
            await producer.close()
            raise RuntimeError("authentication is on, yet the broker let a client without a token in")

    asyncio.run(run())


def grant_app_role(url: str, auth: BenchAuth) -> None:
    """With authorization on: check that the app role is refused before it has a grant,
    then grant it produce and consume on the bench's namespace as a superuser.

    Raises:
        RuntimeError: the broker let the app role produce without a grant.
    """

    async def run() -> None:
        async with aio.Client(url, authentication=_auth(auth.app_token), operation_timeout_seconds=10) as client:
            try:
                producer = await client.create_producer(f"bench-ungranted-{time.time_ns()}")
            except AuthorizationError:
                pass
            else:
                await producer.close()
                raise RuntimeError("authorization is on, yet the broker let a role without a grant produce")
        async with AdminClient(url, 15, token=lambda: auth.service_token) as admin:
            await admin.grant_permission(BENCH_NAMESPACE, APP_ROLE, ["produce", "consume"])

    asyncio.run(run())


def _child_env(token: str | None) -> dict[str, str]:
    """The environment of a consumer process: the app token in TOKEN_ENV, or none."""
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    if token:
        env[TOKEN_ENV] = token
    return env


def consumer_process(url: str, topic: str, messages: int) -> None:
    """``e2e.py --consume URL TOPIC N``: receive and ack N messages, print timings as JSON."""

    async def run() -> dict[str, float]:
        async with aio.Client(url, authentication=_auth(os.environ.get(TOKEN_ENV))) as client:
            consumer = await client.subscribe(topic, "bench", initial_position=InitialPosition.Earliest, receiver_queue_size=5000)
            print("ready", flush=True)
            first = 0.0
            for n in range(messages):
                msg = await consumer.receive(timeout_millis=60_000)
                if n == 0:
                    first = time.time()
                await consumer.acknowledge(msg)
            return {"count": messages, "first": first, "last": time.time()}

    print(json.dumps(asyncio.run(run())), flush=True)


def shared_consumer_process(url: str, topic: str, idle_s: float) -> None:
    """``e2e.py --consume-shared URL TOPIC IDLE_S``: one Shared consumer; receive and ack
    until nothing comes for IDLE_S; print count and first/last receive times as JSON."""

    async def run() -> dict[str, float]:
        async with aio.Client(url, authentication=_auth(os.environ.get(TOKEN_ENV))) as client:
            consumer = await client.subscribe(topic, "bench-shared", consumer_type=ConsumerType.Shared,
                                              receiver_queue_size=5000)  # fmt: skip
            print("ready", flush=True)
            count, first, last = 0, 0.0, 0.0
            while True:
                try:
                    msg = await consumer.receive(timeout_millis=int(idle_s * 1000) if count else 120_000)
                except Timeout:
                    break
                last = time.time()
                if count == 0:
                    first = last
                count += 1
                await consumer.acknowledge(msg)
            await consumer.close()
            return {"count": count, "first": first, "last": last}

    print(json.dumps(asyncio.run(run())), flush=True)


def shared_throughput(url: str, messages: int, consumers: int = 4, token: str | None = None) -> dict[str, float]:
    """Fill a topic with a backlog (batched), then let ``consumers`` Shared consumers
    drain it, each in its own process (started after the fill); ``token``: the clients'."""
    topic = f"bench-shared-{time.time_ns()}"

    async def produce() -> float:
        async with aio.Client(url, authentication=_auth(token)) as client:
            # The subscription exists before the backlog is written, then its consumers go.
            first = await client.subscribe(topic, "bench-shared", consumer_type=ConsumerType.Shared)
            await first.close()
            producer = await client.create_producer(topic, block_if_queue_full=True, max_pending_messages=50_000)
            start = time.time()
            futures = [await producer.enqueue(b"x" * SIZE) for _ in range(messages)]
            await asyncio.gather(*futures)
            return messages / (time.time() - start)

    produce_rate = asyncio.run(produce())
    procs = [
        subprocess.Popen([sys.executable, __file__, "--consume-shared", url, topic, "3"], stdout=subprocess.PIPE, text=True,
                         env=_child_env(token))
        for _ in range(consumers)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("a consumer process did not subscribe")
        results = [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1]) for p in procs]
    finally:
        for p in procs:
            p.kill()
    got = [r for r in results if r["count"]]
    total = sum(r["count"] for r in results)
    span = max(r["last"] for r in got) - min(r["first"] for r in got)
    return {
        "sent": messages,
        "received": total,
        "per_consumer": [r["count"] for r in results],
        "produce_msgs_per_s": produce_rate,
        "consume_msgs_per_s": total / max(1e-9, span),
    }


def throughput(url: str, messages: int, seconds: float, token: str | None = None) -> dict[str, float]:
    """One producer (this process) and one consumer (its own process), concurrently;
    ``token``: the clients'."""
    topic = f"bench-e2e-{time.time_ns()}"
    consumer = subprocess.Popen(
        [sys.executable, __file__, "--consume", url, topic, str(messages)], stdout=subprocess.PIPE, text=True,
        env=_child_env(token),
    )
    try:
        assert consumer.stdout is not None
        if consumer.stdout.readline().strip() != "ready":
            raise RuntimeError("the consumer process did not subscribe")

        async def produce() -> dict[str, float]:
            payload = b"x" * SIZE
            async with aio.Client(url, authentication=_auth(token)) as client:
                producer = await client.create_producer(topic, block_if_queue_full=True, max_pending_messages=50_000)
                start = time.time()
                futures = [await producer.enqueue(payload) for _ in range(messages)]
                await asyncio.gather(*futures)
                return {"start": start, "last_receipt": time.time()}

        sent = asyncio.run(produce())
        out, _ = consumer.communicate(timeout=max(120.0, seconds * 4))
        got = json.loads(out.strip().splitlines()[-1])
    finally:
        consumer.kill()
    return {
        "sent": messages,
        "produce_msgs_per_s": messages / (sent["last_receipt"] - sent["start"]),
        "received": got["count"],
        "consume_msgs_per_s": got["count"] / max(1e-9, got["last"] - got["first"]),
        "end_to_end_s": got["last"] - sent["start"],
    }


def _percentiles(lat: list[float]) -> dict[str, float]:
    lat = sorted(lat)
    return {
        "count": len(lat),
        "p50_ms": statistics.median(lat) * 1000,
        "p99_ms": lat[int(len(lat) * 0.99) - 1] * 1000,
        "max_ms": lat[-1] * 1000,
    }


def latency(url: str, seconds: float, token: str | None = None) -> dict[str, float]:
    """Asyncio client (the SDK's own API): send -> receipt of each unbatched message at a
    paced RATE; one second at the same rate first (topic, ledgers, connections warm)."""

    async def run() -> list[float]:
        payload = b"x" * SIZE
        async with aio.Client(url, authentication=_auth(token)) as client:
            producer = await client.create_producer(
                f"bench-latency-{time.time_ns()}", batching_enabled=False, max_pending_messages=10_000
            )
            loop = asyncio.get_running_loop()
            measured: list[float] = []
            for phase_seconds, record in ((1.0, False), (seconds, True)):
                start, futures = loop.time(), []
                for i in range(int(RATE * phase_seconds)):
                    due = start + i / RATE
                    if due > loop.time():
                        await asyncio.sleep(due - loop.time())
                    t0 = time.perf_counter()
                    fut = producer.send_async(payload, None)
                    if record:
                        fut.add_done_callback(lambda _f, t0=t0: measured.append(time.perf_counter() - t0))
                    futures.append(fut)
                await asyncio.gather(*futures)
            return measured

    return _percentiles(asyncio.run(run()))


def latency_blocking(url: str, seconds: float, token: str | None = None) -> dict[str, float]:
    """The same with the blocking client (``magnetar.Client``), for comparison: its
    calls hop to the client's loop thread, which adds to each send."""
    payload = b"x" * SIZE
    lat: list[float] = []
    with sync.Client(url, authentication=_auth(token)) as client:
        producer = client.create_producer(f"bench-latency-b-{time.time_ns()}", batching_enabled=False, max_pending_messages=10_000)
        for _ in range(RATE):  # one second of warm-up
            producer.send_async(payload, None)
        producer.flush()
        start = time.perf_counter()
        for i in range(int(RATE * seconds)):
            due = start + i / RATE
            while (now := time.perf_counter()) < due:
                time.sleep(max(0.0, min(due - now, 0.0005)))
            t0 = time.perf_counter()
            producer.send_async(payload, lambda res, mid, t0=t0: lat.append(time.perf_counter() - t0))
        producer.flush()
        producer.close()
    return _percentiles(lat)


@contextmanager
def running_cluster(
    zk_connect: str, root: str, work: Path, auth: BenchAuth | None = None, journal_dir: str | None = None
) -> Iterator[tuple[BrokerProcess, list[BookieProcess]]]:
    """Two bookies and a broker (E=2 Qw=2 Qa=2) under ZooKeeper root ``root``, with token
    authentication on when ``auth`` is given; stopped (SIGTERM) on the way out."""
    procs: list[BookieProcess | BrokerProcess] = []
    bookies: list[BookieProcess] = []
    try:
        for i in range(2):
            config: dict[str, object] = {"min_free_disk_bytes": 0, "log_level": "WARNING"}
            if auth:
                config.update(auth.service_config())
            if journal_dir:
                config["journal_dir"] = str(Path(journal_dir) / f"{work.name}-journal-{i}")
            b = BookieProcess(zk_connect, root, work / f"bookie-{i}", config=config)
            procs.append(b.start(60))
            bookies.append(b)
        broker_config: dict[str, object] = {"ensemble_size": 2, "write_quorum": 2, "ack_quorum": 2, "log_level": "WARNING"}
        if auth:
            broker_config.update(auth.broker_config())
        broker = BrokerProcess(zk_connect, root, work / "broker", config=broker_config)
        procs.append(broker.start(60))
        if auth:
            check_refuses_anonymous(f"magnetar://{broker.address}")
            if auth.authorization:
                grant_app_role(f"magnetar://{broker.address}", auth)
        yield broker, bookies
    finally:
        for p in reversed(procs):
            p.stop()


CPU_PARTS = ("producer", "consumers", "broker", "bookies")
"""Whose CPU time --compare-auth counts: this process (the producer of (a) and the backlog
fill of (c)), the consumer processes (reaped children), the broker, the two bookies."""


def cpu_now(broker: BrokerProcess, bookies: list[BookieProcess]) -> dict[str, float]:
    """CPU seconds (user + system) used so far by each of CPU_PARTS."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "producer": me.ru_utime + me.ru_stime,
        "consumers": children.ru_utime + children.ru_stime,  # the services are reaped only at their stop
        "broker": cpu_seconds(broker.process.pid),
        "bookies": sum(cpu_seconds(b.process.pid) for b in bookies),
    }


def _auth_label(auth: BenchAuth | None) -> str:
    if not auth:
        return ""
    return "; token authentication" + (" and authorization" if auth.authorization else "") + " on"


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def compare_auth(args: argparse.Namespace, zk: ZooKeeperServer, work: Path) -> int:
    """(c) then (a) on a fresh cluster per run, authentication off, on, off, on, ...;
    the medians off and on and their ratio; bench/results/e2e-auth.json."""
    metrics = {  # the run's key -> its label
        "a_produce": "(a) produce msgs/s",
        "a_consume": "(a) consume msgs/s",
        "a_end_to_end": "(a) end to end msgs/s (min of the two)",
        "c_consume": "(c) Shared 4-consumer consume msgs/s",
        "c_fill": "(c) backlog fill (produce) msgs/s",
    }
    for part in ("a", "c"):
        for who in CPU_PARTS:
            metrics[f"{part}_cpu_us_per_msg_{who}"] = f"({part}) CPU µs per message, {who}"
    on_means = "authentication and authorization" if args.authorization else "authentication"
    print(f"--compare-auth ({on_means}): {args.rounds} rounds of (off, on), {args.messages:,} messages per part, a fresh cluster "
          f"(2 bookies E=2 Qw=2 Qa=2, 1 broker) per run; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
    runs: list[dict[str, object]] = []
    for rnd in range(args.rounds):
        for on in (False, True):
            name = f"run-{len(runs)}-{'on' if on else 'off'}"
            run_dir = work / name
            auth = BenchAuth(run_dir / "keys", args.authorization) if on else None
            token = auth.app_token if auth else None
            load_before = os.getloadavg()[0]
            t0 = time.time()
            with running_cluster(zk.connect_string, f"/{name}", run_dir, auth, args.journal_dir) as (broker, bookies):
                url = f"magnetar://{broker.address}"
                cpu0 = cpu_now(broker, bookies)
                sh = shared_throughput(url, args.messages, token=token)
                cpu1 = cpu_now(broker, bookies)
                tp = throughput(url, args.messages, args.seconds, token=token)
                cpu2 = cpu_now(broker, bookies)
            shutil.rmtree(run_dir, ignore_errors=True)
            ok = tp["received"] == tp["sent"] and sh["received"] >= sh["sent"]
            run: dict[str, object] = {
                "round": rnd, "authentication": on, "complete": ok,
                "a_produce": tp["produce_msgs_per_s"], "a_consume": tp["consume_msgs_per_s"],
                "a_end_to_end": min(tp["produce_msgs_per_s"], tp["consume_msgs_per_s"]),
                "c_consume": sh["consume_msgs_per_s"], "c_fill": sh["produce_msgs_per_s"],
                **{f"c_cpu_us_per_msg_{k}": (cpu1[k] - cpu0[k]) / sh["sent"] * 1e6 for k in CPU_PARTS},
                **{f"a_cpu_us_per_msg_{k}": (cpu2[k] - cpu1[k]) / tp["sent"] * 1e6 for k in CPU_PARTS},
                "load_average_before": load_before, "wall_s": time.time() - t0,
                "throughput": tp, "shared": sh,
            }  # fmt: skip
            runs.append(run)
            print(f"round {rnd} auth {'on ' if on else 'off'}: (a) produce {run['a_produce']:>9,.0f}  consume "
                  f"{run['a_consume']:>9,.0f}   (c) consume {run['c_consume']:>9,.0f}  fill {run['c_fill']:>8,.0f} msgs/s"
                  f"; load {load_before:.2f}{'' if ok else '  INCOMPLETE'}", flush=True)  # fmt: skip
            print("    CPU µs/msg (a) " + "  ".join(f"{k} {run[f'a_cpu_us_per_msg_{k}']:.1f}" for k in CPU_PARTS)
                  + "   (c) " + "  ".join(f"{k} {run[f'c_cpu_us_per_msg_{k}']:.1f}" for k in CPU_PARTS), flush=True)
    summary: dict[str, dict[str, float]] = {}
    print(f"\n{'median':<42} {'off':>10} {'on':>10} {'on/off':>7}")
    for key, label in metrics.items():
        m_off = _median([float(r[key]) for r in runs if not r["authentication"]])  # type: ignore[arg-type]
        m_on = _median([float(r[key]) for r in runs if r["authentication"]])  # type: ignore[arg-type]
        summary[key] = {"off": m_off, "on": m_on, "ratio_on_off": m_on / m_off if m_off else float("nan")}
        print(f"{label:<42} {m_off:>10,.1f} {m_on:>10,.1f} {summary[key]['ratio_on_off']:>7.3f}")
    headline = ("a_end_to_end", "c_consume")
    met = all(summary[k]["ratio_on_off"] >= AUTH_RATIO_TARGET for k in headline) and all(r["complete"] for r in runs)
    print(f"target (issue 16) throughput with authentication on within 10% of off ((a) end to end and (c) consume, "
          f"medians): {'MET' if met else 'NOT MET'} "
          f"({', '.join(k + ' ' + format(summary[k]['ratio_on_off'], '.3f') for k in headline)})")  # fmt: skip
    default_name = "e2e-authz.json" if args.authorization else "e2e-auth.json"
    out = Path(args.out if args.out != DEFAULT_OUT else Path(DEFAULT_OUT).with_name(default_name))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(
        {"what": "bench/e2e.py --compare-auth: (c) then (a) per run, a fresh cluster per run, auth off/on alternating",
         "authentication": f"HS256 token, client role {APP_ROLE!r}, broker -> bookies as {SERVICE_ROLE!r}",
         "authorization": args.authorization,
         "messages": args.messages, "message_size": SIZE, "rounds": args.rounds, "cpus": os.cpu_count(),
         "note": args.note, "runs": runs, "medians": summary, "target_ratio": AUTH_RATIO_TARGET,
         "target_met": met}, indent=2))  # fmt: skip
    print(f"wrote {out}")
    return 0


DEFAULT_OUT = "bench/results/e2e.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--latency-seconds", type=float, default=3.0)
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help="results file (--compare-auth: default bench/results/e2e-auth.json, e2e-authz.json "
                             "with --authorization)")
    parser.add_argument("--journal-dir", default=None,
                        help="put the bookies' journals under this directory (e.g. a tmpfs, to see what the disk costs)")
    parser.add_argument("--only-shared", action="store_true", help="run only (c), the Shared-subscription run")
    parser.add_argument("--auth", action="store_true", help="run the cluster with token authentication on")
    parser.add_argument("--authorization", action="store_true",
                        help="with authentication on (--auth, or the 'on' runs of --compare-auth), broker "
                             f"authorization too; {APP_ROLE!r} is granted produce and consume on {BENCH_NAMESPACE}")
    parser.add_argument("--compare-auth", action="store_true",
                        help="run (c) and (a) with authentication off and on, alternating; ratio of the medians")
    parser.add_argument("--note", default="", help="--compare-auth: a remark kept in the results (e.g. what else ran)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="--compare-auth: rounds of (off, on) (default 5, about 3.5 min on 2 cores: one run is too noisy)")
    parser.add_argument("--consume", nargs=3, metavar=("URL", "TOPIC", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--consume-shared", nargs=3, metavar=("URL", "TOPIC", "IDLE_S"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.consume:
        consumer_process(args.consume[0], args.consume[1], int(args.consume[2]))
        return 0
    if args.consume_shared:
        shared_consumer_process(args.consume_shared[0], args.consume_shared[1], float(args.consume_shared[2]))
        return 0
    # SIGTERM -> SystemExit, so the finally below stops every process started here.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix="magnetar-bench-e2e-"))
    zk = ZooKeeperServer(work / "zk", force_sync=False)
    try:
        zk.start()
        if args.compare_auth:
            return compare_auth(args, zk, work)
        auth = BenchAuth(work / "keys", args.authorization) if args.auth or args.authorization else None
        token = auth.app_token if auth else None
        with running_cluster(zk.connect_string, "/bench", work, auth, args.journal_dir) as (broker, _):
            url = f"magnetar://{broker.address}"
            print(f"zk, 2 bookies, 1 broker up (E=2 Qw=2 Qa=2){_auth_label(auth)}; {SIZE} B "
                  "messages; producer (asyncio client) and consumer in separate processes", flush=True)  # fmt: skip
            sh = shared_throughput(url, args.messages, token=token)
            shared_ok = sh["consume_msgs_per_s"] >= TARGET_RATE and sh["received"] >= sh["sent"]
            print(f"(c) Shared, 4 consumer processes draining {sh['sent']:,} batched messages: consume "
                  f"{sh['consume_msgs_per_s']:>10,.0f} msgs/s (per consumer {sh['per_consumer']}; backlog filled at "
                  f"{sh['produce_msgs_per_s']:,.0f} msgs/s)", flush=True)
            print(f"target Shared consume >= {TARGET_RATE:,} msgs/s: {'MET' if shared_ok else 'NOT MET'} "
                  f"({sh['consume_msgs_per_s']:,.0f})", flush=True)
            if args.only_shared:
                Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                Path(args.out).with_name("e2e_shared.json").write_text(
                    json.dumps({"authentication": bool(auth), "authorization": bool(auth and auth.authorization),
                                "shared": sh, "shared_target_met": shared_ok}, indent=2))  # fmt: skip
                return 0
            tp = throughput(url, args.messages, args.seconds, token=token)
            print(f"(a) produce {tp['produce_msgs_per_s']:>10,.0f} msgs/s   consume {tp['consume_msgs_per_s']:>10,.0f} msgs/s"
                  f"   ({tp['received']:,}/{tp['sent']:,} received, {tp['end_to_end_s']:.1f} s)", flush=True)
            lt = latency(url, args.latency_seconds, token=token)
            print(f"(b) publish latency at {RATE:,} msgs/s, no batching, asyncio client: p50 {lt['p50_ms']:.2f} ms  "
                  f"p99 {lt['p99_ms']:.2f} ms  max {lt['max_ms']:.2f} ms", flush=True)
            lb = latency_blocking(url, args.latency_seconds, token=token)
            print(f"    the same with the blocking client: p50 {lb['p50_ms']:.2f} ms  "
                  f"p99 {lb['p99_ms']:.2f} ms  max {lb['max_ms']:.2f} ms", flush=True)
        e2e = min(tp["produce_msgs_per_s"], tp["consume_msgs_per_s"])
        rate_ok = e2e >= TARGET_RATE and tp["received"] == tp["sent"]
        lat_ok = lt["p99_ms"] <= TARGET_P99_MS
        print(f"target >= {TARGET_RATE:,} msgs/s end to end: {'MET' if rate_ok else 'NOT MET'} ({e2e:,.0f})")
        print(f"target publish p99 <= {TARGET_P99_MS:g} ms: {'MET' if lat_ok else 'NOT MET'} ({lt['p99_ms']:.2f} ms)")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(
            {"api": "asyncio producer/consumer processes; asyncio client for latency", "message_size": SIZE,
             "authentication": bool(auth), "authorization": bool(auth and auth.authorization),
             "throughput": tp, "latency": lt, "latency_blocking_client": lb,
             "shared": sh, "shared_target_met": shared_ok,
             "end_to_end_msgs_per_s": e2e, "rate_target_met": rate_ok, "latency_target_met": lat_ok}, indent=2))  # fmt: skip
        return 0
    finally:
        zk.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
