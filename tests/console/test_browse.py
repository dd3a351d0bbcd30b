"""The console's browsing pages against a real standalone: the overview, tenants with
a cluster-wide topic search, a namespace of 1,000 topics, a topic's backlog made by a
real producer; at 1280x800 and at phone width, readable without colour, by keyboard."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import httpx
import pytest
from selenium.webdriver.common.keys import Keys

import magnetar
from magnetar.client.admin import AdminClient
from magnetar.testing.console import PHONE, ConsoleBrowser, Standalone

BACKLOG = 7
TOPICS = 1000


@pytest.fixture(scope="module")
def tenant(console: Standalone) -> Iterator[str]:
    """A tenant of this module's with a namespace ``ns``."""
    name = f"shop-{uuid.uuid4().hex[:6]}"
    with httpx.Client(base_url=console.gateway_url, timeout=30,
                      headers={"Authorization": f"Bearer {console.admin_token}"}) as http:
        assert http.put(f"/admin/v2/tenants/{name}", json={"adminRoles": [], "allowedClusters": ["standalone"]}).status_code == 204
        assert http.put(f"/admin/v2/namespaces/{name}/ns").status_code == 204
    yield name


@pytest.fixture(scope="module")
def backlogged_topic(console: Standalone, tenant: str) -> str:
    """A topic with BACKLOG messages a subscription has not consumed, produced by the SDK."""
    topic = f"persistent://{tenant}/ns/orders-{uuid.uuid4().hex[:6]}"
    client = magnetar.Client(console.service_url, authentication=magnetar.AuthenticationToken(console.admin_token),
                             operation_timeout_seconds=30)
    try:
        client.subscribe(topic, "billing").close()  # the subscription exists, consumes nothing
        producer = client.create_producer(topic, producer_name="checkout")
        for i in range(BACKLOG):
            producer.send(f"order {i}".encode())
        producer.close()
    finally:
        client.close()
    return topic


def test_overview_shows_every_component_with_words(browser: ConsoleBrowser, console: Standalone):
    browser.sign_in()
    browser.wait_text("✓ writable", "#view")  # the one bookie
    browser.wait_text("✓ connected", "#view")  # the gateway's ZooKeeper session
    browser.wait_text("✓ standalone", "#view")  # the server's own mode, from srvr
    browser.wait_text("Leader", "#view")
    legend = browser.wait_text("in (solid)", "ul.legend")  # the chart's series read without colour
    assert "out (dashed)" in legend.text
    broker_row = browser.wait_text("✓ live", "table")
    assert console.service_url.removeprefix("magnetar://") in broker_row.text
    browser.screenshot("overview")
    browser.set_size(*PHONE)
    browser.wait_text("Bookies", "#view")
    assert not browser.overflows_horizontally()
    browser.screenshot("overview-phone")


def test_a_topic_with_a_backlog_is_found_by_search_and_its_backlog_shown(
    browser: ConsoleBrowser, backlogged_topic: str,
):
    local = backlogged_topic.rsplit("/", 1)[1]
    browser.sign_in()
    browser.go("/tenants")
    search = browser.wait_css("#topic-search")
    search.send_keys(local[:12])  # part of its name
    link = browser.wait(lambda: next((a for a in browser.css("#search-results a") if a.text == local), None),
                        what="the topic among the search results")
    browser.screenshot("tenants")
    link.click()
    backlog = browser.wait_text(f"{BACKLOG} messages", "#topic-backlog")
    assert backlog.text.startswith(f"{BACKLOG} messages")
    row = browser.wait(lambda: next((r for r in browser.css("table tr") if r.text.startswith("billing ")), None),
                       what="the subscription's row")
    assert row.text.split()[:3] == ["billing", "Exclusive", str(BACKLOG)]  # name, type, backlog
    sub_link = browser.wait_css("a[href^='#/subscriptions/persistent/']")
    assert sub_link.get_attribute("href").endswith(f"/{local}/billing")
    browser.wait_text("No producer connected.", "#view")  # it closed after sending: a word, not an empty table
    browser.screenshot("topic")
    browser.set_size(*PHONE)
    browser.wait_text("Subscriptions", "#view")
    assert not browser.overflows_horizontally()
    browser.screenshot("topic-phone")


async def _create_topics(console: Standalone, namespace: str, names: list[str]) -> list[str | None]:
    """The topics created in one CreateTopics call (what the gateway gathers concurrent
    REST creates into; one call keeps the test's setup to about a second)."""
    async with AdminClient(console.service_url, 60, token=lambda: console.admin_token) as admin:
        errors = await admin.create_topics(namespace, [f"persistent://{namespace}/{n}" for n in names])
    return [None if e is None else e.message for e in errors]


def test_a_namespace_of_1000_topics_loads_in_under_a_second_and_filters_as_you_type(
    browser: ConsoleBrowser, console: Standalone, tenant: str,
):
    namespace = f"{tenant}/many"
    with httpx.Client(base_url=console.gateway_url, headers={"Authorization": f"Bearer {console.admin_token}"}) as http:
        assert http.put(f"/admin/v2/namespaces/{namespace}").status_code == 204
    names = [f"topic-{i:04d}" for i in range(TOPICS)]
    assert set(asyncio.run(_create_topics(console, namespace, names))) == {None}
    browser.sign_in()
    path = f"/namespaces/{namespace}"
    browser.open(path)  # a fresh page load: navigation start is time 0
    browser.wait_css("#topics tbody tr")
    rendered_ms = browser.wait(lambda: browser.js(
        "const m = performance.getEntriesByName(arguments[0]); return m.length ? m[0].startTime : null",
        f"console:rendered:{path}"), what="the page's rendered mark")
    assert rendered_ms < 1000, f"the namespace page took {rendered_ms:.0f} ms"
    assert browser.wait_text(f"{TOPICS:,} topics. Showing the first 200.", "#topic-count")
    rows = browser.js("return [...document.querySelectorAll('#topics tbody tr')].map((r) => r.cells[0].textContent + ' ' + r.cells[1].textContent)")
    assert rows == [f"topic-{i:04d} not loaded" for i in range(200)]  # in order, each state in words
    browser.screenshot("namespace")
    browser.wait_css("#more-topics").click()
    browser.wait(lambda: len(browser.css("#topics tbody tr")) == 400, what="200 more rows")

    # Keyboard: Tab from the top of the page reaches the filter, then a topic's link.
    browser.js("document.activeElement.blur()")
    reached = []
    for _ in range(30):
        browser.press(Keys.TAB)
        reached.append(browser.focused())
        if reached[-1]["id"] == "topic-filter":
            break
    assert reached[-1]["id"] == "topic-filter", reached
    assert browser.js("return document.querySelector('a[href], button, input').textContent") == "Skip to content"
    browser.press("0999")
    assert browser.wait_text(f"1 of {TOPICS:,} topics match", "#topic-count")
    browser.press(Keys.TAB)
    assert browser.focused()["href"].endswith("/many/topic-0999")
    shown = browser.js("return [...document.querySelectorAll('#topics tbody tr')].map((r) => r.cells[0].textContent)")
    assert shown == ["topic-0999"]
    assert not browser.css("#more-topics")[0].is_displayed()
