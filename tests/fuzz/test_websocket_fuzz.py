"""The gateway's WebSocket endpoints under hostile input (issue 20): random query
parameters, random text and binary frames, torn and protocol-breaking raw frames,
dropped connections and bursts, against a real gateway, broker and bookie.

Oracles, per input: every producer frame gets its ack (``ok`` only for a frame that holds
a JSON object with a base64 ``payload``; ``send-error:3`` for one that holds no JSON
object); a consumer's or reader's frame is answered (the ``isEndOfTopic`` probe sent
after it is) or the socket is closed with Pulsar's code for it, never 1011 and never a
silent hang; an upgrade is accepted when every parameter is valid, refused with 400 and
a ``reason`` when one is invalid. After every batch the gateway still answers
``/admin/v2/clusters`` and its log holds no traceback. At the end the producer's topic
holds exactly the messages acked ``ok``: nothing it refused, nothing cut mid-frame.

``make test`` runs ``MAGNETAR_FUZZ_EXAMPLES`` inputs per endpoint (100) from a fixed
seed; a long run (``make fuzz``) draws a seed and prints it; ``MAGNETAR_FUZZ_SEED``
replays one.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest
import wsfuzz
from fuzzsettings import EXAMPLES, LONG, record_result
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from wsfuzz import Frame

import magnetar.asyncio as mg
from magnetar.common.message_id import MessageId
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.gateway.websocket import ids
from magnetar.testing.processes import BookieProcess, BrokerProcess, GatewayProcess, ServiceFactory
from magnetar.testing.pytest_plugin import track_process

sys.path.insert(0, str(Path(__file__).parents[1] / "integration" / "gateway"))
from gateway_support import GatewayCluster, unique  # noqa: E402

pytestmark = [pytest.mark.integration]

NS = "public/default"
SEED = int(os.environ.get("MAGNETAR_FUZZ_SEED") or (random.SystemRandom().getrandbits(32) if LONG else 20))
BATCH = 25
"""Inputs between two checks of the gateway's health and log."""
WAIT = 10.0
"""Longest wait for an answer: a gateway that takes longer hangs."""
RAW_WAIT = 0.3
"""How long raw bytes may go unanswered: the gateway may rightly wait for the rest of a frame."""
FATAL_CLOSES = {1011: "internal error", 4008: "the SDK handle failed"}
CONSUMER_PREFILL = 30

print(f"WebSocket fuzz: seed {SEED} (replay with MAGNETAR_FUZZ_SEED={SEED}), {EXAMPLES} inputs per endpoint")


@pytest.fixture(scope="module")
def cluster(zk_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayCluster]:
    """A bookie, a broker and the gateway of this module (lean: one bookie, ensemble 1)."""
    if not zk_server.alive:
        zk_server.start()
    base = Path(tmp_path_factory.mktemp("ws-fuzz"))
    root = f"/wsfz-{unique('r')}"
    connect_string = zk_server.connect_string
    bookies = ServiceFactory(BookieProcess, connect_string, root, base / "bookies")
    brokers = ServiceFactory(BrokerProcess, connect_string, root, base / "brokers")
    gateways = ServiceFactory(GatewayProcess, connect_string, root, base / "gateways")
    try:
        bookie = bookies()
        broker = brokers(ensemble_size=1, write_quorum=1, ack_quorum=1)
        gateway = gateways(broker_refresh_interval_s=0.5)
        yield GatewayCluster(connect_string, root, broker, gateway, [bookie])
    finally:
        for factory in (gateways, brokers, bookies):
            factory.kill_all()


@pytest.fixture(autouse=True)
def _logs(request: pytest.FixtureRequest, cluster: GatewayCluster) -> None:
    for process in (cluster.gateway, cluster.broker, *cluster.bookies):
        track_process(request.node, process)


def ws_url(cluster: GatewayCluster, kind: str, topic: str, sub: str | None = None,
           params: list[tuple[str, str]] | None = None) -> str:
    path = f"/ws/v2/{kind}/persistent/{NS}/{topic}" + (f"/{sub}" if sub else "")
    query = f"?{urlencode(params, quote_via=quote, errors='surrogatepass')}" if params else ""
    return cluster.url.replace("http://", "ws://") + path + query


async def open_ws(url: str) -> ClientConnection:
    # max_size=None: the test reads whatever the gateway sends; ping off: a fuzzed socket
    # may stay unread for a while.
    return await connect(url, open_timeout=WAIT, close_timeout=2, max_size=None, ping_interval=None)


async def send(ws: ClientConnection, data: str | bytes) -> None:
    """Send a text frame (str) or binary frame (bytes); text with lone surrogates goes
    out as a text frame of invalid UTF-8."""
    if isinstance(data, str):
        await ws.send(data.encode("utf-8", "surrogatepass"), text=True)
    else:
        await ws.send(data)


async def abort(ws: ClientConnection | None) -> None:
    if ws is not None:
        ws.transport.abort()
        await asyncio.sleep(0)


class Checker:
    """What every endpoint's run checks between batches: the gateway serves and its log
    (from the start of the run) has no traceback."""

    def __init__(self, cluster: GatewayCluster, rng_name: str) -> None:
        self.cluster = cluster
        self.where = f"seed {SEED} ({rng_name}; replay with MAGNETAR_FUZZ_SEED={SEED})"
        self.log_start = cluster.gateway.log_path.stat().st_size
        self.inputs = 0
        self.started = time.monotonic()
        self.http = httpx.AsyncClient(base_url=cluster.url, timeout=WAIT)

    async def healthy(self) -> None:
        assert self.cluster.gateway.alive, f"the gateway died; {self.where}"
        response = await self.http.get("/admin/v2/clusters")
        assert response.status_code == 200 and response.json() == ["standalone"], f"{response.status_code} {response.text[:200]}"
        self.log_is_clean()

    def log_is_clean(self) -> None:
        with self.cluster.gateway.log_path.open("rb") as f:
            f.seek(self.log_start)
            text = f.read().decode(errors="replace")
        for bad in ("Traceback", "Exception in ASGI application", "Task exception was never retrieved"):
            assert bad not in text, f"the gateway logged {bad!r} after input {self.inputs}; {self.where}:\n{text[-4000:]}"

    async def tick(self) -> None:
        self.inputs += 1
        if self.inputs % BATCH == 0:
            await self.healthy()
        if LONG and self.inputs % 1000 == 0:
            elapsed = time.monotonic() - self.started
            print(f"{self.where}: {self.inputs} inputs, {self.inputs / elapsed:.1f} inputs/s", flush=True)

    async def close(self, endpoint: str) -> None:
        await self.healthy()
        await self.http.aclose()
        elapsed = time.monotonic() - self.started
        print(f"{endpoint}: {self.inputs} inputs in {elapsed:.1f} s ({self.inputs / elapsed:.1f} inputs/s); {self.where}")
        if endpoint != "regression":
            record_result("websocket", endpoint, inputs=self.inputs, seconds=elapsed, seed=SEED)


def rng_for(endpoint: str) -> random.Random:
    return random.Random(f"{SEED}-{endpoint}")


# -- upgrades ------------------------------------------------------------------------
async def try_upgrade(check: Checker, url: str, query: wsfuzz.Query) -> ClientConnection | None:
    """Connect with a fuzzed query; the upgrade must be accepted when the query is valid
    and refused with 400 and a reason when it is invalid."""
    verdict = query.verdict
    try:
        ws = await open_ws(url)
    except InvalidStatus as exc:
        status = exc.response.status_code
        body = json.loads(exc.response.body or b"{}")
        reason = body.get("reason") if isinstance(body, dict) else None
        assert isinstance(reason, str) and reason, f"{status} without a reason for {query.params}; {check.where}"
        assert status < 500, f"{status} {reason!r} for {query.params}; {check.where}"
        assert verdict != wsfuzz.VALID, f"valid query {query.params} refused: {status} {reason!r}; {check.where}"
        assert status in (400, 409), f"{status} {reason!r} for {query.params}; {check.where}"
        if verdict == wsfuzz.INVALID:
            assert (status, reason[:21]) == (400, "Invalid query params:"), f"{query.params}: {status} {reason}"
        return None
    assert verdict != wsfuzz.INVALID, f"invalid query {query.params} was accepted; {check.where}"
    return ws


# -- producer ------------------------------------------------------------------------
class ProducerRun:
    """The producer endpoint's run: one main socket on one topic (reopened when an input
    closes it); every frame's ack is checked, and what was acked ``ok`` recorded."""

    def __init__(self, cluster: GatewayCluster, check: Checker, rng: random.Random) -> None:
        self.cluster = cluster
        self.check = check
        self.rng = rng
        self.topic = unique("fz-prod")
        self.ws: ClientConnection | None = None
        self.accepted: list[bytes] = []
        """Payloads acked ``ok`` on the main topic, in ack order."""
        self.unknown: set[bytes] = set()
        """Payloads sent on a socket dropped before their ack came: stored or not."""
        self.refused: set[bytes] = set()
        """Payloads the gateway refused or never got whole: never stored."""

    async def socket(self) -> ClientConnection:
        if self.ws is None or self.ws.close_code is not None:
            self.ws = await open_ws(ws_url(self.cluster, "producer", self.topic))
        return self.ws

    def _payload_of(self, frame: Frame) -> bytes | None:
        obj = frame.parsed()
        if not isinstance(obj, dict) or not isinstance(obj.get("payload"), str):
            return None
        try:
            text = obj["payload"]
            return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        except ValueError:
            return None

    def judge(self, frame: Frame, ack: Any) -> None:
        """One ack against its frame."""
        where = f"{frame.label} {str(frame.data)[:300]!r} -> {str(ack)[:300]}; {self.check.where}"
        assert isinstance(ack, dict) and isinstance(ack.get("result"), str), where
        result = ack["result"]
        obj = frame.parsed()
        payload = self._payload_of(frame)
        if result == "ok":
            assert payload is not None, f"accepted a frame without a base64 payload: {where}"
            ids.decode(ack["messageId"])
            self.accepted.append(payload)
        else:
            assert result in ("send-error:3", "send-error:7", "send-error:8"), where
            assert isinstance(ack.get("errorMsg"), str) and ack["errorMsg"], where
            if not isinstance(obj, dict):
                assert result == "send-error:3", where
            if payload is not None:
                self.refused.add(payload)
        context = obj.get("context") if isinstance(obj, dict) else None
        if result != "send-error:3" and isinstance(context, str):
            assert ack.get("context") == context, f"context not echoed: {where}"

    async def exchange(self, frames: list[Frame]) -> None:
        """Send ``frames`` back to back, then check their acks in order."""
        ws = await self.socket()
        sent = 0
        try:
            for frame in frames:
                await send(ws, frame.data)
                sent += 1
        except ConnectionClosed:
            pass  # closed by an earlier frame of the burst: judged below
        frames = frames[: sent + 1]
        for frame in frames:
            try:
                raw = await asyncio.wait_for(ws.recv(), WAIT)
            except TimeoutError:
                raise AssertionError(f"no ack within {WAIT} s for {frame.label} {str(frame.data)[:200]!r}; {self.check.where}") from None
            except ConnectionClosed:
                code = ws.close_code
                allowed = set()
                if any(f.label == "frame over the max frame size" for f in frames):
                    allowed.add(1009)
                if any(f.bad_utf8 for f in frames):
                    allowed.add(1007)  # invalid UTF-8 in a text frame: RFC 6455's close
                if allowed:
                    allowed.add(1006)  # the close frame lost to a reset while frames were still going out
                assert code in allowed, f"producer socket closed ({code} {ws.close_reason!r}) on {frame.label} {str(frame.data)[:200]!r}; {self.check.where}"
                # The frames of the burst that were not acked may or may not be stored.
                self.unknown.update(p for f in frames if (p := self._payload_of(f)) is not None)
                return
            self.judge(frame, json.loads(raw))

    async def raw(self) -> None:
        """Protocol-breaking bytes, or a good frame cut short, then the connection dropped."""
        ws = await self.socket()
        payload = wsfuzz.good_payload(self.rng)
        good = wsfuzz.raw_frame(wsfuzz.TEXT, wsfuzz.publish_frame(self.rng, payload).data.encode())  # type: ignore[union-attr]
        data, label = wsfuzz.raw_garbage(self.rng, good)
        if label == "frame cut mid-message":
            self.refused.add(payload)
        ws.transport.write(data)
        code = None
        try:
            await asyncio.wait_for(ws.recv(), RAW_WAIT)
        except ConnectionClosed:
            code = ws.close_code
        except TimeoutError:
            pass  # waiting for the rest of a frame, as it should
        else:
            if label != "text inside a fragmented message":
                raise AssertionError(f"an answer to {label} {data[:100]!r}; {self.check.where}")
        assert code not in FATAL_CLOSES, f"{label}: closed with {code}; {self.check.where}"
        await abort(ws)
        self.ws = None

    async def query(self) -> None:
        query = wsfuzz.producer_query(self.rng)
        topic = unique("fz-pq")
        ws = await try_upgrade(self.check, ws_url(self.cluster, "producer", topic, params=query.params), query)
        if ws is None:
            return
        try:
            payload = wsfuzz.good_payload(self.rng)
            await ws.send(wsfuzz.publish_frame(self.rng, payload, "q").data)
            ack = json.loads(await asyncio.wait_for(ws.recv(), WAIT))
            # A short sendTimeoutMillis may time the send out (send-error:8).
            assert ack.get("result") in ("ok", "send-error:8") and ack.get("context") == "q", f"{query.params}: {ack}"
        finally:
            await ws.close()

    async def step(self) -> None:
        rng = self.rng
        pick = rng.random()
        if pick < 0.12:
            await self.query()
        elif pick < 0.62:
            await self.exchange([wsfuzz.hostile_publish(rng)])
        elif pick < 0.72:
            frame = wsfuzz.publish_frame(rng, wsfuzz.good_payload(rng), f"g{self.check.inputs}")
            await self.exchange([frame])
        elif pick < 0.82:
            frames = [wsfuzz.hostile_publish(rng) if rng.random() < 0.5 else wsfuzz.publish_frame(rng, wsfuzz.good_payload(rng))
                      for _ in range(rng.randint(10, 150))]
            await self.exchange(frames)
        elif pick < 0.92:
            await self.raw()
        elif pick < 0.98:
            # Dropped with frames in flight: those may be stored or not.
            ws = await self.socket()
            for _ in range(rng.randint(1, 50)):
                payload = wsfuzz.good_payload(rng)
                self.unknown.add(payload)
                await ws.send(wsfuzz.publish_frame(rng, payload).data)
            await abort(ws)
            self.ws = None
        else:
            await self.exchange([wsfuzz.huge_publish(rng)])

    async def stored(self) -> list[bytes]:
        """The topic's messages, read from the broker from the earliest on."""
        got: list[bytes] = []
        async with mg.Client(self.cluster.service_url) as client:
            reader = await client.create_reader(f"persistent://{NS}/{self.topic}", MessageId.earliest)
            try:
                while True:
                    try:
                        msg = await reader.read_next(timeout_millis=1500)
                    except mg.Timeout:
                        return got
                    got.append(msg.data())
            finally:
                await reader.close()


async def test_producer_endpoint_under_hostile_input(cluster: GatewayCluster) -> None:
    check = Checker(cluster, "producer")
    run = ProducerRun(cluster, check, rng_for("producer"))
    try:
        for _ in range(EXAMPLES):
            await run.step()
            await check.tick()
    finally:
        await abort(run.ws)
    await check.close("producer")
    stored = await run.stored()
    # (A payload may be refused in one frame and accepted in another: "YQ" is b"a".)
    wrongly = set(stored) & (run.refused - set(run.accepted))
    assert not wrongly, f"refused payloads stored: {wrongly}; {check.where}"
    known = [p for p in stored if p not in run.unknown]
    assert known == [p for p in run.accepted if p not in run.unknown], f"stored != acked ok; {check.where}"
    assert run.accepted, "no frame was accepted: the fuzzer sends nothing good"


# -- consumer and reader -------------------------------------------------------------
PROBE = json.dumps({"type": "isEndOfTopic"})


class DeliveryRun:
    """A consumer's or reader's run: one main socket (reopened when closed) on a topic
    holding messages; each frame is followed by an ``isEndOfTopic`` probe, whose answer
    shows the frame was served."""

    def __init__(self, cluster: GatewayCluster, check: Checker, rng: random.Random, kind: str) -> None:
        self.cluster = cluster
        self.check = check
        self.rng = rng
        self.kind = kind
        self.topic = unique(f"fz-{kind}")
        self.ws: ClientConnection | None = None
        self.real_ids: list[str] = []
        self.sent: list[MessageId] = []

    async def prefill(self) -> None:
        async with mg.Client(self.cluster.service_url) as client:
            producer = await client.create_producer(f"persistent://{NS}/{self.topic}", batching_enabled=False)
            self.sent = [await producer.send(f"m{i}".encode()) for i in range(CONSUMER_PREFILL)]
            await producer.close()
        self.real_ids = [ids.encode(m) for m in self.sent[:5]]

    def url(self, params: list[tuple[str, str]] | None = None, sub: str = "fz") -> str:
        if self.kind == "consumer":
            base = [("subscriptionType", "Shared"), ("receiverQueueSize", "5")]
            return ws_url(self.cluster, "consumer", self.topic, sub, base if params is None else params)
        base = [("messageId", "earliest"), ("receiverQueueSize", "5")]
        return ws_url(self.cluster, "reader", self.topic, None, base if params is None else params)

    async def socket(self) -> ClientConnection:
        if self.ws is None or self.ws.close_code is not None:
            self.ws = await open_ws(self.url())
        return self.ws

    async def answered(self, ws: ClientConnection, probes: int, what: str) -> int | None:
        """Read until ``probes`` probe answers came (None) or the socket closed (its code);
        message frames on the way are checked and their ids kept."""
        while probes:
            try:
                raw = await asyncio.wait_for(ws.recv(), WAIT)
            except TimeoutError:
                raise AssertionError(f"{self.kind}: neither an answer nor a close within {WAIT} s after {what}; {self.check.where}") from None
            except ConnectionClosed:
                return ws.close_code
            frame = json.loads(raw)
            if frame == {"endOfTopic": False}:
                probes -= 1
                continue
            mid = ids.decode(frame["messageId"])
            assert mid in self.sent and base64.b64decode(frame["payload"]).startswith(b"m"), f"{frame}; {self.check.where}"
            if frame["messageId"] not in self.real_ids:
                self.real_ids.append(frame["messageId"])
        return None

    def judge_close(self, frame: Frame, code: int | None, reason: str | None) -> None:
        where = f"{self.kind}: {frame.label} {str(frame.data)[:300]!r} -> close {code} {reason!r}; {self.check.where}"
        if frame.bad_utf8:
            assert code == 1007, f"a text frame of invalid UTF-8 must close with 1007: {where}"
            return
        obj = frame.parsed()
        if not isinstance(obj, dict):
            assert code == 4003, f"a frame without a JSON object must close with 4003: {where}"
            return
        kind = obj.get("type")
        if obj == {"type": "isEndOfTopic"}:
            assert code is None, f"closed on a plain isEndOfTopic: {where}"
        if self.kind == "consumer" and kind in (None, "ack", "negativeAcknowledge") and obj.get("messageId") in self.real_ids \
                and set(obj) <= {"type", "messageId"}:
            assert code is None, f"closed on an ack of a delivered id: {where}"
        if code is None:
            return
        assert code not in FATAL_CLOSES, f"{FATAL_CLOSES[code]}: {where}"
        allowed = {4003} | ({1000} if kind == "unsubscribe" and self.kind == "consumer" else set())
        assert code in allowed, where
        if code == 4003:
            assert reason and reason.startswith("Failed to de-serialize from JSON"), where

    async def frame(self, frame: Frame) -> None:
        ws = await self.socket()
        try:
            await send(ws, frame.data)
            await ws.send(PROBE)
        except ConnectionClosed:
            pass
        obj = frame.parsed()
        # An isEndOfTopic frame is answered too, before the probe.
        replies = 2 if isinstance(obj, dict) and obj.get("type") == "isEndOfTopic" and not frame.bad_utf8 else 1
        code = await self.answered(ws, replies, f"{frame.label} {str(frame.data)[:200]!r}")
        self.judge_close(frame, code, ws.close_reason)

    async def burst(self) -> None:
        """Many frames fast: acks of delivered ids, permits and probes; every probe answered."""
        ws = await self.socket()
        rng = self.rng
        probes = 0
        for _ in range(rng.randint(10, 200)):
            pick = rng.random()
            if pick < 0.4:
                await ws.send(PROBE)
                probes += 1
            elif pick < 0.7 and self.real_ids:
                await ws.send(json.dumps({"messageId": rng.choice(self.real_ids)}))
            else:
                await ws.send(json.dumps({"type": "permit", "permitMessages": rng.randint(1, 10)}))
        code = await self.answered(ws, probes, "a burst of well-formed frames")
        assert code is None, f"{self.kind}: closed ({code} {ws.close_reason!r}) during a burst of well-formed frames; {self.check.where}"

    async def raw(self) -> None:
        ws = await self.socket()
        frame = wsfuzz.raw_frame(wsfuzz.TEXT, json.dumps({"messageId": self.real_ids[0]}).encode())
        data, label = wsfuzz.raw_garbage(self.rng, frame)
        ws.transport.write(data)
        try:
            while True:
                await asyncio.wait_for(ws.recv(), RAW_WAIT)  # messages may be on their way
        except ConnectionClosed:
            assert ws.close_code not in FATAL_CLOSES, f"{label}: closed with {ws.close_code}; {self.check.where}"
        except TimeoutError:
            pass
        await abort(ws)
        self.ws = None

    async def query(self) -> None:
        if self.kind == "consumer":
            query = wsfuzz.consumer_query(self.rng)
            url = self.url(query.params, sub=unique("q"))
        else:
            query = wsfuzz.reader_query(self.rng, self.real_ids)
            url = self.url(query.params)
        ws = await try_upgrade(self.check, url, query)
        if ws is None:
            return
        try:
            await ws.send(PROBE)
            code = await self.answered(ws, 1, f"an upgrade with {query.params}")
            assert code is None, f"closed ({code}) right after an accepted upgrade with {query.params}; {self.check.where}"
        finally:
            await ws.close()

    async def step(self) -> None:
        pick = self.rng.random()
        if pick < 0.15:
            await self.query()
        elif pick < 0.8:
            await self.frame(wsfuzz.hostile_command(self.rng, self.real_ids))
        elif pick < 0.88:
            await self.burst()
        elif pick < 0.96:
            await self.raw()
        else:
            # Dropped mid-session, messages out and unacked: they come back to the next socket.
            await abort(await self.socket())
            self.ws = None


@pytest.mark.parametrize("kind", ["consumer", "reader"])
async def test_delivery_endpoints_under_hostile_input(cluster: GatewayCluster, kind: str) -> None:
    check = Checker(cluster, kind)
    run = DeliveryRun(cluster, check, rng_for(kind), kind)
    await run.prefill()
    try:
        for _ in range(EXAMPLES):
            await run.step()
            await check.tick()
    finally:
        await abort(run.ws)
    await check.close(kind)



# -- regressions: inputs the fuzzer found --------------------------------------------
async def test_a_delay_too_long_for_a_timedelta_is_refused_and_the_socket_stays_open(cluster: GatewayCluster) -> None:
    """Found with seed 20: ``deliverAfterMs`` 2**63-1 raised OverflowError out of the
    producer session (timedelta), which reset the connection with every frame in flight
    and logged a traceback. Now: ``send-error:7`` with the context, nothing stored."""
    check = Checker(cluster, "regression")
    topic = unique("fz-reg")
    async with connect(ws_url(cluster, "producer", topic), open_timeout=WAIT) as ws:
        await ws.send('{"payload": "aGk=", "context": "far", "deliverAfterMs": 9223372036854775807}')
        await ws.send('{"payload": "aGk=", "context": "far2", "deliverAfterMs": "86400000000000000"}')
        await ws.send('{"payload": "b2s=", "context": "ok"}')
        far, far2, ok = [json.loads(await asyncio.wait_for(ws.recv(), WAIT)) for _ in range(3)]
    assert (far["result"], far["context"]) == ("send-error:7", "far")
    assert far["errorMsg"].startswith("deliverAfterMs 9223372036854775807 is too far ahead")
    assert (far2["result"], far2["context"]) == ("send-error:7", "far2")
    assert (ok["result"], ok["context"]) == ("ok", "ok")
    run = ProducerRun(cluster, check, rng_for("regression"))
    run.topic = topic
    assert await run.stored() == [b"ok"]
    await check.close("regression")


async def test_a_text_frame_of_invalid_utf8_closes_with_1007_and_logs_no_traceback(cluster: GatewayCluster) -> None:
    """Found with seed 20: uvicorn logged each such frame as an error with a traceback (any
    client could fill the log with them); now one warning line."""
    check = Checker(cluster, "regression")
    for kind, sub in (("producer", None), ("consumer", "utf8")):
        async with connect(ws_url(cluster, kind, unique("fz-utf8"), sub), open_timeout=WAIT) as ws:
            ws.transport.write(wsfuzz.raw_frame(wsfuzz.TEXT, b'{"payload": "\xff\xfe"}'))
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), WAIT)
            assert ws.close_code == 1007
    await check.close("regression")
    log = cluster.gateway.log_path.read_bytes()[check.log_start:].decode(errors="replace")
    assert "WARNING gateway uvicorn.error: Invalid UTF-8 in a text frame from a client: closed with 1007" in log
