"""The DLQ replay's pure part: which DLQ messages are selected, and what is published
for each (``transform``). The job (``spark-jobs/dlq_replay.py``) does the reading and
the writing; see docs/spark.md for why a rerun never moves a message twice.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from magnetar.client.deadletters import BATCH_BITS, ENTRY_BITS, LEDGER_BITS
from magnetar.common.letters import (
    ORIGIN_MESSAGE_ID,
    REAL_TOPIC,
    RECONSUMETIMES,
    REPLAY_COUNT,
    REPLAYED_AT,
)

DEFAULT_SUBSCRIPTION = "dlq-replay"
"""The durable subscription a replay reads through when the DLQ has none (as the gateway)."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_duration_ms(text: str) -> int:
    """``"90s"``, ``"15m"``, ``"2h"``, ``"7d"``, ``"500ms"`` (a bare number is seconds).

    Raises:
        ValueError: not such a duration.
    """
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration (e.g. 30s, 15m, 2h, 7d)")
    return int(float(match.group(1)) * _UNIT_MS[match.group(2) or "s"])


@dataclass(frozen=True)
class Selection:
    """What a replay moves: the filters, the transform and the target, as given."""

    older_than: str | None = None
    newer_than: str | None = None
    where: str | None = None
    max_messages: int | None = None
    transform: str | None = None
    target: str | None = None

    def digest(self) -> str:
        """A hash of the arguments that choose and shape what is moved: the same arguments
        give the same producer names (a rerun's resends are recognised), different ones
        different names (never taken for duplicates of another selection)."""
        text = json.dumps(
            [self.older_than, self.newer_than, self.where, self.max_messages, self.transform, self.target],
            separators=(",", ":"),
        )
        return hashlib.sha1(text.encode()).hexdigest()[:12]

    @property
    def filtered(self) -> bool:
        return any(x is not None for x in (self.older_than, self.newer_than, self.where, self.max_messages))


@dataclass(frozen=True)
class ReplayConfig:
    selection: Selection
    now_ms: int
    """The run's start: time filters count from it, and it is every copy's REPLAYED_AT
    (the same in every task and task retry of the run)."""


def select(df: Any, selection: Selection, now_ms: int) -> Any:
    """The DLQ rows ``selection`` picks, in DLQ order when ``max_messages`` is given."""
    from pyspark.sql import functions as F

    if selection.older_than is not None:
        cutoff = now_ms - parse_duration_ms(selection.older_than)
        df = df.filter(F.col("publish_time") < F.timestamp_millis(F.lit(cutoff)))
    if selection.newer_than is not None:
        cutoff = now_ms - parse_duration_ms(selection.newer_than)
        df = df.filter(F.col("publish_time") >= F.timestamp_millis(F.lit(cutoff)))
    if selection.where:
        df = df.filter(F.expr(selection.where))
    if selection.max_messages is not None:
        parts = _last_id_parts()
        df = df.orderBy(
            "topic", "partition", parts[0].cast("long"), parts[1].cast("long"), parts[3].cast("int")
        ).limit(selection.max_messages)
    return df


def _last_id_parts() -> Any:
    """``message_id``'s fields, a chunked message's (``<first>;<last>``) from its last
    chunk: where it is complete, so the order a slice's reader delivers messages in."""
    from pyspark.sql import functions as F

    return F.split(F.element_at(F.split("message_id", ";"), -1), ":")


def transform(df: Any, cfg: ReplayConfig) -> Any:
    """Selected DLQ rows (the source's columns with ``entry_size``) → the rows to publish:
    ``topic`` (the target: ``--target``, else ``REAL_TOPIC``; null when neither), ``key``,
    ``value``, ``event_time``, ``properties`` (RECONSUMETIMES cleared, ORIGIN_MESSAGE_ID
    kept or set, REPLAY_COUNT + 1, REPLAYED_AT), ``producer_name``
    (``dlq-replay:<DLQ partition>:<ledger>:<selection digest>``), ``sequence_id`` (the DLQ
    message id packed as :func:`magnetar.client.deadletters.sequence_id` does), and the
    DLQ message to acknowledge (``ack_topic``, ``ack_message_id``, ``ack_entry_size``).

    A chunked dead letter (``message_id`` ``<first chunk>;<last chunk>``) is one row: its
    sequence id is packed from its last chunk's id (the gateway's, and the order the
    slice's reader completes messages in, so the ids grow within a name), its producer
    name has its first chunk's ledger (the slice it is read in), and ``ack_message_id``
    lists every chunk's entry (``chunk_message_ids``, ``;``-separated) when the rows have
    that column."""
    from pyspark.sql import functions as F

    parts = _last_id_parts()
    ledger, entry, batch = parts[0].cast("long"), parts[1].cast("long"), parts[3].cast("long")
    first_ledger = F.split("message_id", ":")[0].cast("long")
    ack_id = F.col("message_id")
    if "chunk_message_ids" in df.columns:
        ack_id = F.when(F.size("chunk_message_ids") > 0, F.concat_ws(";", "chunk_message_ids")).otherwise(ack_id)
    dlq_partition = F.when(
        F.col("partition") >= 0, F.concat(F.col("topic"), F.lit("-partition-"), F.col("partition").cast("string"))
    ).otherwise(F.col("topic"))
    target = F.lit(cfg.selection.target) if cfg.selection.target else F.col("properties").getItem(REAL_TOPIC)
    dropped = F.array(*(F.lit(k) for k in (RECONSUMETIMES, ORIGIN_MESSAGE_ID, REPLAY_COUNT, REPLAYED_AT)))
    kept = F.map_filter("properties", lambda k, _v: ~F.array_contains(dropped, k))
    count = F.coalesce(F.expr(f"try_cast(properties['{REPLAY_COUNT}'] AS INT)"), F.lit(0)) + 1
    added = F.create_map(
        F.lit(ORIGIN_MESSAGE_ID), F.coalesce(F.col("properties").getItem(ORIGIN_MESSAGE_ID), F.col("message_id")),
        F.lit(REPLAY_COUNT), count.cast("string"),
        F.lit(REPLAYED_AT), F.lit(str(cfg.now_ms)),
    )
    sequence = F.shiftleft(ledger, ENTRY_BITS + BATCH_BITS).bitwiseOR(F.shiftleft(entry, BATCH_BITS)).bitwiseOR(batch + 1)
    in_range = (ledger < (1 << LEDGER_BITS)) & (entry < (1 << ENTRY_BITS)) & (batch + 1 < (1 << BATCH_BITS))
    return df.select(
        F.when(F.length(target) > 0, target).alias("topic"),
        F.col("key"),
        F.col("value"),
        F.col("event_time"),
        F.map_concat(kept, added).alias("properties"),
        F.concat_ws(
            ":", F.lit("dlq-replay"), dlq_partition, first_ledger.cast("string"), F.lit(cfg.selection.digest())
        ).alias("producer_name"),
        F.when(in_range, sequence).otherwise(F.raise_error(F.concat(
            F.lit("message id too large to replay with deduplication: "), F.col("message_id")))).alias("sequence_id"),
        dlq_partition.alias("ack_topic"),
        ack_id.alias("ack_message_id"),
        F.col("entry_size").alias("ack_entry_size"),
    )


def counts_by_target(df: Any) -> dict[str, int]:
    """Rows per target topic ("" for rows without one): what a dry run prints."""
    rows = df.groupBy("topic").count().collect()
    return {(r["topic"] or ""): int(r["count"]) for r in rows}


# -- the fused path: read, publish and acknowledge in one Python task -----------------------------

def fused(selection: Selection) -> bool:
    """Whether a replay can skip Spark SQL: no transform, no ``--where``, no
    ``--max-messages`` (the time filters are applied while reading)."""
    return selection.transform is None and selection.where is None and selection.max_messages is None


class _List:
    def __init__(self, values: list[Any]) -> None:
        self.values = values

    def to_pylist(self) -> list[Any]:
        return self.values


class RowsBatch:
    """Rows to publish as Python lists, with the two methods of an Arrow record batch that
    ``writing.publish`` uses (``schema.get_field_index``, ``column(i).to_pylist()``)."""

    def __init__(self, columns: dict[str, list[Any]]) -> None:
        self.names = list(columns)
        self.columns = list(columns.values())
        self.schema = self

    def get_field_index(self, name: str) -> int:
        return self.names.index(name) if name in self.names else -1

    def column(self, index: int) -> _List:
        return _List(self.columns[index])

    @property
    def num_rows(self) -> int:
        return len(self.columns[0])


class ReplayRows:
    """A ``reading.read_slice`` collector that turns DLQ messages into the rows
    :func:`transform` makes (same producer names, sequence ids, properties, targets and
    acknowledgements), keeping only those the time filters select; ``read`` counts every
    message of the slice read."""

    NAMES = ("topic", "key", "value", "event_time", "properties", "producer_name", "sequence_id",
             "ack_topic", "ack_message_id", "ack_entry_size", "ack_subscription")

    def __init__(self, cfg: ReplayConfig, subscription: str, counter: list[int]) -> None:
        self.cfg, self.subscription, self.counter = cfg, subscription, counter
        self.digest = cfg.selection.digest()
        sel = cfg.selection
        self.before = cfg.now_ms - parse_duration_ms(sel.older_than) if sel.older_than is not None else None
        self.since = cfg.now_ms - parse_duration_ms(sel.newer_than) if sel.newer_than is not None else None
        self.cols: list[list[Any]] = [[] for _ in self.NAMES]

    def __len__(self) -> int:
        return len(self.cols[0])

    def add_entry(self, topic: str, partition: int, messages: list[Any], size: int) -> None:
        import datetime as dt

        from magnetar.client.deadletters import replayed_properties

        from .reading import chunk_ids

        (topics, keys, values, events, props, names, seqs, ack_topics, ack_ids, ack_sizes, ack_subs) = self.cols
        dlq_partition = f"{topic}-partition-{partition}" if partition >= 0 else topic
        now_ms, target, sub = self.cfg.now_ms, self.cfg.selection.target, self.subscription
        self.counter[0] += len(messages)
        for m in messages:
            published = m.publish_timestamp()
            if self.before is not None and not published < self.before:
                continue
            if self.since is not None and not published >= self.since:
                continue
            mid = m.message_id()  # a chunked message's: its last chunk's position
            ledger, entry, batch = mid.ledger_id(), mid.entry_id(), mid.batch_index()
            if not (ledger < 1 << LEDGER_BITS and entry < 1 << ENTRY_BITS and batch + 1 < 1 << BATCH_BITS):
                raise ValueError(f"message id too large to replay with deduplication: {ledger}:{entry}:{partition}:{batch}")
            mid_text = f"{ledger}:{entry}:{partition}:{batch}"
            name_ledger, ack_text = ledger, mid_text
            chunks = chunk_ids(mid, partition)
            if chunks is not None:  # as transform(): named by the first chunk's ledger, every chunk acked
                first = mid.first_chunk_message_id()
                name_ledger = first.ledger_id()
                mid_text = f"{first.ledger_id()}:{first.entry_id()}:{partition}:{first.batch_index()};{mid_text}"
                ack_text = ";".join(chunks)
            original = m.properties()
            to = target or original.get(REAL_TOPIC)
            topics.append(to or None)
            keys.append(m.partition_key() if m.has_partition_key() else None)
            values.append(m.data())
            event = m.event_timestamp()
            events.append(dt.datetime.fromtimestamp(event / 1000, dt.UTC) if event else None)
            props.append(replayed_properties(original, mid_text, now_ms))
            names.append(f"dlq-replay:{dlq_partition}:{name_ledger}:{self.digest}")
            seqs.append((ledger << (ENTRY_BITS + BATCH_BITS)) | (entry << BATCH_BITS) | (batch + 1))
            ack_topics.append(dlq_partition)
            ack_ids.append(ack_text)
            ack_sizes.append(size)
            ack_subs.append(sub)

    def batch(self, _schema: Any) -> RowsBatch:
        out = RowsBatch(dict(zip(self.NAMES, self.cols, strict=True)))
        self.cols = [[] for _ in self.NAMES]
        return out


def fused_task(source_opts: Any, spec: Any, subscription: str, cfg: ReplayConfig, writer_opts: Any) -> dict[str, Any]:
    """One slice, read with the SDK (in a thread) and published + acknowledged in this
    Python worker by ``writing.publish``, under the same rules as the Spark path: the
    task's ``writing.PublishStats`` (``stats``) and ``read`` (messages read)."""
    import queue
    import threading
    import time
    from contextlib import closing

    from .reading import read_slice
    from .writing import publish

    counter = [0]
    batches: queue.Queue[Any] = queue.Queue(maxsize=4)
    stop = threading.Event()
    done = object()

    def produce() -> None:
        try:
            with closing(read_slice(source_opts, spec, lambda: ReplayRows(cfg, subscription, counter))) as reads:
                for b in reads:
                    while not stop.is_set():
                        try:
                            batches.put(b, timeout=0.5)
                            break
                        except queue.Full:
                            continue
                    if stop.is_set():
                        return
            batches.put(done)
        except BaseException as exc:  # handed to the publishing side, which raises it
            batches.put(exc)

    def consume() -> Any:
        while True:
            item = batches.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    thread = threading.Thread(target=produce, name="dlq-replay-reader", daemon=True)
    thread.start()
    try:
        stats = publish(writer_opts, consume())
    finally:
        stop.set()
        deadline = time.monotonic() + 30
        while thread.is_alive() and time.monotonic() < deadline:  # unblock a reader waiting to put
            try:
                batches.get(timeout=0.1)
            except queue.Empty:
                pass
        # a reader still stuck on the broker is a daemon thread: it is not waited for
    return {"stats": stats, "read": counter[0]}
