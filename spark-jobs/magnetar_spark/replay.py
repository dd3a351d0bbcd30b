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
        parts = F.split("message_id", ":")
        df = df.orderBy(
            "topic", "partition", parts[0].cast("long"), parts[1].cast("long"), parts[3].cast("int")
        ).limit(selection.max_messages)
    return df


def transform(df: Any, cfg: ReplayConfig) -> Any:
    """Selected DLQ rows (the source's columns with ``entry_size``) → the rows to publish:
    ``topic`` (the target: ``--target``, else ``REAL_TOPIC``; null when neither), ``key``,
    ``value``, ``event_time``, ``properties`` (RECONSUMETIMES cleared, ORIGIN_MESSAGE_ID
    kept or set, REPLAY_COUNT + 1, REPLAYED_AT), ``producer_name``
    (``dlq-replay:<DLQ partition>:<ledger>:<selection digest>``), ``sequence_id`` (the DLQ
    message id packed as :func:`magnetar.client.deadletters.sequence_id` does), and the
    DLQ message to acknowledge (``ack_topic``, ``ack_message_id``, ``ack_entry_size``)."""
    from pyspark.sql import functions as F

    parts = F.split("message_id", ":")
    ledger, entry, batch = parts[0].cast("long"), parts[1].cast("long"), parts[3].cast("long")
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
        F.concat_ws(":", F.lit("dlq-replay"), dlq_partition, ledger.cast("string"), F.lit(cfg.selection.digest())).alias(
            "producer_name"
        ),
        F.when(in_range, sequence).otherwise(F.raise_error(F.concat(
            F.lit("message id too large to replay with deduplication: "), F.col("message_id")))).alias("sequence_id"),
        dlq_partition.alias("ack_topic"),
        F.col("message_id").alias("ack_message_id"),
        F.col("entry_size").alias("ack_entry_size"),
    )


def counts_by_target(df: Any) -> dict[str, int]:
    """Rows per target topic ("" for rows without one): what a dry run prints."""
    rows = df.groupBy("topic").count().collect()
    return {(r["topic"] or ""): int(r["count"]) for r in rows}
