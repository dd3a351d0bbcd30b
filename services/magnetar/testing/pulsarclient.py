"""pulsar-client (Pulsar's Python client over its C++ core) for tests.

The C++ core keeps the first Python logger any client of the process was given and never
calls a later client's; so every test client gets the one logger made here (through
:func:`pulsar_client`), whose lines :data:`LINES` keeps for assertions and which prints
nothing (the core logs every connection at INFO)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pulsar


class ClientLines(logging.Handler):
    """The C++ client's log lines, in order."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


LINES = ClientLines()
LOGGER = logging.getLogger("magnetar-test-pulsar-client")
LOGGER.propagate = False
LOGGER.setLevel(logging.INFO)
LOGGER.addHandler(LINES)


def pulsar_client(url: str, **kwargs: Any) -> pulsar.Client:
    """``pulsar.Client(url, **kwargs)`` with the shared logger."""
    import pulsar  # a test dependency: loaded only by the tests that use it

    kwargs.setdefault("logger", LOGGER)
    return pulsar.Client(url, **kwargs)
