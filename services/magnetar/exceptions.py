"""The errors an application sees, in one list (as pulsar-client's ``pulsar.exceptions``):
``magnetar`` and ``magnetar.asyncio`` both export exactly these."""

from magnetar.common.errors import (
    AlreadyExists,
    ConsumerBusy,
    InvalidArgument,
    InvalidTopicName,
    MagnetarError,
    MessageTooBig,
    NamespaceNotFound,
    NotConnected,
    NotEmpty,
    NotFound,
    NotOwner,
    PreconditionFailed,
    ProducerBusy,
    ServiceClosed,
    SubscriptionNotFound,
    TenantNotFound,
    Timeout,
    TopicNotFound,
)

__all__ = [
    "AlreadyExists",
    "ConsumerBusy",
    "InvalidArgument",
    "InvalidTopicName",
    "MagnetarError",
    "MessageTooBig",
    "NamespaceNotFound",
    "NotConnected",
    "NotFound",
    "NotEmpty",
    "NotOwner",
    "PreconditionFailed",
    "ProducerBusy",
    "ServiceClosed",
    "SubscriptionNotFound",
    "TenantNotFound",
    "Timeout",
    "TopicNotFound",
]
