"""Independent async tests of one module, run at the same time in one event loop.

Most of an integration test's time is waiting: for a retry delay, an ack timeout, a
delivery that must not come. Tests of one module that share its cluster and use names
of their own (topics, namespaces) are marked ``@together``; the first of them that
pytest runs starts every selected one (``-k`` still selects) at once, in one event loop,
and each test then reports its own outcome: it passes, or raises what its body raised,
with the body's traceback. The module's tests take about as long as the longest.

A body takes module- or session-scoped fixtures (one value for all the bodies) and
its test's ``parametrize`` values; a function-scoped fixture would be the first test's
for every body, so :func:`together` refuses one. What the bodies print shows in the
report of the test that ran them (the first).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

__all__ = ["BODY_TIMEOUT_S", "together"]

BODY_TIMEOUT_S = 240.0
"""Each body's own limit (under pytest-timeout's 300 s for the test that runs them all):
a body that hangs fails its test, the others report theirs."""

_OUTCOMES = pytest.StashKey[dict[str, BaseException | None]]()
_SHARED_SCOPES = ("module", "package", "session")

Body = Callable[..., Coroutine[Any, Any, None]]


def together(body: Body) -> Callable[..., None]:
    """Mark an ``async def test_…`` to run at the same time as its module's others."""
    if not inspect.iscoroutinefunction(body):
        raise TypeError(f"@together marks async tests; {body.__name__} is not one")
    signature = inspect.signature(body)

    def test(request: pytest.FixtureRequest, **_: Any) -> None:
        outcome = _outcomes(request)[request.node.nodeid]
        if outcome is not None:
            raise outcome

    functools.update_wrapper(test, body)
    del test.__wrapped__  # type: ignore[attr-defined]  # pytest reads the signature below, not the body's
    parameters = [p for p in signature.parameters.values() if p.name != "request"]
    test.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD), *parameters])
    test._together_body = body  # type: ignore[attr-defined]
    return test


def _outcomes(request: pytest.FixtureRequest) -> dict[str, BaseException | None]:
    """Every selected ``@together`` test of the request's module, run once; by node id."""
    module_node = request.node.getparent(pytest.Module)
    assert module_node is not None
    if _OUTCOMES not in module_node.stash:
        calls: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {}
        for item in request.session.items:
            body = getattr(getattr(item, "obj", None), "_together_body", None)
            if body is None or item.getparent(pytest.Module) is not module_node:
                continue
            params = getattr(item, "callspec", None)
            kwargs = {name: params.params[name] if params and name in params.params else _shared(request, name)
                      for name in inspect.signature(body).parameters}
            calls[item.nodeid] = functools.partial(body, **kwargs)
        module_node.stash[_OUTCOMES] = asyncio.run(_run_all(calls))
    return module_node.stash[_OUTCOMES]


def _shared(request: pytest.FixtureRequest, name: str) -> Any:
    value = request.getfixturevalue(name)
    scope = request._fixture_defs[name].scope  # noqa: SLF001 - pytest exposes no public way
    if scope not in _SHARED_SCOPES:
        raise TypeError(f"a @together test takes module- or session-scoped fixtures; {name!r} is {scope}-scoped")
    return value


async def _run_all(calls: dict[str, Callable[[], Coroutine[Any, Any, None]]]) -> dict[str, BaseException | None]:
    async def one(call: Callable[[], Coroutine[Any, Any, None]]) -> BaseException | None:
        try:
            async with asyncio.timeout(BODY_TIMEOUT_S):
                await call()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # an assertion, pytest.fail or pytest.skip: its own test's outcome
            return exc
        return None

    outcomes = await asyncio.gather(*(one(call) for call in calls.values()))
    return dict(zip(calls, outcomes, strict=True))
