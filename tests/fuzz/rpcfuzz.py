"""Hostile gRPC requests built from the protobuf descriptors (issue 20), and the runner
that sends them many at a time and records how each call ended.

:class:`RequestGenerator` makes, for any request message type, random values for every
field (nested messages, repeated fields, oneofs, maps, proto3 optionals): extreme and
negative integers, unknown enum numbers, empty, huge and odd strings, random bytes up to
a bound and now and then near or over the servers' message size limit. Names (topics,
namespaces, tenants, subscriptions, ledger ids) are drawn from small pools half the time,
so requests reach state that exists instead of stopping at the first lookup. A share of
the requests are raw bytes instead: a serialized message mutated, truncated or followed
by garbage, sent with identity serializers. All of it from one ``random.Random(seed)``.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message

from magnetar.common.grpcutil import MAX_MESSAGE_BYTES
from magnetar.proto.v1 import auditor_pb2, bookie_pb2, broker_pb2

SERVICES = {"Broker": broker_pb2, "Bookie": bookie_pb2, "Auditor": auditor_pb2}

# What a servicer says when an exception escaped it: grpc's own wrapper answers
# UNKNOWN "Unexpected <class ...>", rpc_errors answers INTERNAL "internal error in ...".
CRASH_MARKERS = ("Unexpected <class", "internal error in ", "Traceback")

_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
_ODD_TEXT = [
    "", " ", ".", "..", "/", "//", "a/", "/a", "a/b/c/d", "persistent://", "://", "\x00", "a\x00b",
    "é", "名前", "🚀", "\u200b", "\uffff", "\t\n", "-partition-", "t-partition-01", "t-partition-2147483648",
    "0x", "0x00000000_0x", "0xffffffff_0x00000000", "{topic}", "{subscription}", "%s%n", "../..",
    "non-persistent://public/default/x", "persistent://public/default/", "persistent:///default/t",
]
_CHARSETS = [
    "abcdefghijklmnopqrstuvwxyz0123456789-_=:.",
    "abc/:.%{}\x00\x01\x7f \t",
    "".join(chr(c) for c in range(0x20, 0x7F)),
    "ßéü漢字🚀\u0301\u200b\ufeff\U0010fffd",
]


def methods() -> list[MethodDescriptor]:
    """Every RPC of the broker, bookie and auditor (53)."""
    out = []
    for name, module in SERVICES.items():
        out.extend(module.DESCRIPTOR.services_by_name[name].methods)
    return out


def path(method: MethodDescriptor) -> str:
    return f"/{method.containing_service.full_name}/{method.name}"


def message_class(descriptor: Descriptor) -> type[Message]:
    return message_factory.GetMessageClass(descriptor)


@dataclass
class Pools:
    """Names that exist (or nearly) in the cluster under test, so that requests get past
    the first lookup. ``n`` distinct values per pool keep create/delete pairs colliding."""

    n: int = 6
    ledgers: list[int] = field(default_factory=lambda: [1, 2, 3])

    def topic(self, rng: random.Random) -> str:
        i = rng.randrange(self.n)
        return rng.choice([
            f"persistent://public/default/fuzz-{i}", f"public/default/fuzz-{i}", f"fuzz-{i}",
            f"persistent://public/default/fuzz-p-partition-{i % 3}", "persistent://public/default/fuzz-p",
            f"persistent://fuzz-{i}/ns-{i}/t", f"persistent://public/fuzz-ns-{i}/t-{i}",
        ])

    def namespace(self, rng: random.Random) -> str:
        i = rng.randrange(self.n)
        return rng.choice(["public/default", f"public/fuzz-ns-{i}", f"fuzz-{i}/ns-{i}", "public/default/x", "public"])

    def tenant(self, rng: random.Random) -> str:
        return rng.choice(["public", f"fuzz-{rng.randrange(self.n)}", "standalone"])

    def name(self, rng: random.Random, prefix: str) -> str:
        return f"{prefix}-{rng.randrange(self.n)}"


REQUEST_BUDGET = 8 << 20
"""Most bytes of big values in one generated message (strings and blobs). Requests near
and over the size limit come from :meth:`RequestGenerator.oversized` instead."""


class RequestGenerator:
    """Seeded hostile requests for any method.

    Args:
        rng: the only source of randomness.
        pools: plausible names.
        max_bytes: the servers' message size limit; oversized requests go around it.
        oversize_rate: share of requests near or over ``max_bytes``.
        raw_rate: share of requests sent as mutated raw bytes.
    """

    def __init__(
        self, rng: random.Random, pools: Pools | None = None, *, max_bytes: int = MAX_MESSAGE_BYTES,
        oversize_rate: float = 1 / 20000, raw_rate: float = 0.25,
    ) -> None:
        self.rng = rng
        self.pools = pools or Pools()
        self.max_bytes = max_bytes
        self.oversize_rate = oversize_rate
        self.raw_rate = raw_rate
        self._filler = rng.randbytes(4096)
        self._repeated = b""
        """``_filler`` repeated, as long as the longest ``big`` value yet (kept: an
        oversized request is one copy of it, not three)."""
        self._budget = REQUEST_BUDGET

    # --- scalar values ------------------------------------------------------------
    def integer(self, f: FieldDescriptor) -> int:
        lo, hi = _INT_RANGES[f.type]
        rng = self.rng
        r = rng.random()
        if f.name.endswith(("ledger_id", "entry_id", "_entry", "ledger_ids", "entry_ids")) and r < 0.5:
            return rng.choice([*self.pools.ledgers, 0, 1, 2, 3, -1, rng.randrange(0, 50)])
        if r < 0.35:
            special = rng.choice([lo, hi, 0, 1, -1, lo + 1, hi - 1, 2**31 - 1, 2**31, -(2**31), 2**32, 2**53, 2**63, 1000, 65536])
            return max(lo, min(hi, special))
        if r < 0.7:
            return max(lo, min(hi, rng.randint(-5, 100)))
        return rng.randint(lo, hi)

    def enum(self, f: FieldDescriptor) -> int:
        values = [v.number for v in f.enum_type.values]
        if self.rng.random() < 0.75:
            return self.rng.choice(values)
        return self.rng.choice([max(values) + 1, -1, 99, 2**31 - 1, -(2**31), self.rng.randint(-1000, 1000)])

    def text(self, f: FieldDescriptor | None = None) -> str:
        rng = self.rng
        name = f.name if f is not None else ""
        if rng.random() < 0.5 and name:
            pools = self.pools
            if "topic" in name:
                return pools.topic(rng)
            if name == "namespace":
                return pools.namespace(rng)
            if name == "tenant":
                return pools.tenant(rng)
            if name in ("subscription", "initial_subscription_name", "subscriptions"):
                return pools.name(rng, "sub")
            if name in ("role", "roles", "admin_roles"):
                return pools.name(rng, "role")
            if name == "actions":
                return rng.choice(["produce", "consume", "functions", "sources", "sinks", "packages"])
            if name == "allowed_clusters":
                return "standalone"
            if name == "bundle":
                return rng.choice(["0x00000000_0x40000000", "0x40000000_0x80000000", "0x00000000_0xffffffff"])
        r = rng.random()
        if r < 0.3:
            return rng.choice(_ODD_TEXT)
        if r < 0.97:
            size = rng.choice([1, 2, 5, 10, 30, 255, 256, 513])
        else:
            size = rng.choice([4096, 70_000, 1 << 20])
        chars = rng.choice(_CHARSETS)
        if size > 600:
            size = self._spend(size)
            return rng.choice(chars) * max(size, 1)
        return "".join(rng.choices(chars, k=rng.randint(1, size)))

    def blob(self, f: FieldDescriptor | None = None) -> bytes:
        rng = self.rng
        if f is not None and f.name == "entry" and rng.random() < 0.6:
            return self.message(broker_pb2.EntryBatch.DESCRIPTOR, depth=1).SerializeToString()
        r = rng.random()
        if r < 0.1:
            return b""
        if r < 0.98:
            return rng.randbytes(self._spend(rng.choice([1, 8, 64, 300, 2000])))
        return self.big(self._spend(rng.choice([70_000, 1 << 20, 5 << 20])))

    def _spend(self, size: int) -> int:
        """``size``, or what is left of the request's :data:`REQUEST_BUDGET`: without one,
        repeated messages of repeated big values made requests of gigabytes, slow to build
        and over protobuf's 2 GiB (EncodeError)."""
        size = max(0, min(size, self._budget))
        self._budget -= size
        return size

    def big(self, size: int) -> bytes:
        """``size`` bytes, cheaply (a repeated random block)."""
        return bytes(self._big_view(size))

    def _big_view(self, size: int) -> memoryview:
        if len(self._repeated) < size:
            self._repeated = self._filler * (size // len(self._filler) + 1)
        return memoryview(self._repeated)[:size]

    def scalar(self, f: FieldDescriptor) -> Any:
        t = f.type
        if t in _INT_RANGES:
            return self.integer(f)
        if t == FieldDescriptor.TYPE_BOOL:
            return self.rng.random() < 0.5
        if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
            return self.rng.choice([0.0, -1.0, 1e308, -1e308, float("inf"), float("-inf"), float("nan"), self.rng.uniform(-1e6, 1e6)])
        if t == FieldDescriptor.TYPE_STRING:
            return self.text(f)
        if t == FieldDescriptor.TYPE_BYTES:
            return self.blob(f)
        if t == FieldDescriptor.TYPE_ENUM:
            return self.enum(f)
        raise AssertionError(f"unexpected field type {t} of {f.full_name}")

    # --- messages -----------------------------------------------------------------
    def message(self, descriptor: Descriptor, depth: int = 0) -> Message:
        """A random message of ``descriptor``'s type (depth-bounded)."""
        rng = self.rng
        msg = message_class(descriptor)()
        chosen: set[str] = set()
        for oneof in descriptor.oneofs:
            if len(oneof.fields) == 1 and oneof.name.startswith("_"):
                continue  # proto3 optional: presence decided per field below
            if rng.random() < 0.9:
                chosen.add(rng.choice(oneof.fields).name)
        for f in descriptor.fields:
            oneof = f.containing_oneof
            if oneof is not None and not (len(oneof.fields) == 1 and oneof.name.startswith("_")):
                if f.name not in chosen:
                    continue
            elif rng.random() < 0.25:
                continue
            self._set(msg, f, depth)
        return msg

    def _set(self, msg: Message, f: FieldDescriptor, depth: int) -> None:
        rng = self.rng
        is_message = f.type == FieldDescriptor.TYPE_MESSAGE
        if is_message and f.message_type.GetOptions().map_entry:
            key_f, value_f = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
            target = getattr(msg, f.name)
            for _ in range(rng.choice([0, 1, 2, 3, 10]) if depth < 4 else 0):
                key = self.scalar(key_f)
                if value_f.type == FieldDescriptor.TYPE_MESSAGE:
                    target[key].CopyFrom(self.message(value_f.message_type, depth + 1))
                else:
                    target[key] = self.scalar(value_f)
            return
        if f.is_repeated:
            count = rng.choice([0, 1, 1, 2, 3, 5, 20]) if rng.random() < 0.98 else rng.choice([200, 2000])
            if is_message and depth >= 3 or self._budget <= 0:
                count = min(count, 1)
            target = getattr(msg, f.name)
            for _ in range(count):
                if is_message:
                    target.add().CopyFrom(self.message(f.message_type, depth + 1))
                else:
                    target.append(self.scalar(f))
            return
        if is_message:
            if depth < 5:
                getattr(msg, f.name).CopyFrom(self.message(f.message_type, depth + 1))
            return
        setattr(msg, f.name, self.scalar(f))

    # --- raw bytes ----------------------------------------------------------------
    def mutate(self, data: bytes) -> bytes:
        """``data`` with random damage: flipped bytes, a cut, inserted garbage, a bogus
        field header, or a random replacement."""
        rng = self.rng
        buf = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            op = rng.randrange(7)
            if op == 0 and buf:
                i = rng.randrange(len(buf))
                buf[i] = rng.randrange(256)
            elif op == 1 and buf:
                del buf[rng.randrange(len(buf)):]
            elif op == 2:
                i = rng.randrange(len(buf) + 1)
                buf[i:i] = rng.randbytes(rng.randint(1, 16))
            elif op == 3:
                # A field header with a random number and wire type (3, 4: groups; 6, 7: invalid).
                tag = (rng.randint(1, 2**29 - 1) << 3) | rng.randrange(8)
                buf += _varint(tag) + rng.randbytes(rng.randint(0, 10))
            elif op == 4:
                # A length-delimited field claiming more bytes than follow.
                buf += _varint((rng.randint(1, 20) << 3) | 2) + _varint(rng.randint(1, 2**32)) + b"x"
            elif op == 5:
                # A varint that never ends.
                buf += _varint((rng.randint(1, 20) << 3) | 0) + b"\xff" * rng.randint(1, 12)
            else:
                buf = bytearray(rng.randbytes(rng.randint(0, 64)))
        return bytes(buf)

    def oversized(self, data: bytes) -> bytes:
        """``data`` followed by an unknown length-delimited field that brings it near or
        over the size limit (valid protobuf: a parser skips it)."""
        size = self.max_bytes + self.rng.choice([-4096, -64, 0, 1, 4096])
        pad = max(0, size - len(data) - 16)
        return b"".join((data, _varint((999 << 3) | 2), _varint(pad), self._big_view(pad)))

    def request(self, descriptor: Descriptor) -> Message | bytes:
        """One hostile request: a random message, or raw bytes (mutated or oversized)."""
        rng = self.rng
        self._budget = REQUEST_BUDGET
        msg = self.message(descriptor)
        if rng.random() < self.oversize_rate:
            return self.oversized(msg.SerializeToString())
        if rng.random() < self.raw_rate:
            return self.mutate(msg.SerializeToString())
        return msg


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode(request: Message | bytes) -> bytes:
    return request if isinstance(request, bytes) else request.SerializeToString()


# --- sending ---------------------------------------------------------------------------
@dataclass
class Outcome:
    """How one call ended: its status code and details, and the responses read."""

    method: str
    code: grpc.StatusCode
    details: str
    request: Message | bytes
    responses: list[bytes] = field(default_factory=list)
    cancelled_by_us: bool = False

    @property
    def crashed(self) -> bool:
        """The servicer let an exception escape (or answered without a proper status)."""
        if self.cancelled_by_us and self.code == grpc.StatusCode.CANCELLED:
            return False
        if self.code in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL):
            return any(m in self.details for m in CRASH_MARKERS) or self.code == grpc.StatusCode.UNKNOWN
        return False

    def describe(self) -> str:
        req = self.request
        shown = repr(req[:200]) if isinstance(req, bytes) else repr(str(req)[:400])
        return f"{self.method}: {self.code.name} {self.details[:300]!r} for {shown}"


Metadata = tuple[tuple[str, str], ...]


async def _unary(
    channel: grpc.aio.Channel, method: MethodDescriptor, request: Message | bytes, timeout: float, metadata: Metadata
) -> Outcome:
    call = channel.unary_unary(path(method))
    try:
        reply = await call(encode(request), timeout=timeout, metadata=metadata)
        return Outcome(method.name, grpc.StatusCode.OK, "", request, [reply])
    except grpc.aio.AioRpcError as exc:
        return Outcome(method.name, exc.code(), exc.details() or "", request)


async def _server_stream(
    channel: grpc.aio.Channel, method: MethodDescriptor, request: Message | bytes, cut_after: int | None, timeout: float,
    metadata: Metadata,
) -> Outcome:
    call = channel.unary_stream(path(method))(encode(request), timeout=timeout, metadata=metadata)
    out = Outcome(method.name, grpc.StatusCode.OK, "", request)
    try:
        async for reply in call:
            out.responses.append(reply)
            if cut_after is not None and len(out.responses) >= cut_after:
                call.cancel()
                out.cancelled_by_us = True
                break
        out.code = await call.code()
        out.details = await call.details() or ""
    except grpc.aio.AioRpcError as exc:
        out.code, out.details = exc.code(), exc.details() or ""
    except asyncio.CancelledError:
        if not out.cancelled_by_us:
            raise
        out.code = grpc.StatusCode.CANCELLED
    return out


async def _bidi(
    channel: grpc.aio.Channel, method: MethodDescriptor, frames: list[Message | bytes], cut_after: int | None,
    timeout: float, metadata: Metadata,
) -> Outcome:
    """Write ``frames``; with ``cut_after``, cancel the call after that many frames (a
    stream cut mid-conversation); else half-close and read to the end."""
    call = channel.stream_stream(path(method))(timeout=timeout, metadata=metadata)
    out = Outcome(method.name, grpc.StatusCode.OK, "", frames[0] if frames else b"")
    out.request = b"".join(encode(f)[:40] + b"|" for f in frames) if any(isinstance(f, bytes) for f in frames) else (frames[0] if frames else b"")

    async def read() -> None:
        async for reply in call:
            out.responses.append(reply)

    reader = asyncio.create_task(read())
    try:
        for i, frame in enumerate(frames):
            if cut_after is not None and i >= cut_after:
                break
            await call.write(encode(frame))
        if cut_after is not None:
            await asyncio.sleep(0)
            call.cancel()
            out.cancelled_by_us = True
        else:
            await call.done_writing()
        await reader
        out.code = await call.code()
        out.details = await call.details() or ""
    except grpc.aio.AioRpcError as exc:
        out.code, out.details = exc.code(), exc.details() or ""
    except asyncio.InvalidStateError:
        out.code, out.details = await call.code(), await call.details() or ""
    except asyncio.CancelledError:
        if not out.cancelled_by_us:
            raise
        out.code = grpc.StatusCode.CANCELLED
    finally:
        if not reader.done():
            reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
    if out.code == grpc.StatusCode.OK or not out.cancelled_by_us:
        try:
            code = await call.code()
            out.code, out.details = code, await call.details() or ""
        except asyncio.CancelledError:
            out.code = grpc.StatusCode.CANCELLED
    return out


@dataclass
class Plan:
    """One input to a method: the request (or the frames of a stream) and where to cut."""

    method: MethodDescriptor
    frames: list[Message | bytes]
    cut_after: int | None


def stream_frames(gen: RequestGenerator, method: MethodDescriptor) -> list[Message | bytes]:
    """Frames for a client stream, shaped like a conversation half the time (Produce
    opens first, Consume subscribes first) so the hostile frames reach the stream body."""
    rng = gen.rng
    descriptor = method.input_type
    frames: list[Message | bytes] = [gen.request(descriptor) for _ in range(rng.choice([0, 1, 2, 3, 5, 8]))]
    if rng.random() < 0.6 and method.name in ("Produce", "Consume"):
        kind = "open" if method.name == "Produce" else "subscribe"
        first = message_class(descriptor)()
        getattr(first, kind).CopyFrom(gen.message(descriptor.fields_by_name[kind].message_type, depth=1))
        body = getattr(first, kind)
        body.topic = gen.pools.topic(rng)
        if kind == "subscribe":
            body.subscription = gen.pools.name(rng, "sub")
        frames.insert(0, first)
    return frames


def plans(gen: RequestGenerator, method: MethodDescriptor, count: int) -> Iterator[Plan]:
    rng = gen.rng
    for _ in range(count):
        if method.client_streaming:
            frames = stream_frames(gen, method)
            cut = rng.randrange(len(frames) + 1) if frames and rng.random() < 0.3 else None
            yield Plan(method, frames, cut)
        else:
            cut = rng.choice([0, 1, 2]) if method.server_streaming and rng.random() < 0.3 else None
            yield Plan(method, [gen.request(method.input_type)], cut)


async def run_plan(channel: grpc.aio.Channel, plan: Plan, timeout: float, metadata: Metadata = ()) -> Outcome:
    """Send one plan (with ``metadata``: a token, say) and say how the call ended."""
    method = plan.method
    if method.client_streaming:
        return await _bidi(channel, method, plan.frames, plan.cut_after, timeout, metadata)
    if method.server_streaming:
        cut = None if plan.cut_after is None else plan.cut_after + 1
        return await _server_stream(channel, method, plan.frames[0], cut, timeout, metadata)
    return await _unary(channel, method, plan.frames[0], timeout, metadata)


async def run_many(
    channel: grpc.aio.Channel, inputs: Iterator[Plan], *, concurrency: int = 48,
    timeout: float | Callable[[Plan], float] = 30.0,
    on_outcome: Callable[[Plan, Outcome], None] | None = None, metadata: Metadata = (),
) -> tuple[int, float]:
    """Send every plan with ``concurrency`` calls in flight; return (calls, seconds).
    ``timeout``: each call's deadline, or a function giving it per plan."""
    started = time.monotonic()
    done = 0

    async def worker() -> None:
        nonlocal done
        for plan in inputs:  # one shared iterator: the workers take turns
            outcome = await run_plan(channel, plan, timeout(plan) if callable(timeout) else timeout, metadata)
            done += 1
            if on_outcome is not None:
                on_outcome(plan, outcome)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done, time.monotonic() - started


def channel_options() -> list[tuple[str, int]]:
    """Client options that let oversized requests out, so the server is the one refusing."""
    limit = MAX_MESSAGE_BYTES * 2
    return [("grpc.max_send_message_length", limit), ("grpc.max_receive_message_length", limit)]


# --- raw HTTP/2 -------------------------------------------------------------------------
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _literal(name: bytes, value: bytes) -> bytes:
    """An HPACK literal header field without indexing, no Huffman coding (names < 127 bytes)."""
    return b"\x00" + bytes([len(name)]) + name + _hpack_len(len(value)) + value


def _hpack_len(n: int) -> bytes:
    if n < 127:
        return bytes([n])
    out, n = bytearray([127]), n - 127
    while n >= 128:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cut_connection(address: str, rpc_path: str, rng: random.Random, message: bytes) -> None:
    """Open an HTTP/2 connection by hand, start a call to ``rpc_path``, send part of a
    gRPC message (and sometimes part of an HTTP/2 frame), then close the socket."""
    host, port = address.rsplit(":", 1)
    headers = b"".join(_literal(k, v) for k, v in [
        (b":method", b"POST"), (b":scheme", b"http"), (b":path", rpc_path.encode()),
        (b":authority", address.encode()), (b"content-type", b"application/grpc"), (b"te", b"trailers"),
    ])
    grpc_message = b"\x00" + struct.pack(">I", len(message)) + message
    cut = rng.randrange(len(grpc_message)) if len(grpc_message) > 1 else 0
    data = [_PREFACE, _frame(4, 0, 0, b""), _frame(1, 4, 1, headers)]
    style = rng.randrange(3)
    if style == 0:  # a DATA frame whose gRPC message stops short
        data.append(_frame(0, 0, 1, grpc_message[:cut]))
    elif style == 1:  # a DATA frame cut in the middle of the HTTP/2 frame itself
        whole = _frame(0, 0, 1, grpc_message)
        data.append(whole[: rng.randrange(1, len(whole))])
    else:  # a frame header announcing more than the peer allows, then nothing
        data.append(struct.pack(">I", 0xFFFFFF)[1:] + b"\x00\x00\x00\x00\x00\x01" + b"x" * 10)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        try:
            sock.sendall(b"".join(data))
        except (BrokenPipeError, ConnectionResetError):
            return  # the server already hung up on the garbage: what it should do
        if rng.random() < 0.5:
            try:
                sock.recv(1024)
            except OSError:
                pass
        # SO_LINGER 0: the close is a reset, not a clean FIN, half the time.
        if rng.random() < 0.5:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
