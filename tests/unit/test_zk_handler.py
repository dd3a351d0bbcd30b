"""metadata/handler.py: kazoo's select contract over poll, on a real socket pair."""

from __future__ import annotations

import socket
import time

import pytest

from magnetar.metadata.handler import poll_select


def test_readable_writable_and_a_timeout_as_select_reports_them() -> None:
    a, b = socket.socketpair()
    with a, b:
        assert poll_select([a], [], [], 0) == ([], [], [])  # nothing to read yet
        assert poll_select([], [a], [], 0) == ([], [a], [])  # room to write
        b.send(b"x")
        assert poll_select([a, b], [], [], 1.0) == ([a], [], [])
        assert poll_select([a.fileno()], [], [], 1.0) == ([a.fileno()], [], [])  # descriptors too
        t0 = time.monotonic()
        assert poll_select([b], [], [], 0.05) == ([], [], [])
        assert time.monotonic() - t0 >= 0.04  # it waited for the timeout
        b.close()
        a.recv(1)
        assert poll_select([a], [], [], 1.0) == ([a], [], [])  # the hang-up reads as readable (recv says b"")


def test_a_bad_timeout_or_object_is_refused() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        poll_select([], [], [], -1)
    with pytest.raises(TypeError, match="number"):
        poll_select([], [], [], "1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Invalid file object"):
        poll_select([object()], [], [], 0)
