"""Chunked messages (Pulsar's ``chunking_enabled``): a producer splits a message over the
max message size into chunk entries; a consumer puts them back together.

A chunk is an entry of one message holding a part of the whole payload, with the
``EntryBatch`` chunk fields: ``uuid`` (``<producer name>-<sequence id>``), ``chunk_id``
(0..n-1), ``num_chunks_from_msg`` (n) and ``total_chunk_msg_size``. Every chunk carries
the message's sequence id and the broker deduplicates by the last one. With compression
the whole payload is compressed first and the compressed bytes are cut (as Pulsar), so
the consumer decompresses the message it reassembles.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from magnetar.common.compression import MAX_UNCOMPRESSED_SIZE, compress, decompress
from magnetar.common.errors import InvalidArgument, MagnetarError
from magnetar.common.message_id import ChunkMessageId, MessageId
from magnetar.proto.v1 import broker_pb2 as pb

from .batching import OpSendBatch

DEFAULT_MAX_PENDING_CHUNKED_MESSAGE = 10
DEFAULT_EXPIRE_TIME_OF_INCOMPLETE_CHUNKED_MESSAGE_MS = 60_000


# -- producing ------------------------------------------------------------------------
def chunk_payload(payload: bytes, compression: int, chunk_size: int) -> tuple[bytes, list[bytes]] | None:
    """The payload to cut (compressed when ``compression``) and its parts of at most
    ``chunk_size`` bytes; None when the message fits in one entry (it is sent as usual)."""
    data = compress(compression, payload) if compression else payload
    if len(data) <= chunk_size:
        return None
    return data, [data[i : i + chunk_size] for i in range(0, len(data), chunk_size)]


def build_chunk_ops(
    request_ids: Iterator[int], producer_name: str, msg: pb.SingleMessage, data: bytes, parts: list[bytes],
    compression: int, loop: asyncio.AbstractEventLoop, schema_version: bytes = b"",
) -> list[OpSendBatch]:  # fmt: skip
    """One unbatched send per part, in order, each with its own future (its chunk's id);
    every chunk carries the producer's ``schema_version`` (b"": none)."""
    seq = msg.sequence_id
    uuid = f"{producer_name}-{seq}"
    publish_time = int(time.time() * 1000)
    ops = []
    for i, part in enumerate(parts):
        single = pb.SingleMessage()
        single.CopyFrom(msg)
        single.payload = part
        entry = pb.EntryBatch(
            producer_name=producer_name, sequence_id=seq, publish_time_ms=publish_time, batched=False,
            messages=[single], uuid=uuid, chunk_id=i, num_chunks_from_msg=len(parts), total_chunk_msg_size=len(data),
            schema_version=schema_version,
        )  # fmt: skip
        if compression:
            entry.compression = compression
            entry.uncompressed_size = len(msg.payload)
        send = pb.SendBatch(
            request_id=next(request_ids), entry=entry.SerializeToString(), num_messages=1,
            highest_sequence_id=seq, lowest_sequence_id=seq, deliver_at_ms=msg.deliver_at_ms,
            chunk_id=i, num_chunks_from_msg=len(parts),
        )  # fmt: skip
        ops.append(OpSendBatch(send, [loop.create_future()], batched=False))
    return ops


def chunk_entry_op(
    request_id: int, entry: bytes, sequence_id: int, chunk: tuple[int, int], deliver_at_ms: int,
    loop: asyncio.AbstractEventLoop,
) -> OpSendBatch:  # fmt: skip
    """The send of one chunk already encoded as the entry to store (``entry``: an
    ``EntryBatch`` with its chunk fields; the broker's dead-letter moves copy chunks so),
    ``chunk`` being (chunk id, number of chunks)."""
    send = pb.SendBatch(
        request_id=request_id, entry=entry, num_messages=1, highest_sequence_id=sequence_id,
        lowest_sequence_id=sequence_id, deliver_at_ms=deliver_at_ms, chunk_id=chunk[0], num_chunks_from_msg=chunk[1],
    )  # fmt: skip
    return OpSendBatch(send, [loop.create_future()], batched=False)


def join_chunk_futures(ops: list[OpSendBatch], fut: asyncio.Future[MessageId]) -> None:
    """Complete ``fut`` with the chunked message's id once the last chunk is stored; fail
    it with the first chunk send that fails."""
    chunk_futs = [op.futures[0] for op in ops]

    def settle(done: asyncio.Future[MessageId]) -> None:
        if fut.done():
            return
        if done.cancelled() or done.exception() is not None:
            fut.set_exception(done.exception() or MagnetarError("chunk send cancelled"))
            return
        if done is chunk_futs[-1]:
            ids = tuple(f.result() for f in chunk_futs if f.done() and not f.exception())
            fut.set_result(ChunkMessageId(ids[0], ids[-1], ids))

    for f in chunk_futs:
        f.add_done_callback(settle)


# -- consuming ------------------------------------------------------------------------
class ChunkInfo(NamedTuple):
    """The chunk fields of a delivered entry."""

    uuid: str
    chunk_id: int
    num_chunks: int
    total_size: int
    compression: int
    uncompressed_size: int
    publish_time_ms: int


@dataclass
class _Pending:
    info: ChunkInfo
    started: float
    parts: list[bytes] = field(default_factory=list)
    ids: list[MessageId] = field(default_factory=list)
    first: object = None  # the first chunk's Message (its metadata is the message's)
    first_id: MessageId | None = None


@dataclass
class Assembled:
    """What one delivered chunk led to: a whole message (``message``: the first chunk's
    Message and the payload), and chunks to ack (their message can never be whole, or was
    dropped with auto-ack)."""

    message: tuple[object, bytes, ChunkMessageId] | None = None
    ack: list[MessageId] = field(default_factory=list)


class ChunkedMessageAssembler:
    """The incomplete chunked messages of one partition consumer (Pulsar's
    ``chunkedMessagesMap``), by uuid, oldest first.

    ``max_pending`` (0: no limit): when a new message starts with that many incomplete,
    the oldest is dropped: its chunks acked with ``auto_ack_oldest``, otherwise left
    unacked (the broker delivers them again on a redelivery). An incomplete message older
    than ``expire_ms`` (0: never) is dropped and its chunks acked (its producer is gone).
    A chunk out of order, or one whose message's start was never seen, drops what there
    is of its message: acked once older than ``expire_ms`` by its publish time, else left
    unacked. A chunk seen again (a producer's resend) is not used twice, and is acked
    with the message.
    """

    def __init__(
        self, max_pending: int, auto_ack_oldest: bool, expire_ms: int,
        clock: Callable[[], float] = time.monotonic, wall_ms: Callable[[], float] = lambda: time.time() * 1000,
    ) -> None:  # fmt: skip
        self.max_pending = max_pending
        self.auto_ack_oldest = auto_ack_oldest
        self.expire_ms = expire_ms
        self._clock = clock
        self._wall_ms = wall_ms
        self._pending: OrderedDict[str, _Pending] = OrderedDict()

    def __len__(self) -> int:
        return len(self._pending)

    def clear(self) -> None:
        self._pending.clear()

    def oldest_first_chunk(self) -> MessageId | None:
        """The first chunk's id of the oldest incomplete message (None: none)."""
        for ctx in self._pending.values():
            return ctx.first_id
        return None

    def add(self, message: object, mid: MessageId, payload: bytes, info: ChunkInfo) -> Assembled:
        out = Assembled()
        ctx = self._pending.get(info.uuid)
        if info.chunk_id == 0:
            earlier = ctx.ids if ctx is not None else []  # a resend from the first chunk
            if ctx is None and self.max_pending > 0 and len(self._pending) >= self.max_pending:
                _, oldest = self._pending.popitem(last=False)
                if self.auto_ack_oldest:
                    out.ack.extend(oldest.ids)
            self._pending.pop(info.uuid, None)
            ctx = self._pending[info.uuid] = _Pending(info, self._clock(), ids=list(earlier), first=message, first_id=mid)
        elif ctx is None or info.chunk_id > len(ctx.parts) or info.num_chunks != ctx.info.num_chunks:
            # Out of order, or its start never came: nothing of it can be delivered.
            dropped = [mid] + (self._pending.pop(info.uuid).ids if ctx is not None else [])
            if self.expire_ms > 0 and self._wall_ms() - info.publish_time_ms > self.expire_ms:
                out.ack.extend(dropped)
            return out
        elif info.chunk_id < len(ctx.parts):  # seen already: a resend
            ctx.ids.append(mid)
            return out
        ctx.parts.append(payload)
        ctx.ids.append(mid)
        if info.chunk_id < info.num_chunks - 1:
            return out
        del self._pending[info.uuid]
        whole = b"".join(ctx.parts)
        assert ctx.first_id is not None
        try:
            whole = _opened(whole, ctx.info)
        except InvalidArgument:
            out.ack.extend(ctx.ids)  # it can never be read: not delivered, not redelivered
            return out
        out.message = (ctx.first, whole, ChunkMessageId(ctx.first_id, mid, tuple(ctx.ids)))
        return out

    def next_expiry(self) -> float | None:
        """When (on the clock) the oldest incomplete message expires (None: never, or none)."""
        if self.expire_ms <= 0:
            return None
        for ctx in self._pending.values():
            return ctx.started + self.expire_ms / 1000
        return None

    def expire(self) -> list[MessageId]:
        """Drop the incomplete messages older than ``expire_ms``; their chunks to ack."""
        if self.expire_ms <= 0 or not self._pending:
            return []
        limit = self._clock() - self.expire_ms / 1000
        ack: list[MessageId] = []
        while self._pending:
            uuid, oldest = next(iter(self._pending.items()))
            if oldest.started > limit:
                break
            del self._pending[uuid]
            ack.extend(oldest.ids)
        return ack


def _opened(whole: bytes, info: ChunkInfo) -> bytes:
    """Raises: InvalidArgument: not the size the chunks said, or does not decompress."""
    if len(whole) != info.total_size:
        raise InvalidArgument(f"chunked message {info.uuid}: {len(whole)} bytes, its chunks said {info.total_size}")
    if not info.compression:
        return whole
    return decompress(info.compression, whole, info.uncompressed_size, max(MAX_UNCOMPRESSED_SIZE, info.uncompressed_size))
