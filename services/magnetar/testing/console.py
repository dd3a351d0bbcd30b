"""The web console's browser tests (tests/console): a ``magnetar standalone`` with token
authentication as a user runs it, and headless Chromium driven by Selenium.

- :class:`Standalone` starts ``magnetar standalone`` on free ports (ZooKeeper: the run's
  shared one, under a root of its own) and mints tokens for any role;
- :class:`ConsoleBrowser` opens console pages, signs in, waits for text or elements
  (polling, never a fixed sleep), measures what the page itself reports, takes
  screenshots, and tells what the browser logged and showed when a test fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from magnetar.common import tokens
from magnetar.common.netutil import free_port

T = TypeVar("T")
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
DESKTOP = (1280, 800)
PHONE = (390, 844)
RUNNING = "Magnetar standalone is running"


@dataclass
class Standalone:
    """A running ``magnetar standalone`` with authentication on."""

    process: subprocess.Popen[bytes]
    data_dir: Path
    key: bytes
    gateway_url: str
    """http://host:port of the gateway (for httpx)."""
    service_url: str
    """magnetar://host:port of the broker (for Magnetar's SDK)."""
    pulsar_url: str
    """pulsar://host:port of the broker's Pulsar door (for pulsar-client)."""
    superuser: str = "admin"

    @property
    def base_url(self) -> str:
        """The console's address."""
        return f"{self.gateway_url}/console/"

    @property
    def admin_token(self) -> str:
        """A token of the superuser role."""
        return self.token_for(self.superuser)

    def token_for(self, role: str, expires_in_s: float | None = None) -> str:
        """A token for ``role``, signed with the standalone's key."""
        return tokens.create_token(role, self.key, expires_in_s=expires_in_s)

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of every component's log and of standalone's own output."""
        parts = []
        for log in sorted((self.data_dir / "logs").glob("*.log")) + [self.data_dir / "standalone.out"]:
            try:
                text = log.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            parts.append(f"--- {log.name}\n" + "\n".join(text))
        return "\n".join(parts)

    @classmethod
    def start(cls, base: Path, zookeeper: str, timeout_s: float = 120.0, env: dict[str, str] | None = None) -> Standalone:
        """``magnetar standalone`` with one bookie, on free ports, under ``base``; returns
        once it printed that it is running.

        Raises:
            RuntimeError: it ended or did not come up within ``timeout_s`` (with its output).
        """
        key = tokens.generate_secret_key()
        key_file = base / "secret.key"
        key_file.write_bytes(key)
        data_dir = base / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        ports = {name: free_port() for name in ("port", "protocol-port", "auditor-port", "gateway-port", "bookie-port")}
        argv = [
            sys.executable, "-m", "magnetar.tools.standalone", "--data-dir", str(data_dir),
            "--zookeeper", zookeeper, "--zk-root", f"/console-{uuid.uuid4().hex[:8]}", "--bookies", "1",
            "--protocol-tls-port", "0", "--token-secret-key", str(key_file), "--superuser-roles", "admin",
            *(arg for name, port in ports.items() for arg in (f"--{name}", str(port))),
        ]  # fmt: skip
        # The broker's framed-session port has no standalone option: a free one, not 6661.
        env = {**os.environ, "MAGNETAR_BROKER_SESSION_PORT": str(free_port()), **(env or {})}
        with (data_dir / "standalone.out").open("wb") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        host = "127.0.0.1"
        standalone = cls(process, data_dir, key, f"http://{host}:{ports['gateway-port']}",
                         f"magnetar://{host}:{ports['port']}", f"pulsar://{host}:{ports['protocol-port']}")
        deadline = time.monotonic() + timeout_s
        while RUNNING not in (data_dir / "standalone.out").read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                standalone.stop()
                raise RuntimeError(f"magnetar standalone did not start:\n{standalone.log_tail()}")
            time.sleep(0.1)
        return standalone

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (standalone stops its components in order), then SIGKILL the group."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@dataclass
class ConsoleBrowser:
    """Headless Chromium on the console of ``standalone``."""

    driver: Any
    standalone: Standalone
    screenshots: Path
    taken: list[Path] = field(default_factory=list)

    @classmethod
    def launch(cls, standalone: Standalone, screenshots: Path) -> ConsoleBrowser:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={DESKTOP[0]},{DESKTOP[1]}",
                    "--disable-gpu", "--hide-scrollbars"):
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        driver.set_page_load_timeout(30)
        screenshots.mkdir(parents=True, exist_ok=True)
        return cls(driver, standalone, screenshots)

    def close(self) -> None:
        self.driver.quit()

    # --- pages ---------------------------------------------------------------------
    def open(self, hash_path: str = "/") -> None:
        """Load the console afresh at ``#<hash_path>`` (the token of this tab stays): a new
        document, so ``performance`` times start at this load."""
        self.driver.get("about:blank")  # else a change of the hash alone would not reload
        self.driver.get(f"{self.standalone.base_url}#{hash_path}")
        self.wait(lambda: self.js("return document.readyState") == "complete", what="the page to load")

    def go(self, hash_path: str) -> None:
        """Navigate inside the loaded console (no reload)."""
        self.js("location.hash = arguments[0]", f"#{hash_path}")

    def reset(self, size: tuple[int, int] = DESKTOP) -> None:
        """A fresh start for a test: signed out, at ``size``."""
        self.set_size(*size)
        self.open("/signin")
        self.js("sessionStorage.clear()")

    def set_size(self, width: int, height: int) -> None:
        """The viewport (not the window) of ``width`` x ``height`` CSS pixels."""
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 640})

    def sign_in(self, token: str | None = None) -> None:
        """Sign in through the sign-in page with ``token`` (default: the superuser's) and
        wait for the overview."""
        self.open("/signin")
        field_ = self.wait_css("#token")
        field_.clear()
        field_.send_keys(token or self.standalone.admin_token)
        self.wait_css("form button[type=submit]").click()
        self.wait(lambda: self.js("return location.hash") in ("#/", ""), what="the overview after signing in")

    # --- waiting ---------------------------------------------------------------------
    def wait(self, condition: Callable[[], T], timeout_s: float = 10.0, what: str = "a condition") -> T:
        """Poll ``condition`` every 50 ms until it returns something truthy; return it.

        Raises:
            AssertionError: not within ``timeout_s`` (with the page's text).
        """
        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        while True:
            try:
                result = condition()
                if result:
                    return result
            except Exception as exc:  # a stale element while the page re-renders: poll again
                last_error = exc
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout_s:g} s for {what}; last error: {last_error!r}\n"
                                     f"page text:\n{self.text()[:3000]}")
            time.sleep(0.05)

    def wait_text(self, text: str, selector: str = "body", timeout_s: float = 10.0) -> Any:
        """Wait until the element ``selector`` shows ``text``; return the element."""
        from selenium.webdriver.common.by import By

        def shown() -> Any:
            for el in self.driver.find_elements(By.CSS_SELECTOR, selector):
                if text in el.text:
                    return el
            return None

        return self.wait(shown, timeout_s, what=f"{text!r} in {selector}")

    def wait_css(self, selector: str, timeout_s: float = 10.0) -> Any:
        """Wait until an element matches ``selector`` and is displayed; return it."""
        from selenium.webdriver.common.by import By

        def found() -> Any:
            return next((el for el in self.driver.find_elements(By.CSS_SELECTOR, selector) if el.is_displayed()), None)

        return self.wait(found, timeout_s, what=f"an element {selector}")

    def press(self, *keys: str) -> None:
        """Type ``keys`` where the focus is (Tab, text ...), as a user at the keyboard."""
        from selenium.webdriver.common.action_chains import ActionChains

        ActionChains(self.driver).send_keys(*keys).perform()

    def focused(self) -> dict[str, str]:
        """The focused element's id, tag and href."""
        return dict(self.js("const a = document.activeElement; return {id: a.id || '', tag: a.tagName, "
                            "href: a.getAttribute('href') || ''}"))

    def css(self, selector: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return list(self.driver.find_elements(By.CSS_SELECTOR, selector))

    # --- reading the page -------------------------------------------------------------
    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def text(self) -> str:
        try:
            return str(self.js("return document.body ? document.body.innerText : ''"))
        except Exception as exc:
            return f"(page text unavailable: {exc})"

    def notice(self) -> str:
        """The notice area's text (errors and confirmations)."""
        return str(self.js("const n = document.getElementById('notice'); return n ? n.textContent : ''"))

    def console_log(self) -> str:
        """What the page logged since the last call (errors, warnings, console.*)."""
        try:
            entries = self.driver.get_log("browser")
        except Exception as exc:
            return f"(browser log unavailable: {exc})"
        return "\n".join(f"{e.get('level')} {e.get('message')}" for e in entries)

    def overflows_horizontally(self) -> bool:
        """Whether the document is wider than the viewport (a sideways scroll)."""
        return bool(self.js("return document.documentElement.scrollWidth > window.innerWidth"))

    def screenshot(self, name: str) -> Path:
        """Save the viewport as ``<screenshots>/<name>.png``."""
        path = self.screenshots / f"{name}.png"
        self.driver.save_screenshot(str(path))
        self.taken.append(path)
        return path
