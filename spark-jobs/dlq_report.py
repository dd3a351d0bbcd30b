"""DLQ report: what piled up in one dead letter topic (or every DLQ of a namespace), counted
by ``REAL_TOPIC``, failure reason and age, as a console table, JSON, CSV and a PNG chart.

    spark-submit dlq_report.py --dlq-topic persistent://public/default/orders-billing-DLQ \\
        --json report.json --csv report.csv --png report.png
    spark-submit dlq_report.py --topic orders --subscription billing      # <topic>-<sub>-DLQ
    spark-submit dlq_report.py --namespace public/default                 # every DLQ in it

A DLQ's count is what its subscription has not acknowledged yet (``--dlq-subscription``,
or its only one, as the gateway's DLQ tools choose; counted from the subscription's
acknowledged position, so messages acknowledged out of order above it still count), or
every retained message (``--all-retained``, or when the DLQ has no subscription).

Everything comes from arguments and the environment (``MAGNETAR_SERVICE_URL``,
``MAGNETAR_ADMIN_URL`` (the gateway), ``MAGNETAR_AUTH_TOKEN``); nothing is written but
the files asked for. Exit codes: 0 done, 1 a DLQ could not be read (partial failure) or the cluster failed,
2 bad arguments (a DLQ or namespace that does not exist included).

The counting is :func:`report` (pure: a DataFrame in, a DataFrame out); reading is
:func:`read_dlqs`, the outputs are :func:`format_table`, :func:`to_json`, :func:`to_csv`
and :func:`render_png` (pure functions of the collected rows).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import logging
import os
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from magnetar.common.letters import DEAD_LETTER_REASON, REAL_TOPIC, RECONSUMETIMES

EXIT_OK, EXIT_PARTIAL, EXIT_USAGE = 0, 1, 2
DEFAULT_SERVICE_URL = "magnetar://127.0.0.1:6660"
DEFAULT_ADMIN_URL = "http://127.0.0.1:8080"
TOKEN_OPTION = "auth.token"
"""The data source's option carrying the token."""

AGE_BUCKETS: tuple[tuple[str, float | None], ...] = (
    ("<1h", 3600.0), ("1-6h", 6 * 3600.0), ("6-24h", 24 * 3600.0), ("1-7d", 7 * 24 * 3600.0), (">7d", None),
)
"""Buckets by upper bound (exclusive), in seconds; the last one is open."""
BUCKET_NAMES = tuple(name for name, _ in AGE_BUCKETS)
BUCKET_COLOURS = ("#2ca02c", "#bcbd22", "#ff7f0e", "#d62728", "#6a3d9a")
"""Fresh green to old purple, one per bucket (the PNG's stacks)."""

MAX_REDELIVERIES = "max redeliveries"
RETRIES_EXHAUSTED = "retries exhausted"
UNKNOWN_REASON = "unknown"
MAX_REASON_CHARS = 100
NO_REAL_TOPIC = "(no REAL_TOPIC)"
COLUMNS = ("dlq_topic", "real_topic", "reason", "age_bucket", "messages", "oldest_publish_time")

log = logging.getLogger("dlq_report")


class UsageError(Exception):
    """Bad arguments, or a DLQ / namespace that does not exist (exit 2)."""


@dataclass(frozen=True)
class ReportConfig:
    """What to report on and where to put it."""

    dlq_topics: tuple[str, ...] = ()
    namespace: str | None = None
    service_url: str = DEFAULT_SERVICE_URL
    admin_url: str = DEFAULT_ADMIN_URL
    dlq_subscription: str | None = None
    """Count what this subscription has not acknowledged (default: the DLQ's only one)."""
    all_retained: bool = False
    """Count every retained message, acknowledged or not."""
    token: str | None = field(default=None, repr=False)
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    """Ages are counted up to this instant."""
    age_from: str = "publish"
    """``publish``: the DLQ copy's publish time (when it landed there); ``event``: the
    original's event time (the broker keeps it on the copy) when it has one."""
    json_path: Path | None = None
    csv_path: Path | None = None
    png_path: Path | None = None
    master: str | None = None
    """Spark master when not run by spark-submit (spark-submit's otherwise)."""


# -- the counting (pure) -------------------------------------------------------------------
def report(df: Any, cfg: ReportConfig) -> Any:
    """Count ``df``'s messages (the ``magnetar`` source's columns) by DLQ, ``REAL_TOPIC``,
    failure reason and age bucket.

    Reason: the broker's ``DEAD_LETTER_REASON`` reduced to ``max redeliveries`` (negative
    acks / ack timeouts) or ``retries exhausted`` (``reconsume_later``), another reason as
    written (cut at 100 characters); without the property, ``retries exhausted`` when the
    message carries ``RECONSUMETIMES``, ``max redeliveries`` when it has a ``REAL_TOPIC``
    (a client-side move, as Pulsar's clients make), else ``unknown``.

    Returns:
        A DataFrame of ``dlq_topic``, ``real_topic`` (null when missing), ``reason``,
        ``age_bucket``, ``messages`` and ``oldest_publish_time``, ordered by DLQ, topic,
        reason and bucket age.
    """
    from pyspark.sql import functions as F

    props = F.col("properties")
    written = F.trim(props.getItem(DEAD_LETTER_REASON))
    reason = (
        F.when(written.rlike(r"^redelivery count \d+ reached max_redeliver_count"), F.lit(MAX_REDELIVERIES))
        .when(written.rlike(r"^reconsume_later after \d+ retries"), F.lit(RETRIES_EXHAUSTED))
        .when(written != "", F.substring(written, 1, MAX_REASON_CHARS))
        .when(props.getItem(RECONSUMETIMES).isNotNull(), F.lit(RETRIES_EXHAUSTED))
        .when(F.coalesce(props.getItem(REAL_TOPIC), F.lit("")) != "", F.lit(MAX_REDELIVERIES))
        .otherwise(F.lit(UNKNOWN_REASON))
    )
    published = F.col("publish_time")
    if cfg.age_from == "event":
        event = F.col("event_time")
        when = F.when(event.isNotNull() & (event.cast("double") > 0), event).otherwise(published)
    else:
        when = published
    age_s = F.lit(cfg.now.timestamp()) - when.cast("double")
    bucket = F.lit(BUCKET_NAMES[-1])
    order = F.lit(len(AGE_BUCKETS) - 1)
    for index in reversed(range(len(AGE_BUCKETS) - 1)):  # innermost: the youngest bucket
        bound = AGE_BUCKETS[index][1]
        bucket = F.when(age_s < bound, F.lit(BUCKET_NAMES[index])).otherwise(bucket)
        order = F.when(age_s < bound, F.lit(index)).otherwise(order)
    real = F.trim(props.getItem(REAL_TOPIC))
    counted = df.select(
        F.regexp_replace("topic", r"-partition-(0|[1-9][0-9]*)$", "").alias("dlq_topic"),
        F.when(real != "", real).alias("real_topic"),
        reason.alias("reason"),
        bucket.alias("age_bucket"),
        order.alias("_bucket_order"),
        published.alias("publish_time"),
    )
    return (
        counted.groupBy("dlq_topic", "real_topic", "reason", "age_bucket", "_bucket_order")
        .agg(F.count(F.lit(1)).alias("messages"), F.min("publish_time").alias("oldest_publish_time"))
        .orderBy(F.col("dlq_topic"), F.col("real_topic").asc_nulls_last(), F.col("reason"), F.col("_bucket_order"))
        .select(*COLUMNS)
    )


# -- the outputs (pure functions of the collected rows) ------------------------------------
def collect_rows(result: Any) -> list[dict[str, Any]]:
    """:func:`report`'s rows as plain dicts (timestamps as ISO 8601 UTC strings)."""
    rows = []
    for row in result.collect():
        item = row.asDict()
        item["messages"] = int(item["messages"])
        oldest = item["oldest_publish_time"]
        item["oldest_publish_time"] = _iso(oldest) if oldest is not None else None
        rows.append(item)
    return rows


def _iso(moment: datetime) -> str:
    if moment.tzinfo is None:  # the session's time zone is UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def totals(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The rows summed by DLQ, ``REAL_TOPIC`` (``(no REAL_TOPIC)`` for none), reason and
    age bucket (every bucket present, in age order)."""
    by: dict[str, Counter[str]] = {k: Counter() for k in ("dlq", "real_topic", "reason", "age_bucket")}
    for row in rows:
        n = row["messages"]
        by["dlq"][row["dlq_topic"]] += n
        by["real_topic"][row["real_topic"] or NO_REAL_TOPIC] += n
        by["reason"][row["reason"]] += n
        by["age_bucket"][row["age_bucket"]] += n
    return {
        "messages": sum(by["dlq"].values()),
        "byDlq": dict(sorted(by["dlq"].items())),
        "byRealTopic": dict(by["real_topic"].most_common()),
        "byReason": dict(by["reason"].most_common()),
        "byAgeBucket": {name: by["age_bucket"][name] for name in BUCKET_NAMES},
    }


def to_json(rows: Sequence[Mapping[str, Any]], cfg: ReportConfig, dlqs: Sequence[str],
            failed: Mapping[str, str] | None = None, subscriptions: Mapping[str, str | None] | None = None) -> str:
    """The report as JSON: when, which DLQs (through which subscription; null: every
    retained message) and which failed, the totals and the rows."""
    doc = {
        "generatedAt": _iso(cfg.now),
        "ageFrom": cfg.age_from,
        "ageBuckets": list(BUCKET_NAMES),
        "dlqs": list(dlqs),
        "subscriptions": {d: (subscriptions or {}).get(d) for d in dlqs},
        "failedDlqs": dict(failed or {}),
        **totals(rows),
        "rows": [
            {"dlqTopic": r["dlq_topic"], "realTopic": r["real_topic"], "reason": r["reason"],
             "ageBucket": r["age_bucket"], "messages": r["messages"], "oldestPublishTime": r["oldest_publish_time"]}
            for r in rows
        ],
    }
    return json.dumps(doc, indent=2) + "\n"


def to_csv(rows: Iterable[Mapping[str, Any]]) -> str:
    """One line per (DLQ, ``REAL_TOPIC``, reason, age bucket), with a header."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow(["" if row[c] is None else row[c] for c in COLUMNS])
    return out.getvalue()


def _pivot(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], list[int]]:
    table: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0] * len(AGE_BUCKETS))
    for row in rows:
        key = (row["dlq_topic"], row["real_topic"] or NO_REAL_TOPIC, row["reason"])
        table[key][BUCKET_NAMES.index(row["age_bucket"])] += row["messages"]
    return table


def format_table(rows: Sequence[Mapping[str, Any]], cfg: ReportConfig, dlqs: Sequence[str]) -> str:
    """A console table: one line per (DLQ, ``REAL_TOPIC``, reason), a column per age
    bucket, and a total line."""
    summed = totals(rows)
    head = (f"DLQ report at {_iso(cfg.now)}: {summed['messages']} messages in {len(dlqs)} "
            f"DLQ{'s' if len(dlqs) != 1 else ''} (ages from the {cfg.age_from} time)")
    if not rows:
        return head + "\n(no messages)\n"
    header = ("DLQ", "REAL_TOPIC", "REASON", *BUCKET_NAMES, "TOTAL")
    lines: list[tuple[str, ...]] = [header]
    for (dlq, real, reason), counts in _pivot(rows).items():
        lines.append((_short(dlq), _short(real), reason, *map(str, counts), str(sum(counts))))
    lines.append(("total", "", "", *(str(summed["byAgeBucket"][b]) for b in BUCKET_NAMES), str(summed["messages"])))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text_cols = 3

    def fmt(line: tuple[str, ...]) -> str:
        cells = [c.ljust(w) if i < text_cols else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True))]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * w for w in widths)
    body = [fmt(line) for line in lines]
    return "\n".join([head, body[0], rule, *body[1:-1], rule, body[-1]]) + "\n"


def _short(topic: str) -> str:
    return topic.removeprefix("persistent://")


def render_png(rows: Sequence[Mapping[str, Any]], cfg: ReportConfig, path: Path, *,
               width_px: int = 1200, height_px: int = 700, top: int = 12) -> None:
    """A chart an operator can open: messages per ``REAL_TOPIC`` (left) and per failure
    reason (right), as horizontal bars stacked by age bucket, ``width_px`` × ``height_px``.
    Beyond the ``top`` largest, topics are summed in one bar."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    dpi = 100
    fig = Figure(figsize=(width_px / dpi, height_px / dpi), dpi=dpi)
    summed = totals(rows)
    fig.suptitle(f"Dead letters: {summed['messages']} messages in {len(summed['byDlq'])} DLQ(s), "
                 f"{_iso(cfg.now)} (age from the {cfg.age_from} time)", fontsize=12)
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    _stacked_bars(left, _by_bucket(rows, lambda r: _short(r["real_topic"] or NO_REAL_TOPIC), top), "by REAL_TOPIC")
    _stacked_bars(right, _by_bucket(rows, lambda r: r["reason"], top), "by failure reason")
    if not rows:
        for axes in (left, right):
            axes.text(0.5, 0.5, "no messages", ha="center", va="center", transform=axes.transAxes)
    handles = [matplotlib.patches.Patch(color=c, label=b) for b, c in zip(BUCKET_NAMES, BUCKET_COLOURS, strict=True)]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), title="age", frameon=False)
    fig.subplots_adjust(left=0.2, right=0.97, top=0.88, bottom=0.18, wspace=0.55)
    fig.savefig(path, format="png", dpi=dpi)


def _by_bucket(rows: Iterable[Mapping[str, Any]], label: Callable[[Mapping[str, Any]], str],
               top: int) -> dict[str, list[int]]:
    counts: dict[str, list[int]] = defaultdict(lambda: [0] * len(AGE_BUCKETS))
    for row in rows:
        counts[_cut(label(row))][BUCKET_NAMES.index(row["age_bucket"])] += row["messages"]
    ranked = sorted(counts.items(), key=lambda kv: (-sum(kv[1]), kv[0]))
    if len(ranked) <= top:
        return dict(ranked)
    kept, rest = ranked[: top - 1], ranked[top - 1:]
    other = [sum(c[i] for _, c in rest) for i in range(len(AGE_BUCKETS))]
    return {**dict(kept), f"{len(rest)} others": other}


def _cut(text: str, limit: int = 38) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def _stacked_bars(axes: Any, data: Mapping[str, Sequence[int]], title: str) -> None:
    labels = list(data)[::-1]  # largest on top
    start = [0] * len(labels)
    for index, colour in enumerate(BUCKET_COLOURS):
        values = [data[label][index] for label in labels]
        axes.barh(labels, values, left=start, color=colour, height=0.7)
        start = [s + v for s, v in zip(start, values, strict=True)]
    for y, total in enumerate(start):
        axes.text(total, y, f" {total}", va="center", fontsize=8)
    axes.set_title(title)
    axes.set_xlabel("messages")
    axes.tick_params(axis="y", labelsize=8)
    if labels:
        axes.set_xlim(0, max(start) * 1.15 or 1)


# -- reading -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """One DLQ and the subscription whose unacknowledged messages are counted (None: every
    retained message)."""

    dlq: str
    subscription: str | None


def read_dlqs(spark: Any, cfg: ReportConfig, targets: Sequence[Target]) -> Any:
    """The messages of ``targets`` through the ``magnetar`` data source: one read per
    subscription, each from that subscription's acknowledged position on."""
    by_subscription: dict[str | None, list[str]] = defaultdict(list)
    for target in targets:
        by_subscription[target.subscription].append(target.dlq)
    frames = []
    for subscription, dlqs in by_subscription.items():
        reader = (spark.read.format("magnetar").option("service.url", cfg.service_url)
                  .option("admin.url", cfg.admin_url).option("topics", ",".join(dlqs))
                  .option("startingOffsets", "earliest"))
        if subscription:
            reader = reader.option("startAtSubscription", subscription)
        if cfg.token:
            reader = reader.option(TOKEN_OPTION, cfg.token)
        frames.append(reader.load())
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


async def resolve_dlqs(cfg: ReportConfig) -> list[Target]:
    """The DLQs to report on (checked to exist) and the subscription of each, asked of the
    gateway: ``--dlq-subscription``, else the DLQ's only subscription, else none (every
    retained message); with ``--all-retained`` none.

    Raises:
        UsageError: a DLQ or the namespace does not exist; a DLQ with several
            subscriptions and none chosen.
    """
    from magnetar.client.deadletters import is_dlq_topic
    from magnetar.client.rest_admin import RestAdmin
    from magnetar.common.errors import NotFound
    from magnetar.common.names import TopicName

    async with RestAdmin(cfg.admin_url, token=cfg.token) as admin:
        if cfg.namespace:
            try:
                dlqs = [t for t in await admin.topics(cfg.namespace) if is_dlq_topic(t)]
            except NotFound as exc:
                raise UsageError(f"the namespace {cfg.namespace} does not exist") from exc
        else:
            dlqs = list(dict.fromkeys(str(TopicName.parse(t)) for t in cfg.dlq_topics))
        targets = []
        for dlq in dlqs:
            try:
                subscriptions = await admin.subscriptions(dlq)
            except NotFound as exc:
                raise UsageError(f"the DLQ {dlq} does not exist") from exc
            if cfg.all_retained:
                targets.append(Target(dlq, None))
            elif cfg.dlq_subscription:
                if cfg.dlq_subscription not in subscriptions:
                    raise UsageError(f"the DLQ {dlq} has no subscription {cfg.dlq_subscription!r}")
                targets.append(Target(dlq, cfg.dlq_subscription))
            elif len(subscriptions) > 1:
                raise UsageError(f"the DLQ {dlq} has several subscriptions ({', '.join(subscriptions)}): "
                                 "choose one with --dlq-subscription, or --all-retained")
            else:
                targets.append(Target(dlq, subscriptions[0] if subscriptions else None))
        return targets


# -- the command line ----------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None = None, environ: Mapping[str, str] = os.environ) -> ReportConfig:
    """Arguments (and ``MAGNETAR_*`` environment defaults) to a :class:`ReportConfig`.

    Raises:
        UsageError: contradictory or missing arguments, an output path in a missing folder.
    """
    parser = _Parser(prog="dlq_report.py", description="Count a DLQ's messages by REAL_TOPIC, failure reason and age.")
    which = parser.add_argument_group("which DLQ (one of)")
    which.add_argument("--dlq-topic", action="append", default=[], metavar="TOPIC",
                       help="a dead letter topic (repeatable)")
    which.add_argument("--topic", help="with --subscription: the DLQ <topic>-<subscription>-DLQ")
    which.add_argument("--subscription")
    which.add_argument("--namespace", help="every DLQ (topic named *-DLQ) of tenant/namespace")
    parser.add_argument("--service-url", default=environ.get("MAGNETAR_SERVICE_URL", DEFAULT_SERVICE_URL),
                        help="broker service URL (default: $MAGNETAR_SERVICE_URL or %(default)s)")
    parser.add_argument("--admin-url", default=environ.get("MAGNETAR_ADMIN_URL") or DEFAULT_ADMIN_URL,
                        help="the gateway (default: $MAGNETAR_ADMIN_URL or %(default)s)")
    parser.add_argument("--dlq-subscription", metavar="NAME",
                        help="count what this DLQ subscription has not acknowledged (default: the DLQ's only one)")
    parser.add_argument("--all-retained", action="store_true",
                        help="count every retained message, acknowledged or not")
    parser.add_argument("--auth-token", default=None, help="token (default: $MAGNETAR_AUTH_TOKEN)")
    parser.add_argument("--age-from", choices=("publish", "event"), default="publish",
                        help="age from the DLQ copy's publish time (default) or the original's event time")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the report as JSON")
    parser.add_argument("--csv", type=Path, metavar="FILE", help="write the rows as CSV")
    parser.add_argument("--png", type=Path, metavar="FILE", help="draw the chart as a PNG")
    parser.add_argument("--master", help="Spark master when not run by spark-submit (e.g. local[2])")
    args = parser.parse_args(argv)

    chosen = [bool(args.dlq_topic), bool(args.topic or args.subscription), bool(args.namespace)]
    if sum(chosen) != 1:
        raise UsageError("give one of --dlq-topic, --topic with --subscription, or --namespace")
    if bool(args.topic) != bool(args.subscription):
        raise UsageError("--topic and --subscription go together")
    if args.all_retained and args.dlq_subscription:
        raise UsageError("--all-retained counts every message: no --dlq-subscription with it")
    dlqs = tuple(args.dlq_topic) or ((f"{args.topic}-{args.subscription}-DLQ",) if args.topic else ())
    for path in (args.json, args.csv, args.png):
        if path is not None and not path.resolve().parent.is_dir():
            raise UsageError(f"cannot write {path}: {path.resolve().parent} is not a folder")
    try:
        from magnetar.common.names import NamespaceName, TopicName

        for dlq in dlqs:
            TopicName.parse(dlq)
        if args.namespace:
            NamespaceName.parse(args.namespace)
    except Exception as exc:  # InvalidTopicName / InvalidArgument
        raise UsageError(str(exc)) from exc
    token = args.auth_token or environ.get("MAGNETAR_AUTH_TOKEN", "").strip() or None
    return ReportConfig(dlq_topics=dlqs, namespace=args.namespace, service_url=args.service_url,
                        admin_url=args.admin_url, token=token, age_from=args.age_from,
                        dlq_subscription=args.dlq_subscription, all_retained=args.all_retained,
                        json_path=args.json, csv_path=args.csv, png_path=args.png, master=args.master)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, no usage dump; exit 2 in main
        raise UsageError(message)


def _session(master: str | None = None) -> Any:
    """spark-submit's session (its master and conf), ``master`` when given, local[*] when
    run with python."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("magnetar-dlq-report")
    if master:
        builder = builder.master(master)
    spark = (builder.config("spark.sql.session.timeZone", "UTC").config("spark.ui.showConsoleProgress", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    from magnetar_spark import register

    register(spark)
    return spark


def run(cfg: ReportConfig, spark_factory: Callable[[], Any] | None = None,
        out: Callable[[str], None] = print) -> int:
    """Resolve the DLQs, count, write the outputs; the exit code."""
    targets = asyncio.run(resolve_dlqs(cfg))
    for target in targets:
        log.info("DLQ %s: %s", target.dlq, f"what {target.subscription!r} has not acknowledged"
                 if target.subscription else "every retained message")
    rows: list[dict[str, Any]] = []
    failed: dict[str, str] = {}
    if targets:
        spark = spark_factory() if spark_factory else _session(cfg.master)
        try:
            rows = collect_rows(report(read_dlqs(spark, cfg, targets), cfg))
        except Exception as exc:
            if len(targets) == 1:
                raise
            log.warning("reading the %d DLQs together failed (%s); reading them one by one", len(targets), _one_line(exc))
            for target in targets:  # find the one that fails, report the others
                try:
                    rows.extend(collect_rows(report(read_dlqs(spark, cfg, [target]), cfg)))
                except Exception as one:
                    failed[target.dlq] = _one_line(one)
                    log.error("cannot read %s: %s", target.dlq, failed[target.dlq])
    read = [t.dlq for t in targets if t.dlq not in failed]
    out(format_table(rows, cfg, read).rstrip("\n"))
    if cfg.json_path:
        cfg.json_path.write_text(to_json(rows, cfg, read, failed, {t.dlq: t.subscription for t in targets}))
    if cfg.csv_path:
        cfg.csv_path.write_text(to_csv(rows))
    if cfg.png_path:
        render_png(rows, cfg, cfg.png_path)
    summed = totals(rows)
    out(f"summary: {summed['messages']} messages in {len(read)} DLQ(s) read, {len(failed)} failed"
        + "".join(f"; wrote {p}" for p in (cfg.json_path, cfg.csv_path, cfg.png_path) if p))
    return EXIT_PARTIAL if failed else EXIT_OK


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for noisy in ("httpx", "py4j"):  # a line per HTTP request, per py4j connection
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        cfg = parse_args(argv)
        return run(cfg)
    except UsageError as exc:
        print(f"dlq_report: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("dlq_report: interrupted", file=sys.stderr)
        return EXIT_PARTIAL
    except Exception as exc:  # one readable line; the cause is in Spark's log above
        print(f"dlq_report: failed: {_one_line(exc)}", file=sys.stderr)
        return EXIT_PARTIAL


if __name__ == "__main__":
    sys.exit(main())
