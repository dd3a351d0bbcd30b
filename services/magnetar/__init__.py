"""Magnetar: persistent publish/subscribe messaging built like Apache Pulsar and BookKeeper."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from magnetar.common.errors import (
    AlreadyExists,
    ConsumerBusy,
    InvalidArgument,
    InvalidTopicName,
    MagnetarError,
    MessageTooBig,
    NamespaceNotFound,
    NotConnected,
    NotFound,
    NotOwner,
    ProducerBusy,
    ServiceClosed,
    SubscriptionNotFound,
    TenantNotFound,
    Timeout,
    TopicNotFound,
)
from magnetar.common.message_id import MessageId

__version__ = "0.1.0"

if TYPE_CHECKING:
    from magnetar.client.message import Message
    from magnetar.client.options import (
        ConsumerDeadLetterPolicy,
        ConsumerType,
        HashingScheme,
        InitialPosition,
        PartitionsRoutingMode,
        Result,
    )
    from magnetar.client.sync import Client, Consumer, Producer, Reader

# The client SDK imports grpc: load it on first use so `import magnetar` stays cheap.
_LAZY = {
    "Client": "magnetar.client.sync",
    "Producer": "magnetar.client.sync",
    "Consumer": "magnetar.client.sync",
    "Reader": "magnetar.client.sync",
    "Message": "magnetar.client.message",
    "ConsumerType": "magnetar.client.options",
    "InitialPosition": "magnetar.client.options",
    "ConsumerDeadLetterPolicy": "magnetar.client.options",
    "PartitionsRoutingMode": "magnetar.client.options",
    "HashingScheme": "magnetar.client.options",
    "Result": "magnetar.client.options",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'magnetar' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AlreadyExists",
    "Client",
    "Consumer",
    "ConsumerBusy",
    "ConsumerDeadLetterPolicy",
    "ConsumerType",
    "HashingScheme",
    "InitialPosition",
    "InvalidArgument",
    "InvalidTopicName",
    "MagnetarError",
    "Message",
    "MessageId",
    "MessageTooBig",
    "NamespaceNotFound",
    "NotConnected",
    "NotFound",
    "NotOwner",
    "PartitionsRoutingMode",
    "Producer",
    "ProducerBusy",
    "Reader",
    "Result",
    "ServiceClosed",
    "SubscriptionNotFound",
    "TenantNotFound",
    "Timeout",
    "TopicNotFound",
]
