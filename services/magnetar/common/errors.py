"""The one error tree of Magnetar.

    MagnetarError
    ├── InvalidArgument          bad input from a caller; nothing was changed
    │   ├── EntryTooLarge
    │   ├── ProtocolError        bytes that are not a frame of Pulsar's binary protocol
    │   │   └── ChecksumMismatch a payload whose CRC32C does not match (the frame is whole)
    │   ├── InvalidTopicName
    │   ├── InvalidConfiguration an option the SDK refuses (pulsar-client's name)
    │   ├── InvalidUrl           a service URL that does not parse
    │   ├── CumulativeAcknowledgementNotAllowedError  on Shared and Key_Shared
    │   ├── MessageTooBig
    │   ├── NotEmpty             a tenant with namespaces, a namespace with topics
    │   └── PreconditionFailed   valid input the current state refuses (an unknown cluster)
    │       └── IncompatibleSchema  a schema other than the one the topic has
    ├── AlreadyExists            tenant, namespace or topic exists already
    ├── NotFound
    │   ├── NoSuchLedger
    │   ├── NoSuchEntry
    │   ├── TenantNotFound, NamespaceNotFound
    │   ├── TopicNotFound
    │   └── SubscriptionNotFound
    ├── LedgerFenced             the ledger was fenced; the writer lost ownership
    ├── BookieReadOnly           the bookie refuses writes (disk nearly full)
    ├── ConsumerBusy             an Exclusive subscription has a consumer already
    ├── ConsumerAssignError      a Key_Shared sticky hash range another consumer holds
    ├── ProducerBusy             a producer with that name is connected already, or the
    │                            topic is held by an exclusive producer
    ├── ProducerFenced           an exclusive producer holds (or took) the topic
    ├── ProducerBlockedQuotaExceeded  the topic's backlog is over its namespace's quota
    ├── TopicTerminated          the topic was terminated: it takes no more messages
    ├── ProducerQueueIsFull      the producer's pending queue is full (client side, not waiting)
    ├── NotOwner                 this broker does not serve the topic (look it up again)
    ├── AuthenticationError      no token, or a bad, expired or wrongly signed one
    ├── AuthorizationError       the caller's role may not do that
    ├── NotEnoughBookies
    ├── MetadataError            ZooKeeper trouble
    │   └── MetadataVersionConflict
    ├── Timeout
    ├── NotConnected
    │   ├── TlsHandshakeFailed   the server's certificate (or its host name) is not trusted
    │   └── NotGrpcServer        the address answers in another protocol (Pulsar's port)
    ├── OperationNotSupported    a call the handle does not support (pulsar-client's name)
    ├── ServiceClosed
    │   └── AlreadyClosed        the application closed that client, producer, consumer or reader
    ├── InvalidMessage           a received payload its consumer's schema does not decode
    └── (pulsar-client's names for conditions Magnetar does not have; never raised)

Every class has a stable ``code`` (sent over the wire), a ``retriable`` flag and a
``grpc_status`` name that servers map to ``grpc.StatusCode`` (this module imports no
grpc). ``from_code`` rebuilds the typed error on the client side.

``magnetar.exceptions`` gives the application pulsar-client's names for these classes
(``PulsarException`` is ``MagnetarError``); docs/client.md has the mapping.
"""

from __future__ import annotations

from typing import ClassVar


class MagnetarError(Exception):
    """Root of every error Magnetar raises on purpose."""

    code: ClassVar[str] = "INTERNAL"
    grpc_status: ClassVar[str] = "INTERNAL"
    retriable: ClassVar[bool] = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.__class__.__name__)
        self.message = message or self.__class__.__name__


class InvalidArgument(MagnetarError):
    code = "INVALID_ARGUMENT"
    grpc_status = "INVALID_ARGUMENT"


class EntryTooLarge(InvalidArgument):
    code = "ENTRY_TOO_LARGE"

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"entry of {size} bytes is larger than the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class ProtocolError(InvalidArgument):
    """Bytes received on a Pulsar protocol connection that are not a frame the protocol
    allows: a size over the limit or too small, a command that does not parse, bytes
    left over. The stream cannot be followed past it: the connection is closed."""

    code = "PROTOCOL_ERROR"


class ChecksumMismatch(ProtocolError):
    """A payload command whose CRC32C does not match its metadata and payload. The frame
    itself is whole, so the stream goes on: a SEND is refused with ChecksumError."""

    code = "CHECKSUM_MISMATCH"

    def __init__(self, expected: int, actual: int) -> None:
        super().__init__(f"checksum mismatch: the frame carries CRC32C {expected:#010x}, its bytes give {actual:#010x}")
        self.expected = expected
        self.actual = actual


class InvalidTopicName(InvalidArgument):
    code = "INVALID_TOPIC_NAME"


class PreconditionFailed(InvalidArgument):
    """Well-formed input that the cluster's state refuses (Pulsar's 412)."""

    code = "PRECONDITION_FAILED"
    grpc_status = "FAILED_PRECONDITION"


class IncompatibleSchema(PreconditionFailed):
    """A producer or consumer declared a schema its topic's registry refuses (incompatible
    under the compatibility strategy, a new version while automatic updates are off, no
    schema while ``schemaValidationEnforced``)."""

    code = "INCOMPATIBLE_SCHEMA"


class InvalidSchema(InvalidArgument):
    """A schema whose definition does not parse for its type (an Avro or JSON schema
    that is not Avro, a PROTOBUF_NATIVE descriptor that does not decode...)."""

    code = "INVALID_SCHEMA"


class InvalidConfiguration(InvalidArgument):
    """An SDK option with a bad value, or one Magnetar cannot honour (pulsar-client's
    ``InvalidConfiguration``). Client side only: nothing was sent."""

    code = "INVALID_CONFIGURATION"


class InvalidUrl(InvalidArgument):
    """A service URL the SDK cannot parse (pulsar-client's ``InvalidUrl``)."""

    code = "INVALID_URL"


class CumulativeAcknowledgementNotAllowedError(InvalidArgument):
    """A cumulative acknowledgement on a Shared or Key_Shared subscription, which has no
    single order to acknowledge up to (pulsar-client's name)."""

    code = "CUMULATIVE_ACKNOWLEDGEMENT_NOT_ALLOWED"


class NotEmpty(InvalidArgument):
    """A tenant still has namespaces, or a namespace topics: delete those first."""

    code = "NOT_EMPTY"
    grpc_status = "FAILED_PRECONDITION"


class MessageTooBig(InvalidArgument):
    code = "MESSAGE_TOO_BIG"

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"message of {size} bytes is larger than the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class AlreadyExists(MagnetarError):
    code = "ALREADY_EXISTS"
    grpc_status = "ALREADY_EXISTS"


class NotFound(MagnetarError):
    code = "NOT_FOUND"
    grpc_status = "NOT_FOUND"


class NoSuchLedger(NotFound):
    code = "NO_SUCH_LEDGER"

    def __init__(self, ledger_id: int, where: str = "") -> None:
        super().__init__(f"no such ledger: {ledger_id}" + (f" on {where}" if where else ""))
        self.ledger_id = ledger_id


class NoSuchEntry(NotFound):
    code = "NO_SUCH_ENTRY"

    def __init__(self, ledger_id: int, entry_id: int, where: str = "") -> None:
        super().__init__(
            f"no such entry: ledger {ledger_id} entry {entry_id}" + (f" on {where}" if where else "")
        )
        self.ledger_id = ledger_id
        self.entry_id = entry_id


class TenantNotFound(NotFound):
    code = "TENANT_NOT_FOUND"


class ClusterNotFound(NotFound):
    code = "CLUSTER_NOT_FOUND"


class NamespaceNotFound(NotFound):
    code = "NAMESPACE_NOT_FOUND"


class TopicNotFound(NotFound):
    code = "TOPIC_NOT_FOUND"


class SchemaNotFound(NotFound):
    """The topic has no schema (none registered, or deleted), or not the version asked for."""

    code = "SCHEMA_NOT_FOUND"


class SubscriptionNotFound(NotFound):
    code = "SUBSCRIPTION_NOT_FOUND"


class ConsumerBusy(MagnetarError):
    code = "CONSUMER_BUSY"
    grpc_status = "FAILED_PRECONDITION"


class ConsumerAssignError(MagnetarError):
    """A Key_Shared STICKY consumer declared a hash range another consumer of the
    subscription holds (pulsar-client's ``ConsumerAssignError``)."""

    code = "CONSUMER_ASSIGN_ERROR"
    grpc_status = "FAILED_PRECONDITION"


class ProducerBusy(MagnetarError):
    code = "PRODUCER_BUSY"
    grpc_status = "FAILED_PRECONDITION"


class TopicTerminated(MagnetarError):
    """The topic was terminated (``terminate``): it takes no new producer and no
    message (Pulsar's TopicTerminatedException). Not retriable."""

    code = "TOPIC_TERMINATED"
    grpc_status = "FAILED_PRECONDITION"


class ProducerFenced(MagnetarError):
    """An exclusive producer holds the topic, took it from this producer
    (ExclusiveWithFencing), or held it since this producer was given its topic epoch
    (Pulsar's ProducerFencedException). Not retriable: a fenced producer stays fenced."""

    code = "PRODUCER_FENCED"
    grpc_status = "FAILED_PRECONDITION"


class ProducerBlockedQuotaExceeded(MagnetarError):
    """The topic's backlog is over its namespace's backlog quota (policy
    ``producer_exception`` or ``producer_request_hold``): sends and new producers are
    refused until consumers catch up (Pulsar's ProducerBlockedQuotaExceededException)."""

    code = "PRODUCER_BLOCKED_QUOTA_EXCEEDED"
    grpc_status = "RESOURCE_EXHAUSTED"


class ProducerQueueIsFull(MagnetarError):
    """The producer already has ``max_pending_messages`` sends waiting for the broker and
    was told not to wait (``block_if_queue_full=False``); nothing was sent (Pulsar's
    ``ProducerQueueIsFull``). Raised by ``send``; ``send_async`` hands it to its callback.
    Retriable: the same send is taken once earlier sends have their outcome. Client side
    only, never sent over the wire."""

    code = "PRODUCER_QUEUE_IS_FULL"
    grpc_status = "RESOURCE_EXHAUSTED"
    retriable = True


class NotOwner(MagnetarError):
    code = "NOT_OWNER"
    grpc_status = "FAILED_PRECONDITION"
    retriable = True


class AuthenticationError(MagnetarError):
    """The caller did not prove who it is: no token, or a malformed, expired or wrongly
    signed one (Pulsar's AuthenticationException). Never retried: the same token fails
    again. Messages name the reason, never the token."""

    code = "AUTHENTICATION_ERROR"
    grpc_status = "UNAUTHENTICATED"


class AuthorizationError(MagnetarError):
    """The caller's role is known but may not do that (Pulsar's AuthorizationException)."""

    code = "AUTHORIZATION_ERROR"
    grpc_status = "PERMISSION_DENIED"


class LedgerFenced(MagnetarError):
    code = "LEDGER_FENCED"
    grpc_status = "FAILED_PRECONDITION"

    def __init__(self, ledger_id: int) -> None:
        super().__init__(f"ledger {ledger_id} is fenced: another writer has recovered it")
        self.ledger_id = ledger_id


class BookieReadOnly(MagnetarError):
    code = "BOOKIE_READ_ONLY"
    grpc_status = "UNAVAILABLE"
    retriable = True


class NotEnoughBookies(MagnetarError):
    code = "NOT_ENOUGH_BOOKIES"
    grpc_status = "UNAVAILABLE"
    retriable = True

    def __init__(self, needed: int, found: int) -> None:
        super().__init__(f"not enough writable bookies: needed {needed}, found {found}")
        self.needed = needed
        self.found = found


class MetadataError(MagnetarError):
    code = "METADATA_ERROR"
    grpc_status = "UNAVAILABLE"
    retriable = True


class MetadataVersionConflict(MetadataError):
    code = "METADATA_VERSION_CONFLICT"
    grpc_status = "ABORTED"


class Timeout(MagnetarError):
    code = "TIMEOUT"
    grpc_status = "DEADLINE_EXCEEDED"
    retriable = True


class NotConnected(MagnetarError):
    code = "NOT_CONNECTED"
    grpc_status = "UNAVAILABLE"
    retriable = True


class TlsHandshakeFailed(NotConnected):
    """The TLS handshake was refused: the server's certificate is not signed by a trusted
    CA or not issued for the host name dialled. Not retried: it fails the same way until
    the configuration changes."""

    code = "TLS_HANDSHAKE_FAILED"
    retriable = False


class NotGrpcServer(NotConnected):
    """The address answered in a protocol other than gRPC's HTTP/2: most likely a broker's
    Pulsar binary protocol port (6650) given to the Magnetar SDK, whose port is the
    broker's gRPC one (6660). Not retried: it answers the same way every time."""

    code = "NOT_GRPC_SERVER"
    retriable = False


class ServiceClosed(MagnetarError):
    code = "SERVICE_CLOSED"
    grpc_status = "UNAVAILABLE"
    retriable = True


class AlreadyClosed(ServiceClosed):
    """The application closed (or shut down) the client, producer, consumer or reader it
    calls (pulsar-client's ``AlreadyClosed``). Client side only, never sent over the wire.
    Retriable as any ServiceClosed (the gateway tells its clients a send its closing
    producer refused may be sent again); the handle itself stays closed."""

    code = "ALREADY_CLOSED"


class OperationNotSupported(MagnetarError):
    """A call the handle does not support: ``get_last_message_id`` on a consumer of a
    partitioned topic or of several topics (pulsar-client's ``OperationNotSupported``)."""

    code = "OPERATION_NOT_SUPPORTED"
    grpc_status = "UNIMPLEMENTED"


# pulsar-client's names (pulsar.exceptions) for conditions Magnetar has no counterpart of
# (transactions, encryption, a lookup throttle, ...). Nothing raises them; they exist so
# code written against pulsar-client that names them in an ``except`` clause runs.
class UnknownError(MagnetarError):
    code = "UNKNOWN_ERROR"


class LookupError(MagnetarError):  # noqa: A001 - pulsar-client's name; shadows the builtin here only
    code = "LOOKUP_ERROR"


class ReadError(MagnetarError):
    code = "READ_ERROR"


class ErrorGettingAuthenticationData(MagnetarError):
    code = "ERROR_GETTING_AUTHENTICATION_DATA"


class BrokerPersistenceError(MagnetarError):
    code = "BROKER_PERSISTENCE_ERROR"


class InvalidMessage(MagnetarError):
    """A received payload that does not decode with the consumer's schema (raised by
    ``Message.value()``; pulsar-client's name)."""

    code = "INVALID_MESSAGE"


class ConsumerNotInitialized(MagnetarError):
    code = "CONSUMER_NOT_INITIALIZED"


class ProducerNotInitialized(MagnetarError):
    code = "PRODUCER_NOT_INITIALIZED"


class TooManyLookupRequestException(MagnetarError):
    code = "TOO_MANY_LOOKUP_REQUESTS"


class ConsumerNotFound(MagnetarError):
    code = "CONSUMER_NOT_FOUND"


class UnsupportedVersionError(MagnetarError):
    code = "UNSUPPORTED_VERSION"


class CryptoError(MagnetarError):
    code = "CRYPTO_ERROR"


class TransactionCoordinatorNotFoundError(MagnetarError):
    code = "TRANSACTION_COORDINATOR_NOT_FOUND"


class InvalidTxnStatusError(MagnetarError):
    code = "INVALID_TXN_STATUS"


class NotAllowedError(MagnetarError):
    """Not allowed on this kind of topic (a seek or last message id on a non-persistent
    topic: nothing is kept); Pulsar's ``NotAllowedError``."""

    code = "NOT_ALLOWED"
    grpc_status = "FAILED_PRECONDITION"


class TransactionConflict(MagnetarError):
    code = "TRANSACTION_CONFLICT"


class TransactionNotFound(MagnetarError):
    code = "TRANSACTION_NOT_FOUND"


class MemoryBufferIsFull(MagnetarError):
    code = "MEMORY_BUFFER_IS_FULL"


class Interrupted(MagnetarError):
    code = "INTERRUPTED"


def _all_subclasses(cls: type[MagnetarError]) -> list[type[MagnetarError]]:
    out = [cls]
    for sub in cls.__subclasses__():
        out.extend(_all_subclasses(sub))
    return out


def from_code(code: str, message: str) -> MagnetarError:
    """Rebuild the typed error a peer reported by its stable code."""
    for cls in _all_subclasses(MagnetarError):
        if cls.code == code:
            err = MagnetarError.__new__(cls)
            MagnetarError.__init__(err, message)
            return err
    return MagnetarError(message)
