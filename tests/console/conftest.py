"""The console's browser tests: ONE ``magnetar standalone`` with token authentication
(``console``) and ONE headless Chromium (``browser``) for the whole run.

- ``console``: :class:`magnetar.testing.console.Standalone` (``base_url``,
  ``admin_token``, ``token_for(role)``, ``service_url`` for Magnetar's SDK,
  ``pulsar_url`` for pulsar-client, ``gateway_url`` for httpx);
- ``browser``: :class:`magnetar.testing.console.ConsoleBrowser`, reset for each test
  (signed out, 1280x800): ``sign_in()``, ``open("/namespaces/t/ns")``, ``wait_text``,
  ``wait_css``, ``screenshot(name)``;
- ``admin``: an httpx client on the gateway with the superuser's token.

Screenshots go to ``$MAGNETAR_CONSOLE_SCREENSHOTS`` (``make console-screenshots`` sets it
to docs/console/), else to the run's temporary directory. A failing test's report
shows the browser's log, the page's text and the standalone's logs.

Every test here is marked ``integration`` (real processes and a real browser).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path

import httpx
import pytest

from magnetar.common.zkserver import ZooKeeperServer
from magnetar.testing.console import ConsoleBrowser, Standalone

# Rates every second, sampled for the charts every second, new brokers seen within half a
# second: the pages show traffic soon.
STANDALONE_ENV = {"MAGNETAR_BROKER_STATS_INTERVAL_S": "1", "MAGNETAR_GATEWAY_BROKER_REFRESH_INTERVAL_S": "0.5",
                  "MAGNETAR_GATEWAY_CONSOLE_RATES_INTERVAL_S": "1"}
_BROWSER = pytest.StashKey[ConsoleBrowser]()
_STANDALONE = pytest.StashKey[Standalone]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def console(zk_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory,
            request: pytest.FixtureRequest) -> Iterator[Standalone]:
    if not zk_server.alive:
        zk_server.start()
    standalone = Standalone.start(tmp_path_factory.mktemp("console-standalone"), zk_server.connect_string,
                                  env=STANDALONE_ENV)
    request.config.stash[_STANDALONE] = standalone
    try:
        yield standalone
    finally:
        standalone.stop()


@pytest.fixture(scope="session")
def _browser_session(console: Standalone, tmp_path_factory: pytest.TempPathFactory,
                     request: pytest.FixtureRequest) -> Iterator[ConsoleBrowser]:
    wanted = os.environ.get("MAGNETAR_CONSOLE_SCREENSHOTS")
    screenshots = Path(wanted) if wanted else tmp_path_factory.mktemp("console-screenshots")
    browser = ConsoleBrowser.launch(console, screenshots)
    request.config.stash[_BROWSER] = browser
    try:
        yield browser
    finally:
        browser.close()


@pytest.fixture
def browser(_browser_session: ConsoleBrowser) -> ConsoleBrowser:
    """The run's browser, signed out, at 1280x800, its log emptied."""
    _browser_session.reset()
    _browser_session.console_log()
    return _browser_session


@pytest.fixture
def admin(console: Standalone) -> Iterator[httpx.Client]:
    """The gateway's REST API as the superuser."""
    with httpx.Client(base_url=console.gateway_url, timeout=30,
                      headers={"Authorization": f"Bearer {console.admin_token}"}) as client:
        yield client


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                                           pytest.TestReport]:
    report = yield
    if report.failed:
        browser = item.config.stash.get(_BROWSER, None)
        if browser is not None:
            report.sections.append(("browser log", browser.console_log() or "(empty)"))
            report.sections.append(("page text", browser.text()[:5000] or "(empty)"))
        standalone = item.config.stash.get(_STANDALONE, None)
        if standalone is not None:
            report.sections.append(("standalone logs (last 40 lines each)", standalone.log_tail()))
    return report
