"""The errors an application sees, in one list, under pulsar-client's names
(``pulsar.exceptions``) and Magnetar's own: ``magnetar`` and ``magnetar.asyncio`` both
export exactly these.

``PulsarException`` is the root (``MagnetarError``), so ``except PulsarException``
catches every error the SDK raises. Each of pulsar-client's names is the class Magnetar
raises for the same condition (the same class object under both names where Magnetar
had one already, e.g. ``ServiceUnitNotReady`` is ``NotOwner``). Names of conditions
Magnetar does not have (transactions, encryption) are classes nothing raises. The table
is in docs/client.md.
"""

from magnetar.common.errors import (
    AlreadyClosed,
    AlreadyExists,
    AuthenticationError,
    AuthorizationError,
    BrokerPersistenceError,
    ChecksumMismatch,
    ConsumerAssignError,
    ConsumerBusy,
    ConsumerNotFound,
    ConsumerNotInitialized,
    CryptoError,
    CumulativeAcknowledgementNotAllowedError,
    ErrorGettingAuthenticationData,
    IncompatibleSchema,
    Interrupted,
    InvalidArgument,
    InvalidConfiguration,
    InvalidMessage,
    InvalidTopicName,
    InvalidTxnStatusError,
    InvalidUrl,
    LookupError,  # noqa: A004 - pulsar-client's name
    MagnetarError,
    MemoryBufferIsFull,
    MessageTooBig,
    MetadataError,
    NamespaceNotFound,
    NotAllowedError,
    NotConnected,
    NotEmpty,
    NotFound,
    NotGrpcServer,
    NotOwner,
    OperationNotSupported,
    PreconditionFailed,
    ProducerBlockedQuotaExceeded,
    ProducerBusy,
    ProducerFenced,
    ProducerNotInitialized,
    ProducerQueueIsFull,
    ReadError,
    ServiceClosed,
    SubscriptionNotFound,
    TenantNotFound,
    Timeout,
    TlsHandshakeFailed,
    TooManyLookupRequestException,
    TopicNotFound,
    TopicTerminated,
    TransactionConflict,
    TransactionCoordinatorNotFoundError,
    TransactionNotFound,
    UnknownError,
    UnsupportedVersionError,
)

# pulsar-client's names for classes Magnetar has under its own name.
PulsarException = MagnetarError
ConnectError = NotConnected
BrokerMetadataError = MetadataError
ChecksumError = ChecksumMismatch
ServiceUnitNotReady = NotOwner
ProducerBlockedQuotaExceededError = ProducerBlockedQuotaExceeded
ProducerBlockedQuotaExceededException = ProducerBlockedQuotaExceeded

__all__ = [
    "AlreadyClosed",
    "AlreadyExists",
    "AuthenticationError",
    "AuthorizationError",
    "BrokerMetadataError",
    "BrokerPersistenceError",
    "ChecksumError",
    "ConnectError",
    "ConsumerAssignError",
    "ConsumerBusy",
    "ConsumerNotFound",
    "ConsumerNotInitialized",
    "CryptoError",
    "CumulativeAcknowledgementNotAllowedError",
    "ErrorGettingAuthenticationData",
    "IncompatibleSchema",
    "Interrupted",
    "InvalidArgument",
    "InvalidConfiguration",
    "InvalidMessage",
    "InvalidTopicName",
    "InvalidTxnStatusError",
    "InvalidUrl",
    "LookupError",
    "MagnetarError",
    "MemoryBufferIsFull",
    "MessageTooBig",
    "NamespaceNotFound",
    "NotAllowedError",
    "NotConnected",
    "NotEmpty",
    "NotFound",
    "NotGrpcServer",
    "NotOwner",
    "OperationNotSupported",
    "PreconditionFailed",
    "ProducerBlockedQuotaExceeded",
    "ProducerBlockedQuotaExceededError",
    "ProducerBlockedQuotaExceededException",
    "ProducerBusy",
    "ProducerFenced",
    "ProducerNotInitialized",
    "ProducerQueueIsFull",
    "PulsarException",
    "ReadError",
    "ServiceClosed",
    "ServiceUnitNotReady",
    "SubscriptionNotFound",
    "TenantNotFound",
    "Timeout",
    "TlsHandshakeFailed",
    "TooManyLookupRequestException",
    "TopicNotFound",
    "TopicTerminated",
    "TransactionConflict",
    "TransactionCoordinatorNotFoundError",
    "TransactionNotFound",
    "UnknownError",
    "UnsupportedVersionError",
]
