"""Magnetar: persistent publish/subscribe messaging built like Apache Pulsar and BookKeeper."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from magnetar import exceptions
from magnetar.common.message_id import MessageId
from magnetar.exceptions import *  # noqa: F403 - the public errors, listed in exceptions.__all__

__version__ = "0.1.0"

if TYPE_CHECKING:
    from magnetar.client.sync import *  # noqa: F403 - the SDK's names (its __all__)

# The client SDK imports grpc: load it on first use so `import magnetar` stays cheap.
_SDK = frozenset({
    "AuthenticationBasic", "AuthenticationTLS", "AuthenticationToken", "BatchingType", "Client", "CompressionType", "Consumer", "ConsumerBatchReceivePolicy", "ConsumerDeadLetterPolicy",
    "ConsumerKeySharedPolicy", "ConsumerType", "HashingScheme", "InitialPosition", "KeySharedMode", "Message", "MultiplierRedeliveryBackoff", "PartitionsRoutingMode", "Producer",
    "ProducerAccessMode", "Reader", "RegexSubscriptionMode", "Result",
})  # fmt: skip


def __getattr__(name: str) -> Any:
    if name == "schema":  # ``magnetar.schema`` after ``import magnetar``, as ``pulsar.schema``
        return importlib.import_module("magnetar.schema")
    if name not in _SDK:
        raise AttributeError(f"module 'magnetar' has no attribute {name!r}")
    value = getattr(importlib.import_module("magnetar.client.sync"), name)
    globals()[name] = value
    return value


__all__ = [*sorted(_SDK), "MessageId", *exceptions.__all__]
