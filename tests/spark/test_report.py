"""The DLQ report (spark-jobs/dlq_report.py) on DataFrames built here: counts by DLQ,
REAL_TOPIC, failure reason and age bucket; the table, JSON and CSV made of them; the PNG
opened and looked at; the exit codes."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dlq_report as dr
import pytest
from PIL import Image

NOW = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)
NS = "persistent://public/default"
DLQ = f"{NS}/orders-billing-DLQ"
SCHEMA = (
    "message_id string, topic string, partition int, key string, value binary, properties map<string,string>, "
    "publish_time timestamp, event_time timestamp, redelivery_count int"
)
NACK = "redelivery count 1 reached max_redeliver_count 1"
RECONSUME = "reconsume_later after 16 retries; max_redeliver_count is 16"


def message(i: int, *, age: timedelta, props: dict[str, str], topic: str = DLQ, partition: int = -1,
            event_age: timedelta | None = None) -> tuple:
    published = (NOW - age).replace(tzinfo=None)  # the session's time zone is UTC
    event = None if event_age is None else (NOW - event_age).replace(tzinfo=None)
    return (f"1:{i}:-1:-1", topic, partition, None, b"x", props, published, event, 0)


def cfg(**kw) -> dr.ReportConfig:
    return dr.ReportConfig(dlq_topics=(DLQ,), now=NOW, **kw)


def rows_of(spark, messages, **kw) -> list[dict]:
    return dr.collect_rows(dr.report(spark.createDataFrame(messages, SCHEMA), cfg(**kw)))


def test_counts_by_real_topic_reason_and_age_bucket(spark):
    orders, pays = f"{NS}/orders", f"{NS}/payments"
    messages = []
    ages = {  # bucket: ages in it, the edges included (a bucket's upper bound is exclusive)
        "<1h": [timedelta(0), timedelta(minutes=59, seconds=59), timedelta(seconds=-30)],  # skew: counts as new
        "1-6h": [timedelta(hours=1), timedelta(hours=5, minutes=59)],
        "6-24h": [timedelta(hours=6), timedelta(hours=23)],
        "1-7d": [timedelta(days=1), timedelta(days=6, hours=23)],
        ">7d": [timedelta(days=7), timedelta(days=400)],
    }
    i = 0
    for bucket_ages in ages.values():
        for age in bucket_ages:
            messages.append(message(i, age=age, props={"REAL_TOPIC": orders, "DEAD_LETTER_REASON": NACK}))
            i += 1
    for _ in range(4):
        messages.append(message(i, age=timedelta(hours=2), props={"REAL_TOPIC": pays, "DEAD_LETTER_REASON": RECONSUME}))
        i += 1
    # Without DEAD_LETTER_REASON: derived from what the message carries.
    messages.append(message(i, age=timedelta(hours=2), props={"REAL_TOPIC": pays, "RECONSUMETIMES": "3"}))
    messages.append(message(i + 1, age=timedelta(hours=2), props={"REAL_TOPIC": pays, "ORIGIN_MESSAGE_ID": "1:1:-1:-1"}))
    messages.append(message(i + 2, age=timedelta(hours=2), props={"k": "v"}))  # no REAL_TOPIC at all
    messages.append(message(i + 3, age=timedelta(hours=2), props={"REAL_TOPIC": " ", "DEAD_LETTER_REASON": "poison pill"}))

    rows = rows_of(spark, messages)
    got = {(r["real_topic"], r["reason"], r["age_bucket"]): r["messages"] for r in rows}
    assert got == {
        (orders, "max redeliveries", "<1h"): 3,
        (orders, "max redeliveries", "1-6h"): 2,
        (orders, "max redeliveries", "6-24h"): 2,
        (orders, "max redeliveries", "1-7d"): 2,
        (orders, "max redeliveries", ">7d"): 2,
        (pays, "retries exhausted", "1-6h"): 5,
        (pays, "max redeliveries", "1-6h"): 1,
        (None, "unknown", "1-6h"): 1,
        (None, "poison pill", "1-6h"): 1,
    }
    assert {r["dlq_topic"] for r in rows} == {DLQ}
    # Ordered by DLQ, topic (missing last), reason, then bucket age.
    assert [r["real_topic"] for r in rows][:5] == [orders] * 5
    assert [r["age_bucket"] for r in rows][:5] == list(dr.BUCKET_NAMES)
    assert rows[-1]["real_topic"] is None
    oldest = next(r for r in rows if r["age_bucket"] == ">7d")["oldest_publish_time"]
    assert oldest == "2025-10-22T12:00:00.000Z"  # 400 days before NOW


def test_partitions_are_counted_under_their_dlq_and_long_reasons_are_cut(spark):
    other = f"{NS}/jobs-work-DLQ"
    messages = [
        message(0, age=timedelta(minutes=1), props={"REAL_TOPIC": "t"}, topic=f"{DLQ}-partition-0", partition=0),
        message(1, age=timedelta(minutes=1), props={"REAL_TOPIC": "t"}, topic=f"{DLQ}-partition-11", partition=11),
        message(2, age=timedelta(minutes=1), props={"REAL_TOPIC": "t"}, topic=DLQ),
        message(3, age=timedelta(minutes=1), props={"REAL_TOPIC": "t", "DEAD_LETTER_REASON": "z" * 500}, topic=other),
    ]
    rows = rows_of(spark, messages)
    assert [(r["dlq_topic"], r["reason"], r["messages"]) for r in rows] == [
        (other, "z" * dr.MAX_REASON_CHARS, 1), (DLQ, "max redeliveries", 3),  # by DLQ name
    ]


def test_age_from_the_originals_event_time(spark):
    messages = [
        message(0, age=timedelta(minutes=5), props={"REAL_TOPIC": "t"}, event_age=timedelta(days=3)),
        message(1, age=timedelta(minutes=5), props={"REAL_TOPIC": "t"}),  # no event time: the publish time
    ]
    by_publish = {r["age_bucket"]: r["messages"] for r in rows_of(spark, messages)}
    by_event = {r["age_bucket"]: r["messages"] for r in rows_of(spark, messages, age_from="event")}
    assert by_publish == {"<1h": 2}
    assert by_event == {"<1h": 1, "1-7d": 1}


def test_an_empty_dlq_is_an_empty_report(spark, tmp_path: Path):
    rows = rows_of(spark, [])
    assert rows == []
    summed = dr.totals(rows)
    assert summed["messages"] == 0 and summed["byAgeBucket"] == dict.fromkeys(dr.BUCKET_NAMES, 0)
    assert "(no messages)" in dr.format_table(rows, cfg(), [DLQ])
    dr.render_png(rows, cfg(), tmp_path / "empty.png")
    with Image.open(tmp_path / "empty.png") as image:
        assert image.format == "PNG" and image.size == (1200, 700)
        pixels = pixel_counts(image)
    assert all(0 < pixels[_rgb(c)] < 400 for c in dr.BUCKET_COLOURS)  # the legend's patches; no bars


SAMPLE = [
    {"dlq_topic": DLQ, "real_topic": f"{NS}/orders", "reason": "max redeliveries", "age_bucket": "<1h",
     "messages": 120, "oldest_publish_time": "2026-11-26T11:10:00.000Z"},
    {"dlq_topic": DLQ, "real_topic": f"{NS}/orders", "reason": "max redeliveries", "age_bucket": ">7d",
     "messages": 30, "oldest_publish_time": "2026-10-01T00:00:00.000Z"},
    {"dlq_topic": DLQ, "real_topic": f"{NS}/payments", "reason": "retries exhausted", "age_bucket": "1-6h",
     "messages": 60, "oldest_publish_time": "2026-11-26T07:00:00.000Z"},
    {"dlq_topic": DLQ, "real_topic": None, "reason": "unknown", "age_bucket": "1-7d",
     "messages": 5, "oldest_publish_time": "2026-11-23T00:00:00.000Z"},
]


def test_the_table_json_and_csv():
    table = dr.format_table(SAMPLE, cfg(), [DLQ]).splitlines()
    assert table[0].startswith("DLQ report at 2026-11-26T12:00:00.000Z: 215 messages in 1 DLQ")
    assert table[1].split() == ["DLQ", "REAL_TOPIC", "REASON", "<1h", "1-6h", "6-24h", "1-7d", ">7d", "TOTAL"]
    orders = next(line for line in table if "default/orders " in line)
    assert orders.split()[-6:] == ["120", "0", "0", "0", "30", "150"]
    assert table[-1].split() == ["total", "120", "60", "0", "5", "30", "215"]
    assert any("(no REAL_TOPIC)" in line and line.split()[-1] == "5" for line in table)

    doc = json.loads(dr.to_json(SAMPLE, cfg(), [DLQ], {f"{NS}/gone-DLQ": "TopicNotFound: gone"}))
    assert doc["messages"] == 215 and doc["dlqs"] == [DLQ] and doc["generatedAt"] == "2026-11-26T12:00:00.000Z"
    assert doc["failedDlqs"] == {f"{NS}/gone-DLQ": "TopicNotFound: gone"}
    assert doc["byRealTopic"] == {f"{NS}/orders": 150, f"{NS}/payments": 60, "(no REAL_TOPIC)": 5}
    assert doc["byReason"] == {"max redeliveries": 150, "retries exhausted": 60, "unknown": 5}
    assert doc["byAgeBucket"] == {"<1h": 120, "1-6h": 60, "6-24h": 0, "1-7d": 5, ">7d": 30}
    assert doc["rows"][3] == {"dlqTopic": DLQ, "realTopic": None, "reason": "unknown", "ageBucket": "1-7d",
                              "messages": 5, "oldestPublishTime": "2026-11-23T00:00:00.000Z"}

    parsed = list(csv.DictReader(io.StringIO(dr.to_csv(SAMPLE))))
    assert list(parsed[0]) == list(dr.COLUMNS)
    assert [(p["real_topic"], p["age_bucket"], int(p["messages"])) for p in parsed] == [
        (f"{NS}/orders", "<1h", 120), (f"{NS}/orders", ">7d", 30), (f"{NS}/payments", "1-6h", 60), ("", "1-7d", 5),
    ]


def pixel_counts(image: Image.Image) -> Counter[tuple[int, int, int]]:
    return Counter({colour: n for n, colour in image.convert("RGB").getcolors(maxcolors=1 << 24)})


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def test_the_png_is_a_chart_with_a_bar_per_bucket(tmp_path: Path):
    path = tmp_path / "report.png"
    dr.render_png(SAMPLE, cfg(), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size == (1200, 700)
        pixels = pixel_counts(image)
    assert len(pixels) > 50  # text, bars, axes: not blank
    white = pixels[(255, 255, 255)]
    assert 0.3 < white / sum(pixels.values()) < 0.97
    area = {bucket: pixels[_rgb(colour)] for bucket, colour in zip(dr.BUCKET_NAMES, dr.BUCKET_COLOURS, strict=True)}
    # Each bucket with messages has bars (in both panels, plus its legend patch); 6-24h only a legend patch.
    assert area["<1h"] > 5000 and area["1-6h"] > 2000 and area[">7d"] > 1000 and area["1-7d"] > 100
    assert 0 < area["6-24h"] < 400
    # Bars are as long as their counts: <1h (120 in both panels) outweighs 1-6h (60 in both).
    assert 1.5 < area["<1h"] / area["1-6h"] < 2.7


def test_many_topics_are_summed_beyond_the_top(tmp_path: Path):
    rows = [{"dlq_topic": DLQ, "real_topic": f"{NS}/t{i:02d}", "reason": "max redeliveries", "age_bucket": "<1h",
             "messages": 100 - i, "oldest_publish_time": None} for i in range(40)]
    grouped = dr._by_bucket(rows, lambda r: r["real_topic"], top=12)
    assert len(grouped) == 12 and grouped["29 others"][0] == sum(100 - i for i in range(11, 40))
    dr.render_png(rows, cfg(), tmp_path / "many.png")
    with Image.open(tmp_path / "many.png") as image:
        assert image.size == (1200, 700)


@pytest.mark.parametrize("argv, says", [
    ([], "give one of"),
    (["--dlq-topic", "a-DLQ", "--namespace", "public/default"], "give one of"),
    (["--topic", "orders"], "go together"),
    (["--dlq-topic", "a-DLQ", "--json", "/no/such/folder/r.json"], "is not a folder"),
    (["--dlq-topic", "bad name/x/y/z"], ""),
    (["--namespace", "public/default", "--age-from", "yesterday"], "invalid choice"),
    (["--nope"], "unrecognized arguments"),
    (["--namespace", "public/default", "--all-retained", "--dlq-subscription", "s"], "no --dlq-subscription"),
])
def test_bad_arguments_exit_2_with_one_line(argv, says, capsys):
    assert dr.main(argv) == dr.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("dlq_report: error: ") and says in err and err.count("\n") == 1


def test_arguments_and_environment():
    got = dr.parse_args(["--topic", "orders", "--subscription", "billing"],
                        environ={"MAGNETAR_SERVICE_URL": "magnetar://b:6660", "MAGNETAR_AUTH_TOKEN": "tok ",
                                 "MAGNETAR_ADMIN_URL": "http://gw:8080"})
    assert got.dlq_topics == ("orders-billing-DLQ",) and got.service_url == "magnetar://b:6660"
    assert got.token == "tok" and got.admin_url == "http://gw:8080" and "tok" not in repr(got)
    default = dr.parse_args(["--namespace", "public/default"], environ={})
    assert (default.service_url, default.admin_url) == (dr.DEFAULT_SERVICE_URL, dr.DEFAULT_ADMIN_URL)
    assert not default.all_retained and default.dlq_subscription is None


def test_a_dlq_that_cannot_be_read_is_a_partial_failure(spark, monkeypatch, tmp_path: Path):
    good, bad = f"{NS}/a-s-DLQ", f"{NS}/b-s-DLQ"

    async def resolve(cfg):
        return [dr.Target(good, "s-DLQ-sub"), dr.Target(bad, None)]

    def read(session, cfg, targets):
        if bad in {t.dlq for t in targets}:
            raise RuntimeError("TopicNotFound: b-s-DLQ was deleted\n  at ...")
        return session.createDataFrame(
            [message(i, age=timedelta(minutes=1), props={"REAL_TOPIC": "t"}, topic=good) for i in range(3)], SCHEMA)

    monkeypatch.setattr(dr, "resolve_dlqs", resolve)
    monkeypatch.setattr(dr, "read_dlqs", read)
    lines: list[str] = []
    config = dr.ReportConfig(namespace="public/default", now=NOW, json_path=tmp_path / "r.json")
    assert dr.run(config, spark_factory=lambda: spark, out=lines.append) == dr.EXIT_PARTIAL
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["dlqs"] == [good] and doc["messages"] == 3 and doc["subscriptions"] == {good: "s-DLQ-sub"}
    assert doc["failedDlqs"] == {bad: "RuntimeError: TopicNotFound: b-s-DLQ was deleted"}
    assert lines[-1].startswith("summary: 3 messages in 1 DLQ(s) read, 1 failed")


def test_a_namespace_without_dlqs_reports_nothing(monkeypatch, tmp_path: Path):
    async def resolve(cfg):
        return []

    monkeypatch.setattr(dr, "resolve_dlqs", resolve)
    lines: list[str] = []
    config = dr.ReportConfig(namespace="public/default", now=NOW, csv_path=tmp_path / "r.csv", png_path=tmp_path / "r.png")

    def no_spark():
        raise AssertionError("no Spark needed")

    assert dr.run(config, spark_factory=no_spark, out=lines.append) == dr.EXIT_OK
    assert (tmp_path / "r.csv").read_text() == ",".join(dr.COLUMNS) + "\n"
    with Image.open(tmp_path / "r.png") as image:
        assert image.size == (1200, 700)
