"""The 2-minute chaos test never passes quietly doing less: as root without a tool that
``make setup`` installs, it fails and says which."""

from __future__ import annotations

import os
import shutil

import netns
import pytest
from test_chaos import require_every_fault_kind


def test_the_chaos_test_fails_without_iptables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)  # the check stops at the missing tool
    real_which = shutil.which
    monkeypatch.setattr(netns.shutil, "which", lambda tool, *a, **k: None if tool == "iptables" else real_which(tool, *a, **k))
    with pytest.raises(AssertionError, match="iptables is not installed.*make setup"):
        require_every_fault_kind()


def test_the_chaos_test_is_skipped_with_the_reason_when_not_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(pytest.skip.Exception, match="needs root"):
        require_every_fault_kind()
