"""The ``magnetar`` data source: batch and streaming reads of topics, and writes.

Everything here is pickled by Spark (the source, its readers, writer and partitions):
they hold options and plain values only; clients are opened inside ``read``/``write``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from . import gateway, positions
from .options import SourceOptions
from .positions import EARLIEST, PartitionLayout, Pos, SliceSpec
from .reading import read_slice, schema_ddl


@dataclass(frozen=True)
class MagnetarSlice(InputPartition):
    """One ledger of one topic partition, ``[start, end)`` (see positions.SliceSpec)."""

    spec: SliceSpec


class MagnetarDataSource(DataSource):
    """``spark.read.format("magnetar")`` (see docs/spark.md for the options)."""

    @classmethod
    def name(cls) -> str:
        return "magnetar"

    def schema(self) -> str:
        opts = SourceOptions.parse(self.options, need_topics=False)
        if opts.topics and opts.admin_url:
            # A batch read is a snapshot taken when it is loaded: Spark calls schema() at
            # load() and keeps this instance (pickled) for the reader.
            self.snapshot = _layouts(opts, opts.start_at_subscription)
        return schema_ddl(opts.include_entry_size, opts.include_chunk_ids)

    def reader(self, schema: Any) -> DataSourceReader:
        opts = SourceOptions.parse(self.options)
        return MagnetarBatchReader(opts, getattr(self, "snapshot", None))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return MagnetarStreamReader(SourceOptions.parse(self.options))

    def writer(self, schema: Any, overwrite: bool) -> Any:
        from .writing import MagnetarWriter

        return MagnetarWriter.from_options(self.options, [f.name for f in schema.fields])


def _layouts(opts: SourceOptions, subscription: str | None) -> list[PartitionLayout]:
    return gateway.call(opts.admin_url, opts.token, lambda admin: gateway.layouts(admin, opts.topics, subscription))


class MagnetarBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions, snapshot: list[PartitionLayout] | None) -> None:
        self.opts = opts
        layouts = snapshot if snapshot is not None else _layouts(opts, opts.start_at_subscription)
        self.slices = positions.plan(layouts, opts.starting, opts.ending)

    def partitions(self) -> Sequence[InputPartition]:
        return [MagnetarSlice(s) for s in self.slices]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if isinstance(partition, MagnetarSlice):  # with no slices Spark reads one empty partition
            yield from read_slice(self.opts, partition.spec)


def pos_text(pos: Pos) -> str:
    return f"{pos[0]}:{pos[1]}:{pos[2]}"


def text_pos(text: str) -> Pos:
    ledger, entry, batch = (int(x) for x in text.split(":"))
    return (ledger, entry, batch)


class MagnetarStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches between message-id offsets: ``{partition topic: "ledger:entry:batch"}``,
    the position to read next in each partition (keys sorted, so equal offsets are equal JSON)."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.target: dict[str, str] | None = None

    def _now(self) -> tuple[list[PartitionLayout], dict[str, str]]:
        layouts = _layouts(self.opts, None)
        return layouts, {ly.partition_topic: pos_text(positions.snapshot_end(ly)) for ly in layouts}

    def initialOffset(self) -> dict:
        from .options import offset_for

        layouts = _layouts(self.opts, self.opts.start_at_subscription)
        out = {}
        for ly in sorted(layouts, key=lambda x: x.partition_topic):
            out[ly.partition_topic] = pos_text(positions.start_of(ly, offset_for(self.opts.starting, ly.topic, ly.partition)))
        return out

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._now()[1]

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_entries_per_trigger:
            return ReadMaxRows(self.opts.max_entries_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        layouts, latest = self._now()
        if self.target is not None:
            latest = {p: min(e, self.target.get(p, pos_text(EARLIEST)), key=text_pos) for p, e in latest.items()}
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        out = {}
        for ly in sorted(layouts, key=lambda x: x.partition_topic):
            begin = text_pos(start.get(ly.partition_topic, pos_text(EARLIEST)))
            end = max(begin, text_pos(latest[ly.partition_topic]))
            if budget is not None:
                end, budget = _advance(ly, begin, end, budget)
            out[ly.partition_topic] = pos_text(end)
        for p, pos in start.items():  # a partition gone from the listing keeps its offset
            out.setdefault(p, pos)
        return dict(sorted(out.items()))

    def reportLatestOffset(self) -> dict:
        return dict(sorted(self._now()[1].items()))

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if start == end:
            return []
        layouts = {ly.partition_topic: ly for ly in _layouts(self.opts, None)}
        out = []
        for p in sorted(end):
            lo, hi = text_pos(start.get(p, pos_text(EARLIEST))), text_pos(end[p])
            if lo < hi and p in layouts:
                out.extend(MagnetarSlice(s) for s in positions.split(layouts[p], lo, hi))
        return out

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if isinstance(partition, MagnetarSlice):  # with no slices Spark reads one empty partition
            yield from read_slice(self.opts, partition.spec)

    def commit(self, end: dict) -> None:
        pass  # the checkpoint holds the offsets; nothing on the broker to move


def _advance(ly: PartitionLayout, begin: Pos, end: Pos, budget: int) -> tuple[Pos, int]:
    """Move from ``begin`` towards ``end`` by at most ``budget`` entries."""
    if budget <= 0:
        return begin, 0
    for s in positions.split(ly, begin, end):
        lo_entry = max(s.start[1], 0)
        hi_entry = s.end[1] if s.end[0] == s.ledger else lo_entry
        if s.end[2] >= 0:
            hi_entry += 1
        entries = max(0, hi_entry - lo_entry)
        if entries >= budget:
            return (s.ledger, lo_entry + budget, -1), 0
        budget -= entries
    return end, budget


DefaultSource = MagnetarDataSource
