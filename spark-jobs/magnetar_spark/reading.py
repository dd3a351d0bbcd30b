"""Reading one slice (executor side): an SDK Reader from the slice's start until its
end, yielding Arrow record batches with the source's exact schema."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

from .options import SourceOptions
from .positions import SliceSpec, done_after_entry

SCHEMA_DDL = (
    "message_id STRING, topic STRING, partition INT, key STRING, value BINARY, "
    "properties MAP<STRING, STRING>, publish_time TIMESTAMP, event_time TIMESTAMP, redelivery_count INT, "
    "ordering_key BINARY, schema_version BINARY"
)
ENTRY_SIZE_DDL = ", entry_size INT"
CHUNK_IDS_DDL = ", chunk_message_ids ARRAY<STRING>"
ROWS_PER_BATCH = 4096
_COLUMNS = 13
"""The columns :class:`_Columns` gathers (``entry_size`` and ``chunk_message_ids`` last,
left out of a batch whose schema has no such column)."""


def schema_ddl(include_entry_size: bool, include_chunk_ids: bool = False) -> str:
    return SCHEMA_DDL + (ENTRY_SIZE_DDL if include_entry_size else "") + (CHUNK_IDS_DDL if include_chunk_ids else "")


def chunk_ids(mid: Any, partition: int) -> list[str] | None:
    """Every entry a chunked message was read from (each chunk, a resent one too) as
    ``ledger:entry:partition:batch``; None for a message that is not chunked."""
    chunks = getattr(mid, "chunk_message_ids", None)
    if chunks is None:
        return None
    return [f"{c.ledger_id()}:{c.entry_id()}:{partition}:{c.batch_index()}" for c in chunks()]


def arrow_schema(include_entry_size: bool, include_chunk_ids: bool = False) -> Any:
    import pyarrow as pa

    fields = [
        pa.field("message_id", pa.string()), pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
        pa.field("key", pa.string()), pa.field("value", pa.binary()),
        pa.field("properties", pa.map_(pa.string(), pa.string())),
        pa.field("publish_time", pa.timestamp("us", tz="UTC")), pa.field("event_time", pa.timestamp("us", tz="UTC")),
        pa.field("redelivery_count", pa.int32()),
        pa.field("ordering_key", pa.binary()), pa.field("schema_version", pa.binary()),
    ]
    if include_entry_size:
        fields.append(pa.field("entry_size", pa.int32()))
    if include_chunk_ids:
        fields.append(pa.field("chunk_message_ids", pa.list_(pa.string())))
    return pa.schema(fields)


class _Columns:
    def __init__(self) -> None:
        self.cols: list[list[Any]] = [[] for _ in range(_COLUMNS)]

    def __len__(self) -> int:
        return len(self.cols[0])

    def add_entry(self, topic: str, partition: int, messages: list[Any], size: int) -> None:
        c = self.cols
        for m in messages:
            mid = m.message_id()
            text = f"{mid.ledger_id()}:{mid.entry_id()}:{partition}:{mid.batch_index()}"
            first = getattr(mid, "first_chunk_message_id", None)
            if first is not None:  # a chunked message: <first chunk>;<last chunk>, as its id prints
                f = first()
                text = f"{f.ledger_id()}:{f.entry_id()}:{partition}:{f.batch_index()};{text}"
            c[0].append(text)
            c[1].append(topic)
            c[2].append(partition)
            c[3].append(m.partition_key() if m.has_partition_key() else None)
            c[4].append(m.data())
            c[5].append(list(m.properties().items()))
            c[6].append(m.publish_timestamp() * 1000)
            event = m.event_timestamp()
            c[7].append(event * 1000 if event else None)
            c[8].append(m.redelivery_count())
            c[9].append(m.ordering_key() or None)
            c[10].append(m.schema_version() or None)
            c[11].append(size)
            c[12].append(chunk_ids(mid, partition))

    def batch(self, schema: Any) -> Any:
        import pyarrow as pa

        cols = self.cols[:11] + [col for name, col in (("entry_size", self.cols[11]), ("chunk_message_ids", self.cols[12]))
                                 if schema.get_field_index(name) >= 0]
        arrays = [pa.array(col, type=field.type) for col, field in zip(cols, schema, strict=True)]
        self.cols = [[] for _ in range(_COLUMNS)]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


async def _next_entry(reader: Any, held: list[Any], timeout_ms: int) -> list[Any] | None:
    """The messages of the next entry (an entry's messages are queued together), or None
    when the topic has nothing more."""
    from magnetar.common.errors import Timeout

    if held:
        first = held.pop()
    else:
        try:
            first = await reader.read_next(timeout_ms)
        except Timeout:
            if not await reader.has_message_available():
                return None
            try:
                first = await reader.read_next(timeout_ms)
            except Timeout:
                if reader.incomplete_chunked_message_start() is not None:
                    return None  # what is left are chunks of messages not whole (yet)
                raise
    messages = [first]
    if first.message_id().batch_index() >= 0:
        position = (first.message_id().ledger_id(), first.message_id().entry_id())
        while True:  # the rest of this batch is queued already (an entry is queued whole)
            try:
                nxt = await reader.read_next(0)
            except Timeout:
                break
            if (nxt.message_id().ledger_id(), nxt.message_id().entry_id()) != position:
                held.append(nxt)
                break
            messages.append(nxt)
    return messages


class _SliceReader:
    """The SDK reader of one slice, reopened after the last entry read every
    ``reader_reopen_after`` messages: the broker counts a reader's deliveries against
    ``max_unacked_messages_per_consumer`` (50,000 by default) and stops dispatching to it
    there, and a reader never acknowledges."""

    def __init__(self, opts: SourceOptions, s: SliceSpec) -> None:
        self.opts, self.s = opts, s
        self.client: Any = None
        self.reader: Any = None
        self.held: list[Any] = []
        self.read = 0

    async def open(self, ledger: int, entry: int) -> None:
        import magnetar.asyncio as mg
        from magnetar.common.message_id import MessageId

        if self.client is None:
            auth = mg.AuthenticationToken(self.opts.token) if self.opts.token else None
            self.client = mg.Client(self.opts.service_url, authentication=auth)
        if self.reader is not None:
            await self.reader.close()
        self.held.clear()
        self.read = 0
        self.reader = await self.client.create_reader(
            self.s.partition_topic, MessageId(ledger_id=ledger, entry_id=max(entry, 0), partition=-1, batch_index=-1), start_message_id_inclusive=True,
            receiver_queue_size=5000, subscription_role_prefix="spark-reader",
        )

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()

    async def fill(self, cols: Any) -> bool:
        """Add entries to ``cols`` until a batch is full; True when the slice is done."""
        s = self.s
        while len(cols) < ROWS_PER_BATCH:
            messages = await _next_entry(self.reader, self.held, self.opts.poll_timeout_ms)
            if messages is None:
                return True
            mid = messages[0].message_id()
            ledger, entry = mid.ledger_id(), mid.entry_id()
            # A chunked message is the slice's of its first chunk: past the end, reading
            # goes on while one that started before it is not whole yet.
            pending = self.reader.incomplete_chunked_message_start()
            held = pending is not None and (pending.ledger_id(), pending.entry_id(), -1) < s.end
            if _pos(messages[0]) >= s.end and not held:
                return True
            chosen = [m for m in messages if s.start <= _pos(m) < s.end]
            if chosen:  # entry_size counts the whole entry, also messages outside the slice
                cols.add_entry(s.topic, s.partition, chosen, len(messages))
            if done_after_entry(ledger, entry, s.end) and self.reader.incomplete_chunked_message_start() is None:
                return True
            self.read += len(messages)
            if self.read >= self.opts.reader_reopen_after and self.reader.incomplete_chunked_message_start() is None:
                await self.open(ledger, entry + 1)
        return False


def read_slice(opts: SourceOptions, s: SliceSpec, columns: Callable[[], Any] | None = None) -> Iterator[Any]:
    """Arrow record batches of every message of ``s`` (in id order).

    With ``columns``, a factory of collectors like ``_Columns`` (``add_entry(topic,
    partition, messages, entry_size)``, ``__len__``, ``batch(schema)``), their batches
    instead: the DLQ replay's fused path builds its rows to publish with it."""
    schema = arrow_schema(opts.include_entry_size, opts.include_chunk_ids)
    make = columns or _Columns
    loop = asyncio.new_event_loop()
    sr = _SliceReader(opts, s)
    try:
        loop.run_until_complete(sr.open(s.start[0], s.start[1]))
        finished = False
        while not finished:
            cols = make()
            finished = loop.run_until_complete(sr.fill(cols))
            if len(cols):
                yield cols.batch(schema)
    finally:
        loop.run_until_complete(sr.close())
        loop.close()


def _pos(m: Any) -> tuple[int, int, int]:
    """Where a message starts: a chunked message at its first chunk."""
    mid = m.message_id()
    first = getattr(mid, "first_chunk_message_id", None)
    if first is not None:
        mid = first()
    return (mid.ledger_id(), mid.entry_id(), mid.batch_index())
