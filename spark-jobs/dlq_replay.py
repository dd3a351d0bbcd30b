"""Replay dead letters back to their real topics, exactly once, with Spark.

    spark-submit --master local[2] spark-jobs/dlq_replay.py \\
        --service-url magnetar://localhost:6660 --admin-url http://localhost:8080 \\
        --topic persistent://public/default/orders --subscription billing --older-than 1h

Reads each DLQ (every partition, split by ledger) from its subscription's position,
selects (``--older-than``, ``--newer-than``, ``--where``, ``--max-messages``),
optionally transforms (``--transform module:function``, DataFrame -> DataFrame), and
republishes each message to its ``REAL_TOPIC`` (or ``--target``) with deduplicating
producers, then acknowledges it on the DLQ's subscription once the republish is
confirmed. Killed at any point and run again with the same arguments, it moves every
selected message once (docs/spark.md, "Exactly once").

Exit codes: 0 everything selected was moved; 1 some messages failed or were left
(no REAL_TOPIC, a target that does not exist, a task failure); 2 bad arguments (also a
DLQ that does not exist, a transform that cannot be loaded or returns the wrong schema).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from magnetar_spark.replay import (  # noqa: E402
    DEFAULT_SUBSCRIPTION,
    ReplayConfig,
    Selection,
    fused,
    parse_duration_ms,
)


class BadArguments(Exception):
    """Exit 2 with this one line."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(prog="dlq_replay.py", description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--service-url", default=env("MAGNETAR_SERVICE_URL", "magnetar://localhost:6660"),
                   help="broker URL (env MAGNETAR_SERVICE_URL)")
    p.add_argument("--admin-url", default=env("MAGNETAR_ADMIN_URL", "http://localhost:8080"),
                   help="gateway URL (env MAGNETAR_ADMIN_URL)")
    p.add_argument("--auth-token", default=env("MAGNETAR_AUTH_TOKEN"), help="token (env MAGNETAR_AUTH_TOKEN)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--dlq-topic", help="the DLQ topic")
    which.add_argument("--topic", help="the original topic (with --subscription): DLQ <topic>-<subscription>-DLQ")
    which.add_argument("--namespace", help="every DLQ topic (*-DLQ) of this tenant/namespace")
    p.add_argument("--subscription", help="the consumer's subscription whose DLQ to replay (with --topic)")
    p.add_argument("--subscription-name",
                   help="the DLQ subscription to read and acknowledge through (default: the DLQ's only "
                        "subscription, its <sub>-DLQ-sub, else a durable 'dlq-replay')")
    p.add_argument("--older-than", help="only messages that reached the DLQ longer ago than this (30m, 2h, 7d)")
    p.add_argument("--newer-than", help="only messages that reached the DLQ within this (30m, 2h, 7d)")
    p.add_argument("--where", help="a Spark SQL condition on the columns and properties['X']")
    p.add_argument("--max-messages", type=int, help="at most this many (the oldest first)")
    p.add_argument("--transform", help="module:function taking and returning a DataFrame of DLQ rows")
    p.add_argument("--target", help="publish every message to this topic instead of its REAL_TOPIC")
    p.add_argument("--dry-run", action="store_true", help="print what would move, per target topic; change nothing")
    p.add_argument("--master", help="Spark master when not run by spark-submit (e.g. local[2])")
    p.add_argument("--json", action="store_true", help="also print the summary as one JSON line")
    p.add_argument("--report-topic", default=env("MAGNETAR_DLQ_REPLAY_REPORT_TOPIC") or None,
                   help="also publish the run's report (one JSON message) to this topic, where the web console "
                        "shows the last runs (env MAGNETAR_DLQ_REPLAY_REPORT_TOPIC)")
    args = p.parse_args(argv)
    if args.topic and not args.subscription:
        p.error("--topic needs --subscription (the DLQ is <topic>-<subscription>-DLQ)")
    if args.subscription and not args.topic:
        p.error("--subscription goes with --topic")
    for name in ("older_than", "newer_than"):
        value = getattr(args, name)
        if value is not None:
            try:
                parse_duration_ms(value)
            except ValueError as exc:
                p.error(f"--{name.replace('_', '-')}: {exc}")
    if args.max_messages is not None and args.max_messages < 1:
        p.error("--max-messages must be at least 1")
    if args.transform is not None and ":" not in args.transform:
        p.error("--transform is module:function")
    return args


@dataclass
class Summary:
    dlqs: list[str] = field(default_factory=list)
    moved: int = 0
    already_there: int = 0
    skipped_by_filter: int = 0
    no_real_topic: int = 0
    missing_target: Counter[str] = field(default_factory=Counter)
    failed: int = 0
    by_target: Counter[str] = field(default_factory=Counter)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed or self.no_real_topic or self.missing_target else 0

    def lines(self) -> list[str]:
        out = [
            f"DLQs: {', '.join(self.dlqs)}",
            f"moved: {self.moved} ({self.already_there} of them stored by an earlier run, acknowledged now)",
            f"skipped by filter: {self.skipped_by_filter}",
            f"skipped, no REAL_TOPIC: {self.no_real_topic}",
            f"failed: {self.failed + sum(self.missing_target.values())}",
        ]
        out += [f"  target does not exist: {t}: {n}" for t, n in sorted(self.missing_target.items())]
        out += [f"  -> {t}: {n}" for t, n in sorted(self.by_target.items())]
        return out


def resolve_dlqs(args: argparse.Namespace, admin_call: Any) -> list[str]:
    from magnetar.client.deadletters import is_dlq_topic
    from magnetar.common.errors import InvalidArgument, InvalidTopicName
    from magnetar.common.names import TopicName

    try:
        if args.dlq_topic:
            return [str(TopicName.parse(args.dlq_topic))]
        if args.topic:
            name = TopicName.parse(args.topic).partitioned_topic_name
            return [str(TopicName.parse(f"{name}-{args.subscription}-DLQ"))]
    except (InvalidTopicName, InvalidArgument) as exc:
        raise BadArguments(str(exc)) from None
    topics = admin_call(lambda admin: admin.topics(args.namespace))
    dlqs = sorted(t for t in topics if is_dlq_topic(t))
    if not dlqs:
        raise BadArguments(f"namespace {args.namespace} has no DLQ topic (*-DLQ)")
    return dlqs


async def _choose_subscription(admin: Any, dlq: str, requested: str | None, dry_run: bool) -> tuple[str, bool]:
    """The subscription to read through, and whether it exists."""
    from magnetar_spark.gateway import partitions

    from magnetar.common.message_id import MessageId

    parts = await partitions(admin, dlq)  # NotFound: no such DLQ
    subs = await admin.subscriptions(parts[0][0]) if parts[0][1] >= 0 else await admin.subscriptions(dlq)
    if requested:
        chosen = requested
    else:
        initial = [s for s in subs if s.endswith("-DLQ-sub")]
        if len(initial) == 1:
            chosen = initial[0]
        elif len(subs) == 1:
            chosen = subs[0]
        elif not subs:
            chosen = DEFAULT_SUBSCRIPTION
        else:
            raise BadArguments(f"{dlq} has several subscriptions ({', '.join(subs)}): name one with --subscription-name")
    exists = chosen in subs
    if not exists and not dry_run:
        await admin.create_subscription(dlq, chosen, MessageId.earliest)
        exists = True
    return chosen, exists


async def _exists(admin: Any, topic: str) -> bool:
    from magnetar_spark.gateway import partitions

    from magnetar.common.errors import NotFound

    try:
        await partitions(admin, topic)
    except NotFound:
        return False
    return True


def load_transform(spec: str) -> Any:
    module_name, _, function = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(module_name), function)
    except (ImportError, AttributeError) as exc:
        raise BadArguments(f"--transform {spec}: cannot load it ({exc})") from None
    if not callable(fn):
        raise BadArguments(f"--transform {spec}: not a function")
    return fn


def apply_transform(df: Any, spec: str) -> Any:
    """The user's transform, checked: it must return a DataFrame with the DLQ columns
    (same names and types); extra columns are dropped."""
    fn = load_transform(spec)
    try:
        out = fn(df)
    except Exception as exc:
        raise BadArguments(f"--transform {spec} raised {type(exc).__name__}: {exc}") from None
    if not hasattr(out, "schema"):
        raise BadArguments(f"--transform {spec} returned {type(out).__name__}, not a DataFrame")
    have = {f.name: f.dataType for f in out.schema.fields}
    wrong = [f"{f.name} {f.dataType.simpleString()}" for f in df.schema.fields if have.get(f.name) != f.dataType]
    if wrong:
        raise BadArguments(f"--transform {spec} returned the wrong schema: it lacks or changed {', '.join(wrong)}")
    return out.select(*df.columns)


def run(args: argparse.Namespace, spark: Any) -> Summary:
    from magnetar_spark import gateway
    from magnetar_spark.replay import counts_by_target, select, transform
    from magnetar_spark.writing import STATS_DDL, WriterOptions
    from pyspark.sql import functions as F

    summary = Summary()
    t0 = time.monotonic()

    def admin_call(fn: Any) -> Any:
        return gateway.call(args.admin_url, args.auth_token, fn)

    from magnetar.common.errors import NotFound

    dlqs = resolve_dlqs(args, admin_call)
    summary.dlqs = dlqs
    selection = Selection(args.older_than, args.newer_than, args.where, args.max_messages, args.transform, args.target)
    cfg = ReplayConfig(selection, int(time.time() * 1000))
    if not args.dry_run and fused(selection):
        return _run_fused(args, spark, dlqs, cfg, summary, t0, admin_call)
    frames = []
    for dlq in dlqs:
        try:
            sub, exists = admin_call(lambda admin, d=dlq: _choose_subscription(admin, d, args.subscription_name, args.dry_run))
        except NotFound:
            raise BadArguments(f"DLQ {dlq} does not exist") from None
        print(f"dlq-replay: {dlq} through subscription {sub!r}", flush=True)
        reader = (spark.read.format("magnetar").option("service.url", args.service_url)
                  .option("admin.url", args.admin_url).option("topic", dlq).option("includeEntrySize", "true")
                  .option("includeChunkIds", "true"))  # a chunked dead letter is acknowledged chunk by chunk
        if args.auth_token:
            reader = reader.option("auth.token", args.auth_token)
        if exists:
            reader = reader.option("startAtSubscription", sub)
        frames.append((dlq, sub, reader.load()))
    summary.timings["plan_s"] = time.monotonic() - t0

    read_total = spark.sparkContext.accumulator(0) if selection.filtered else None
    selected_frames = []
    for _dlq, _sub, df in frames:
        if read_total is not None:
            df = df.mapInArrow(_counting(read_total), df.schema)
        df = select(df, selection, cfg.now_ms)
        if args.transform:
            df = apply_transform(df, args.transform)
        selected_frames.append(df)

    t1 = time.monotonic()
    outs = []
    for (_dlq, sub, _), df in zip(frames, selected_frames, strict=True):
        out = transform(df, cfg).withColumn("ack_subscription", F.lit(sub))
        if args.transform:  # the user's transform may have moved rows: one task per producer name, in order
            out = out.repartition(max(2, spark.sparkContext.defaultParallelism), "producer_name") \
                     .sortWithinPartitions("producer_name", "sequence_id")
        outs.append(out)
    out = outs[0]
    for more in outs[1:]:
        out = out.unionByName(more)  # partitions side by side: no shuffle
    if args.dry_run:
        counts = counts_by_target(out)
        for target, n in sorted(counts.items()):
            if not target:
                summary.no_real_topic += n
            elif not admin_call(lambda admin, t=target: _exists(admin, t)):
                summary.missing_target[target] += n
            else:
                summary.by_target[target] += n
                summary.moved += n
    else:
        opts = WriterOptions(
            service_url=args.service_url, topic=None, token=args.auth_token, producer_prefix="dlq-replay",
            ack_subscription="", admin_url=args.admin_url, skip_without_topic=True,
            fail_after=int(os.environ["DLQ_REPLAY_FAIL_TASK_AFTER"]) if os.environ.get("DLQ_REPLAY_FAIL_TASK_AFTER") else None,
            fail_marker=os.environ.get("DLQ_REPLAY_FAIL_MARKER") or None,
        )
        stats = out.mapInArrow(_publisher(opts), STATS_DDL).groupBy("topic").agg(
            *(F.sum(c).alias(c) for c in ("sent", "duplicates", "acked", "failed", "no_topic", "confirmed", "missing",
                                            "publish_s", "ack_s"))
        ).collect()
        for r in stats:
            summary.moved += int(r["confirmed"])
            summary.already_there += int(r["duplicates"])
            summary.no_real_topic += int(r["no_topic"])
            summary.failed += int(r["failed"])
            if r["topic"] and r["confirmed"]:
                summary.by_target[r["topic"]] += int(r["confirmed"])
            if r["topic"] and r["missing"]:
                summary.missing_target[r["topic"]] += int(r["missing"])
            summary.timings["publish_task_s"] = summary.timings.get("publish_task_s", 0.0) + float(r["publish_s"])
            summary.timings["ack_task_s"] = summary.timings.get("ack_task_s", 0.0) + float(r["ack_s"])
    summary.timings["run_s"] = time.monotonic() - t1
    if read_total is not None:
        handled = summary.moved + summary.no_real_topic + sum(summary.missing_target.values()) + summary.failed
        summary.skipped_by_filter = max(0, read_total.value - handled)
    return summary


def _writer_options(args: argparse.Namespace) -> Any:
    from magnetar_spark.writing import WriterOptions

    return WriterOptions(
        service_url=args.service_url, topic=None, token=args.auth_token, producer_prefix="dlq-replay",
        ack_subscription="", admin_url=args.admin_url, skip_without_topic=True,
        fail_after=int(os.environ["DLQ_REPLAY_FAIL_TASK_AFTER"]) if os.environ.get("DLQ_REPLAY_FAIL_TASK_AFTER") else None,
        fail_marker=os.environ.get("DLQ_REPLAY_FAIL_MARKER") or None,
    )


def _add_stats(summary: Summary, stats: Any) -> None:
    """One task's ``writing.PublishStats`` into the summary."""
    summary.moved += stats.sent + stats.duplicates
    summary.already_there += stats.duplicates
    summary.no_real_topic += stats.no_topic
    summary.failed += stats.failed
    summary.by_target.update(stats.by_topic)
    summary.missing_target.update(stats.missing)
    summary.timings["publish_task_s"] = summary.timings.get("publish_task_s", 0.0) + stats.publish_s
    summary.timings["ack_task_s"] = summary.timings.get("ack_task_s", 0.0) + stats.ack_s


def _run_fused(args: argparse.Namespace, spark: Any, dlqs: list[str], cfg: ReplayConfig, summary: Summary,
               t0: float, admin_call: Any) -> Summary:
    """No transform, no ``--where``, no ``--max-messages``: one Spark task per slice (DLQ
    partition and ledger, as the source plans them) reads it with the SDK and publishes
    and acknowledges it in the same Python worker (``replay.fused_task``): no rows through
    the JVM. Same producer names, sequence ids, skip rule and ack-after-receipt as the
    Spark path; Spark still schedules and retries the tasks."""
    from magnetar_spark import gateway, positions
    from magnetar_spark.options import SourceOptions
    from magnetar_spark.replay import fused_task

    from magnetar.common.errors import NotFound

    work = []
    for dlq in dlqs:
        try:
            sub, _exists = admin_call(lambda admin, d=dlq: _choose_subscription(admin, d, args.subscription_name, False))
        except NotFound:
            raise BadArguments(f"DLQ {dlq} does not exist") from None
        print(f"dlq-replay: {dlq} through subscription {sub!r}", flush=True)
        options = {"service.url": args.service_url, "admin.url": args.admin_url, "topic": dlq,
                   "includeEntrySize": "true", "startAtSubscription": sub}
        if args.auth_token:
            options["auth.token"] = args.auth_token
        opts = SourceOptions.parse(options)
        layouts = gateway.call(opts.admin_url, opts.token, lambda admin, o=opts, s=sub: gateway.layouts(admin, o.topics, s))
        work += [(opts, spec, sub) for spec in positions.plan(layouts, opts.starting, opts.ending)]
    summary.timings["plan_s"] = time.monotonic() - t0
    t1 = time.monotonic()
    wopts = _writer_options(args)
    if work:
        results = spark.sparkContext.parallelize(work, len(work)).map(
            lambda w: fused_task(w[0], w[1], w[2], cfg, wopts)).collect()
        read = 0
        for r in results:
            _add_stats(summary, r["stats"])
            read += r["read"]
        if cfg.selection.filtered:
            handled = summary.moved + summary.no_real_topic + sum(summary.missing_target.values()) + summary.failed
            summary.skipped_by_filter = max(0, read - handled)
    summary.timings["run_s"] = time.monotonic() - t1
    return summary


def _counting(acc: Any) -> Any:
    def count(batches: Any) -> Any:
        for batch in batches:
            acc.add(batch.num_rows)
            yield batch

    return count


def _publisher(opts: Any) -> Any:
    def run_task(batches: Any) -> Any:
        from magnetar_spark.writing import publish, stats_batches

        yield from stats_batches(publish(opts, batches))

    return run_task


def session(args: argparse.Namespace) -> Any:
    from magnetar_spark.session import local_session

    if args.master:
        return local_session("magnetar-dlq-replay", master=args.master)
    import magnetar_spark
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("magnetar-dlq-replay").getOrCreate()
    magnetar_spark.register(spark)
    return spark


def run_report(args: argparse.Namespace, summary: Summary | None, exit_code: int, started_ms: int, finished_ms: int,
               error: str | None = None) -> dict[str, Any]:
    """One run as the report topic keeps it (docs/spark.md, "Run reports"): what was asked,
    when, how it ended and, when it ran, its summary."""
    doc: dict[str, Any] = {
        "job": "dlq-replay", "started": started_ms, "finished": finished_ms, "exit_code": exit_code,
        "dry_run": bool(args.dry_run), "error": error,
        "asked": {k: getattr(args, k) for k in ("dlq_topic", "topic", "subscription", "namespace", "older_than",
                                                "newer_than", "where", "max_messages", "target") if getattr(args, k)},
    }
    if summary is not None:
        doc |= {"dlqs": summary.dlqs, "moved": summary.moved, "already_there": summary.already_there,
                "skipped_by_filter": summary.skipped_by_filter, "no_real_topic": summary.no_real_topic,
                "missing_target": dict(summary.missing_target), "failed": summary.failed,
                "by_target": dict(summary.by_target)}
    return doc


def publish_report(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    """Publish ``doc`` to ``--report-topic`` (none: nothing). A report that cannot be
    published is said on stderr; the run's exit code stays the replay's."""
    if not args.report_topic:
        return
    import magnetar.asyncio as mg

    async def send() -> None:
        auth = mg.AuthenticationToken(args.auth_token) if args.auth_token else None
        async with mg.Client(args.service_url, authentication=auth) as client:
            producer = await client.create_producer(args.report_topic)
            try:
                await producer.send(json.dumps(doc).encode(), properties={"job": "dlq-replay", "exit_code": str(doc["exit_code"])})
            finally:
                await producer.close()

    try:
        asyncio.run(send())
    except Exception as exc:  # noqa: BLE001 - the report is extra: the replay's outcome stands
        print(f"dlq_replay.py: the run report was not published to {args.report_topic}: {exc}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started_ms = int(time.time() * 1000)
    code, summary, error = _main(args)
    publish_report(args, run_report(args, summary, code, started_ms, int(time.time() * 1000), error))
    return code


def _main(args: argparse.Namespace) -> tuple[int, Summary | None, str | None]:
    started = time.monotonic()
    try:
        spark = session(args)
        spark_s = time.monotonic() - started
        summary = run(args, spark)
    except BadArguments as exc:
        print(f"dlq_replay.py: error: {exc}", file=sys.stderr)
        return 2, None, str(exc)
    except Exception as exc:  # a Spark job that failed (a task that kept failing)
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:500]}"
        print(f"dlq_replay.py: the replay did not finish: {reason}", file=sys.stderr)
        print("dlq_replay.py: what was acknowledged is moved; run it again with the same arguments", file=sys.stderr)
        return 1, None, reason
    summary.timings["spark_start_s"] = spark_s
    title = "dry run (nothing changed): would move" if args.dry_run else "replay summary"
    print(f"== {title} ==")
    for line in summary.lines():
        print(line)
    print("timings: " + ", ".join(f"{k} {v:.1f}" for k, v in summary.timings.items()), flush=True)
    if args.json:
        print(json.dumps({
            "dry_run": args.dry_run, "dlqs": summary.dlqs, "moved": summary.moved, "already_there": summary.already_there,
            "skipped_by_filter": summary.skipped_by_filter, "no_real_topic": summary.no_real_topic,
            "missing_target": dict(summary.missing_target), "failed": summary.failed,
            "by_target": dict(summary.by_target), "timings": summary.timings,
        }), flush=True)
    return summary.exit_code, summary, None


if __name__ == "__main__":
    sys.exit(main())
