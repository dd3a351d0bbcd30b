"""``magnetar.testing.together``: a module's ``@together`` tests run at the same time,
each reports its own outcome, ``-k`` and ``parametrize`` still work, and a
function-scoped fixture is refused."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
ARGS = ("-p", "no:cacheprovider", "-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function")

MODULE = '''
import asyncio
import pytest
from magnetar.testing.together import together

LOG = []

@pytest.fixture(scope="module")
def events():
    return {}

def _event(events, name):
    return events.setdefault(name, asyncio.Event())

@together
async def test_ping(events):
    _event(events, "ping").set()
    await asyncio.wait_for(_event(events, "pong").wait(), 5)  # only if pong runs at the same time
    LOG.append("ping")

@together
async def test_pong(events):
    await asyncio.wait_for(_event(events, "ping").wait(), 5)
    _event(events, "pong").set()
    LOG.append("pong")

@together
async def test_fails_alone(events):
    assert 1 + 1 == 3, "its own failure"

@together
async def test_skips_alone(events):
    pytest.skip("its own skip")

@pytest.mark.parametrize("n", [1, 2])
@together
async def test_param(events, n):
    LOG.append(f"param{n}")

def test_after():
    assert sorted(LOG) == ["param1", "param2", "ping", "pong"]
'''


def test_together_runs_at_once_and_reports_each(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mod=MODULE)
    result = pytester.runpytest(*ARGS)
    result.assert_outcomes(passed=5, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*test_fails_alone*", "*its own failure*"])
    assert "test_ping FAILED" not in result.stdout.str()


def test_selection_runs_only_the_selected(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mod=MODULE.replace("def test_after", "def _unused"))
    result = pytester.runpytest(*ARGS, "-k", "param")
    result.assert_outcomes(passed=2)


def test_a_function_scoped_fixture_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mod='''
from magnetar.testing.together import together

async def noop():
    pass

@together
async def test_uses_tmp(tmp_path):
    await noop()
''')
    result = pytester.runpytest(*ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*module- or session-scoped fixtures*tmp_path*function-scoped*"])
