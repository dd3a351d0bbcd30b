"""The one table from Magnetar's errors to Pulsar's ``ServerError`` codes."""

from __future__ import annotations

from magnetar.common import errors as e
from magnetar.proto.pulsar import pulsar_api_pb2 as pb

SERVER_ERRORS: dict[type[e.MagnetarError], pb.ServerError] = {
    e.ChecksumMismatch: pb.ChecksumError,
    e.InvalidTopicName: pb.InvalidTopicName,
    e.IncompatibleSchema: pb.IncompatibleSchema,
    e.InvalidSchema: pb.IncompatibleSchema,  # as Pulsar's brokers answer a schema that does not parse
    e.InvalidArgument: pb.NotAllowedError,  # bad input, too-big messages, protocol errors
    e.TopicNotFound: pb.TopicNotFound,
    e.SubscriptionNotFound: pb.SubscriptionNotFound,
    e.NamespaceNotFound: pb.TopicNotFound,  # the client asked for a topic: it is not there
    e.TenantNotFound: pb.TopicNotFound,
    e.NoSuchLedger: pb.PersistenceError,
    e.NoSuchEntry: pb.PersistenceError,
    e.NotFound: pb.TopicNotFound,
    e.AlreadyExists: pb.NotAllowedError,
    e.NotAllowedError: pb.NotAllowedError,
    e.ConsumerBusy: pb.ConsumerBusy,
    e.ConsumerAssignError: pb.ConsumerAssignError,
    e.ProducerBusy: pb.ProducerBusy,
    e.ProducerFenced: pb.ProducerFenced,
    e.ProducerBlockedQuotaExceeded: pb.ProducerBlockedQuotaExceededException,
    e.TopicTerminated: pb.TopicTerminatedError,
    # Retriable: the C++ client looks the topic up again until its operation timeout.
    e.NotOwner: pb.ServiceNotReady,
    e.ServiceClosed: pb.ServiceNotReady,
    e.Timeout: pb.ServiceNotReady,
    e.NotConnected: pb.ServiceNotReady,
    e.AuthenticationError: pb.AuthenticationError,
    e.AuthorizationError: pb.AuthorizationError,
    e.LedgerFenced: pb.PersistenceError,
    e.BookieReadOnly: pb.PersistenceError,
    e.NotEnoughBookies: pb.PersistenceError,
    e.MetadataError: pb.MetadataError,
}
"""Looked up along the error's class hierarchy (the nearest class listed wins)."""


def server_error(exc: e.MagnetarError) -> pb.ServerError:
    """The ``ServerError`` a client gets for ``exc`` (UnknownError for none listed)."""
    for cls in type(exc).__mro__:
        code = SERVER_ERRORS.get(cls)
        if code is not None:
            return code
    return pb.UnknownError
