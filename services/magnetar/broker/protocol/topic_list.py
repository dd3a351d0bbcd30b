"""GET_TOPICS_OF_NAMESPACE at the Pulsar protocol door: a namespace's topics, for pattern
subscriptions (the client asks again every ``pattern_auto_discovery_period`` and
subscribes to the topics that appeared).

As Pulsar's broker answers: the topics of the mode's domains (the non-persistent ones asked
of every owner of the namespace's bundles: :mod:`magnetar.broker.nonpersistent.listing`),
a partitioned topic as its partitions (the C++ client folds them back into
the partitioned topic), the list's hash (``topics_hash``; a client that sent the hash of
what it has gets ``changed = false`` and no names), and, when the request carries a
``topics_pattern`` of at most :data:`MAX_PATTERN_LENGTH` characters that is a regular
expression here, only the matching topics with ``filtered = true`` (otherwise the client
filters). Authorization is the gRPC ``ListTopics``'s: ``lookup`` on the namespace.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Protocol

from magnetar.broker.authorization import Action
from magnetar.broker.authorizer import admin_request
from magnetar.broker.nonpersistent.listing import TopicsMode
from magnetar.broker.protocol.errors import server_error
from magnetar.common.errors import InvalidArgument, MagnetarError
from magnetar.common.names import NamespaceName
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol import commands, topic_list

if TYPE_CHECKING:
    from magnetar.broker.authorizer import Authorizer
    from magnetar.broker.service import BrokerService
    from magnetar.protocol.frames import Frame

log = logging.getLogger(__name__)

MAX_PATTERN_LENGTH = 50
"""Pulsar's ``subscriptionPatternMaxLength``: a longer pattern is left to the client."""

class TopicListConnection(Protocol):
    service: BrokerService
    role: str | None

    @property
    def authorizer(self) -> Authorizer | None: ...

    def write(self, command: pb.BaseCommand) -> None: ...


async def get_topics_of_namespace(conn: TopicListConnection, frame: Frame) -> None:
    """Answer one GET_TOPICS_OF_NAMESPACE (an ERROR with the request id when it fails)."""
    request = frame.command.getTopicsOfNamespace
    rid = request.request_id
    try:
        answer = await _answer(conn, request)
    except MagnetarError as exc:
        answer = commands.error(rid, server_error(exc), exc.message)
    except Exception as exc:
        log.exception("GET_TOPICS_OF_NAMESPACE of %r failed", request.namespace)
        answer = commands.error(rid, pb.UnknownError, f"internal error: {exc!r}")
    conn.write(answer)


async def _answer(conn: TopicListConnection, request: pb.CommandGetTopicsOfNamespace) -> pb.BaseCommand:
    if not isinstance(request.namespace, str):  # proto2 hands over a string that is not UTF-8 as bytes
        raise InvalidArgument(f"namespace name {request.namespace!r} is not UTF-8")
    namespace = str(NamespaceName.parse(request.namespace))
    if conn.authorizer is not None:
        await conn.authorizer.check(conn.role, admin_request(Action.LOOKUP, namespace=namespace))
    mode = TopicsMode(request.mode) if request.mode in TopicsMode.__members__.values() else TopicsMode.PERSISTENT
    topics = await conn.service.namespace_topics(namespace, mode, as_partitions=True)
    pattern = _pattern(request)
    if pattern is not None:
        topics = topic_list.filter_topics(topics, pattern)
    digest = topic_list.topics_hash(topics)
    changed = not (request.HasField("topics_hash") and request.topics_hash == digest)
    return commands.topics_of_namespace(
        request.request_id, topics if changed else [], topics_hash=digest, filtered=pattern is not None, changed=changed
    )


def _pattern(request: pb.CommandGetTopicsOfNamespace) -> re.Pattern[str] | None:
    if not request.HasField("topics_pattern") or not isinstance(request.topics_pattern, str):
        return None
    if len(request.topics_pattern) > MAX_PATTERN_LENGTH:
        return None
    try:
        return topic_list.compile_pattern(request.topics_pattern)
    except re.error:  # a pattern of another regex dialect: the client filters
        return None
