"""Fault injection for crash tests: a service configured with a crash point exits at
once (no cleanup, as a SIGKILL would leave it) when it reaches that point."""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

CRASH_EXIT_CODE = 86


def crash_point(configured: str, name: str) -> None:
    """Exit the process now if ``configured`` (the service's ``crash_point`` setting) is
    ``name``."""
    if configured and configured == name:
        log.critical("crash point %r reached: exiting now (fault injection)", name)
        logging.shutdown()
        os._exit(CRASH_EXIT_CODE)
