"""``magnetar`` and ``magnetar.asyncio`` export the same error classes, and every error
class a broker can send (by code) is reachable from both."""

from __future__ import annotations

import inspect

import magnetar
import magnetar.asyncio as ma
from magnetar.common.errors import MagnetarError


def _errors(module: object) -> dict[str, type]:
    names = module.__all__
    return {
        n: getattr(module, n) for n in names
        if inspect.isclass(getattr(module, n)) and issubclass(getattr(module, n), MagnetarError)
    }


def test_both_clients_export_the_same_error_classes() -> None:
    blocking, asyncio_ = _errors(magnetar), _errors(ma)
    assert blocking.keys() == asyncio_.keys()
    for name, cls in blocking.items():
        assert asyncio_[name] is cls


def test_the_errors_a_handle_can_fail_with_are_exported() -> None:
    for name in ("NotOwner", "TopicNotFound", "SubscriptionNotFound", "NamespaceNotFound", "TenantNotFound"):
        assert name in _errors(ma) and name in _errors(magnetar)
