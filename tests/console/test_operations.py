"""The console's operations pages on a real standalone (authentication on): a subscription
reset to a time from the page moves the cursor; peek shows text, pretty JSON and hex; 50
dead letters made by a real consumer are replayed from the page and consumed once each on
the real topic; a role without the right sees no replay button and the API refuses it; a
test message produced from the page is consumed. Screenshots of each page."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import threading
import time
import uuid
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

import magnetar.asyncio as mg
from magnetar.testing.console import DESKTOP, PHONE, ConsoleBrowser, Standalone

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "spark-jobs"))
import dlq_replay  # noqa: E402  (spark-jobs/ is no package; its report needs no Spark)

T = TypeVar("T")
NS = "public/default"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Loop:
    """An event loop in a thread of its own, so SDK clients stay served while the
    (synchronous) browser is driven."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture
def loop() -> Iterator[Loop]:
    running = Loop()
    try:
        yield running
    finally:
        running.close()


def produce(admin: httpx.Client, topic: str, payloads: list[bytes], **fields: Any) -> list[str]:
    """Publish through the REST producer; the message ids."""
    body = {"messages": [{"payload": base64.b64encode(p).decode(), **fields} for p in payloads]}
    reply = admin.post(f"/topics/persistent/{NS}/{topic}", json=body)
    assert reply.status_code == 200, reply.text
    return [r["messageId"] for r in reply.json()["messagePublishResults"]]


def backlog(admin: httpx.Client, topic: str, subscription: str) -> int:
    stats = admin.get(f"/admin/v2/persistent/{NS}/{topic}/stats")
    assert stats.status_code == 200, stats.text
    return int(stats.json()["subscriptions"][subscription]["msgBacklog"])


def confirm(browser: ConsoleBrowser) -> None:
    browser.wait_css("dialog[open] button[value=confirm]").click()


def test_a_subscription_created_and_reset_to_a_time_from_the_page_moves_its_cursor(
    browser: ConsoleBrowser, admin: httpx.Client,
):
    topic = unique("reset")
    assert admin.put(f"/admin/v2/persistent/{NS}/{topic}").status_code == 204
    for i in range(5):  # one call each: their publish times apart
        produce(admin, topic, [f"order {i}".encode()])
    assert admin.put(f"/admin/v2/persistent/{NS}/{topic}/subscription/probe", json="earliest").status_code == 204
    peeked = admin.get(f"/admin/v2/peek/{NS}/{topic}/subscription/probe", params={"count": 5}).json()
    third = peeked[2]
    assert base64.b64decode(third["payload"]) == b"order 2"
    # The first message published at or after the third's time: the third, or an earlier one of the same ms.
    expected = sum(1 for m in peeked if m["publishTime"] >= third["publishTime"])
    browser.sign_in()
    browser.open(f"/topics/persistent/{NS}/{topic}")
    browser.wait_text("Create a subscription", 'a[href^="#/new-subscription/"]').click()  # the topic page's link
    browser.wait_css("#sub-name").send_keys("audit")  # starting at latest, the default
    browser.wait_css("#create-subscription").click()
    browser.wait(lambda: browser.js("return location.hash") == f"#/subscriptions/persistent/{NS}/{topic}/audit",
                 what="the new subscription's page")
    browser.wait_css('#backlog[data-value="0"]')
    assert backlog(admin, topic, "audit") == 0
    # No consumer: the rates are the stats' zeros (a missing field would show "–").
    browser.wait_css('#ack-rate[data-value="0"]')
    browser.wait_css('#redeliver-rate[data-value="0"]')
    # The page's input takes local time; the browser converts it, as for an operator.
    browser.js("""const ms = Date.parse(arguments[0]);
                  const local = new Date(ms - new Date(ms).getTimezoneOffset() * 60000).toISOString().slice(0, 23);
                  document.getElementById('reset-time').value = local;""", third["publishTime"])
    browser.wait_css("#reset").click()
    confirm(browser)
    browser.wait(lambda: backlog(admin, topic, "audit") == expected, what="the cursor reset to the third message")
    browser.wait_css(f'#backlog[data-value="{expected}"]')
    browser.wait_css("#skip").click()  # skip 1
    confirm(browser)
    browser.wait(lambda: backlog(admin, topic, "audit") == expected - 1, what="one message skipped")
    browser.wait_css(f'#backlog[data-value="{expected - 1}"]')
    browser.screenshot("subscription")


def test_peek_shows_text_pretty_json_and_hex(browser: ConsoleBrowser, admin: httpx.Client):
    topic = unique("peek")
    assert admin.put(f"/admin/v2/persistent/{NS}/{topic}").status_code == 204
    assert admin.put(f"/admin/v2/persistent/{NS}/{topic}/subscription/s", json="earliest").status_code == 204
    produce(admin, topic, [b'{"order":7,"items":["a"]}'], key="k-7", properties={"source": "console-test"})
    browser.sign_in()
    browser.open(f"/subscriptions/persistent/{NS}/{topic}/s")
    browser.wait_css("#peek").click()
    as_text = browser.wait_css("article.message pre.payload").text
    assert as_text == '{"order":7,"items":["a"]}'
    assert '"source": "console-test"' in browser.wait_css("article.message pre.properties").text
    assert "k-7" in browser.wait_css("article.message").text
    browser.wait_css("input[name=payload-view][value=json]").click()
    pretty = browser.wait(lambda: (t := browser.wait_css("article.message pre.payload").text) != as_text and t)
    assert json.loads(pretty) == {"order": 7, "items": ["a"]} and '\n  "order": 7' in pretty
    browser.wait_css("input[name=payload-view][value=hex]").click()
    hexed = browser.wait(lambda: (t := browser.wait_css("article.message pre.payload").text).startswith("00000000") and t)
    assert "7b 22 6f 72 64 65 72 22" in hexed  # {"order"
    browser.js("document.getElementById('peek-section').scrollIntoView()")
    browser.screenshot("peek")
    browser.set_size(*PHONE)
    browser.wait(lambda: not browser.overflows_horizontally(), what="the peek page within a phone's width")


def _dlq_letters(admin: httpx.Client, local: str) -> dict[str, Any]:
    listed = {d["topic"]: d for d in admin.get(f"/admin/v2/dlq/{NS}").json()}
    return listed.get(f"persistent://{NS}/{local}", {})


def test_fifty_dead_letters_of_a_real_consumer_are_replayed_from_the_page(
    browser: ConsoleBrowser, admin: httpx.Client, console: Standalone, loop: Loop,
):
    topic = unique("pay")
    full = f"persistent://{NS}/{topic}"
    client = mg.Client(console.service_url, authentication=mg.AuthenticationToken(console.admin_token))

    async def subscribe_and_fail() -> mg.Consumer:
        consumer = await client.subscribe(full, "workers", consumer_type=mg.ConsumerType.Shared,
                                          negative_ack_redelivery_delay_ms=100,
                                          dead_letter_policy=mg.ConsumerDeadLetterPolicy(max_redeliver_count=1))
        producer = await client.create_producer(full, batching_enabled=False)
        await asyncio.gather(*(producer.send(f"payment {i}".encode()) for i in range(50)))
        await producer.close()
        for _ in range(50):  # one nack each brings it to max_redeliver_count: the broker moves it to the DLQ
            await consumer.negative_acknowledge(await consumer.receive(10_000))
        return consumer

    try:
        consumer = loop.run(subscribe_and_fail())
        local = f"{topic}-workers-DLQ"
        browser.wait(lambda: _dlq_letters(admin, local).get("backlog") == 50, timeout_s=30, what="50 dead letters")
        now_ms = int(time.time() * 1000)
        report = dlq_replay.run_report(dlq_replay.parse_args(["--dlq-topic", f"persistent://{NS}/{local}"]), None, 2,
                                       now_ms - 4000, now_ms, "an earlier run that was refused")
        report_args = dlq_replay.parse_args(["--dlq-topic", f"persistent://{NS}/{local}", "--service-url", console.service_url,
                                             "--auth-token", console.admin_token,
                                             "--report-topic", f"persistent://{NS}/dlq-replay-runs"])
        dlq_replay.publish_report(report_args, report)  # as the replay job does at the end of a run

        browser.sign_in()
        browser.open("/deadletters")
        browser.wait_css(f'a.dlq-link[href$="/{local}"]')
        assert browser.wait_css("#runs").text.count("an earlier run that was refused") == 1
        browser.screenshot("deadletters")
        browser.wait_css(f'a.dlq-link[href$="/{local}"]').click()
        browser.wait(lambda: len(browser.css("#letters tbody tr")) == 50, what="the 50 dead letters listed")
        assert full in browser.wait_css("#letters").text and "payment" in browser.wait_css("#letters").text
        browser.wait_css("#select-all").click()
        browser.wait_text("50 selected", "#dlq-status")
        browser.screenshot("deadletter-messages")
        browser.set_size(*PHONE)
        browser.wait(lambda: not browser.overflows_horizontally(), what="the DLQ page within a phone's width")
        browser.screenshot("deadletter-messages-phone")
        browser.set_size(*DESKTOP)
        browser.wait_css("#replay-selected").click()
        assert "50 moved" in browser.wait(lambda: "Replayed" in browser.notice() and browser.notice())

        async def consume_all() -> list[bytes]:
            got = []
            for _ in range(50):
                message = await consumer.receive(10_000)
                got.append(message.data())
                await consumer.acknowledge(message)
            return got

        got = loop.run(consume_all())
        assert sorted(got) == sorted(f"payment {i}".encode() for i in range(50))  # all 50, once each
        # 50 published, 50 replayed: none twice (the counter is sampled: wait for it)
        browser.wait(lambda: admin.get(f"/admin/v2/persistent/{NS}/{topic}/stats").json()["msgInCounter"] >= 100,
                     what="the replayed messages counted")
        assert admin.get(f"/admin/v2/persistent/{NS}/{topic}/stats").json()["msgInCounter"] == 100
        browser.wait(lambda: _dlq_letters(admin, local)["backlog"] == 0, what="the DLQ emptied")
    finally:
        loop.run(client.close())


def test_a_role_without_the_right_sees_no_replay_button_and_the_api_refuses_it(
    browser: ConsoleBrowser, admin: httpx.Client, console: Standalone,
):
    """``viewer`` may consume in the namespace (read the DLQ) but not produce: a replay,
    which publishes to the real topic, is not offered, and the API refuses it. Purging
    (consume on the DLQ's subscription) is offered: one selected message is dropped."""
    real, local = unique("ship"), f"{unique('ship')}-s-DLQ"
    for name in (real, local):
        assert admin.put(f"/admin/v2/persistent/{NS}/{name}").status_code == 204
    assert admin.put(f"/admin/v2/persistent/{NS}/{local}/subscription/s-DLQ-sub", json="earliest").status_code == 204
    ids = produce(admin, local, [b"lost", b"kept"], properties={"REAL_TOPIC": f"persistent://{NS}/{real}",
                                                                "ORIGIN_MESSAGE_ID": "1:2:-1:-1", "RECONSUMETIMES": "3"})
    role = unique("viewer")
    assert admin.post(f"/admin/v2/namespaces/{NS}/permissions/{role}", json=["consume"]).status_code == 204
    token = console.token_for(role)
    browser.sign_in(token)
    browser.open(f"/deadletters/{NS}/{local}")
    browser.wait(lambda: len(browser.css("#letters tbody tr")) == 2, what="the dead letters listed")
    assert "lost" in browser.wait_css("#letters").text
    assert browser.css("#replay-selected") == [] and browser.css("#replay-all") == []
    with httpx.Client(base_url=console.gateway_url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as as_viewer:
        refused = as_viewer.post(f"/admin/v2/dlq/{NS}/{local}/replay", json={})
    assert refused.status_code == 403, refused.text
    assert _dlq_letters(admin, local)["backlog"] == 2  # nothing moved, nothing acknowledged
    lost_row = browser.wait_css("#letters tbody tr:first-child")
    assert "lost" in lost_row.text and lost_row.get_attribute("data-id").startswith(ids[0])
    lost_row.find_element("css selector", "input.pick").click()
    browser.wait_css("#purge-selected").click()
    confirm(browser)
    browser.wait(lambda: len(browser.css("#letters tbody tr")) == 1 and "kept" in browser.wait_css("#letters").text,
                 what="the purged message gone, the other kept")
    assert _dlq_letters(admin, local)["backlog"] == 1


def test_a_message_produced_from_the_page_is_consumed(
    browser: ConsoleBrowser, admin: httpx.Client, console: Standalone, loop: Loop,
):
    topic = unique("hello")
    full = f"persistent://{NS}/{topic}"
    client = mg.Client(console.service_url, authentication=mg.AuthenticationToken(console.admin_token))
    try:
        consumer = loop.run(client.subscribe(full, "check"))
        browser.sign_in()
        browser.open("/produce")
        browser.wait_css("#produce-topic").send_keys(full)
        browser.wait_css("#produce-key").send_keys("greeting")
        browser.wait_css("#produce-properties").send_keys("from=console\nn=1")
        browser.wait_css("#produce-payload").send_keys("hello from the page")
        browser.wait_css("#produce-send").click()
        shown = browser.wait_css("#produced-id").text
        browser.screenshot("produce")
        message = loop.run(consumer.receive(10_000))
        assert message.data() == b"hello from the page" and message.partition_key() == "greeting"
        assert message.properties() == {"from": "console", "n": "1"}
        mid = message.message_id()
        assert shown.startswith(f"{mid.ledger_id()}:{mid.entry_id()}:")
    finally:
        loop.run(client.close())
