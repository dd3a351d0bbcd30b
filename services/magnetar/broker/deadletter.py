"""Retry letter topics and dead letter queues: the policy in force, and the copies.

A consumer asks for a dead-letter policy when it subscribes (``Subscribe.enable_retry``,
``Subscribe.dead_letter_policy``). Each part it leaves empty takes the namespace's
default (its policies' ``dead_letter_policy`` key, see
:mod:`magnetar.metadata.tenants`), then the built-in one:

- ``max_redeliver_count`` 16;
- retry letter topic ``{topic}-{subscription}-RETRY``, dead letter topic
  ``{topic}-{subscription}-DLQ`` (``{topic}`` is the local name of the topic, of the
  partitioned topic for a partition; a name without ``/`` is in the topic's namespace);
- the DLQ's initial subscription ``{subscription}-DLQ-sub``.

The broker moves messages (the SDK only asks):

- ``reconsume_later`` (:func:`plan_reconsume`): a copy, delayed, to the retry topic, with
  ``REAL_TOPIC``, ``ORIGIN_MESSAGE_ID`` (both kept from the first copy on), ``RETRY_TOPIC``,
  ``RECONSUMETIMES`` (1 on the first retry) and ``DELAY_TIME`` (ms), plus the original's
  properties, key and event time. When ``RECONSUMETIMES`` would exceed
  ``max_redeliver_count`` the copy goes to the DLQ instead, with a ``DEAD_LETTER_REASON``.
- negative acks (:func:`plan_dead_letter`): an entry whose redelivery count reached
  ``max_redeliver_count`` goes to the DLQ instead of being delivered again.

Every copy is published under the producer name ``__move:<subscription>:<ORIGIN_MESSAGE_ID>``
with sequence id ``RECONSUMETIMES`` of the copy (the original's + 1): the target topic's
deduplication then stores a repeated move (a crash between publishing the copy and
acknowledging the original) only once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from magnetar.broker.dispatch.delayed import MAX_DELAY_MS
from magnetar.common.errors import InvalidArgument, InvalidTopicName
from magnetar.common.names import TopicName
from magnetar.proto.v1 import broker_pb2 as pb

REAL_TOPIC = "REAL_TOPIC"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RETRY_TOPIC = "RETRY_TOPIC"
RECONSUMETIMES = "RECONSUMETIMES"
DELAY_TIME = "DELAY_TIME"
DEAD_LETTER_REASON = "DEAD_LETTER_REASON"

DEFAULT_MAX_REDELIVER_COUNT = 16
DEFAULT_RETRY_LETTER_TOPIC = "{topic}-{subscription}-RETRY"
DEFAULT_DEAD_LETTER_TOPIC = "{topic}-{subscription}-DLQ"
DEFAULT_INITIAL_SUBSCRIPTION = "{subscription}-DLQ-sub"
MOVE_PRODUCER_PREFIX = "__move:"
DEAD_LETTER_KEY = "dead_letter_policy"
"""The key of a namespace's policies that holds its :class:`DeadLetterDefaults`."""


@dataclass(frozen=True)
class DeadLetterDefaults:
    """A namespace's defaults (None: the built-in one). Topic names and the initial
    subscription may use ``{topic}`` and ``{subscription}``."""

    max_redeliver_count: int | None = None
    retry_letter_topic: str | None = None
    dead_letter_topic: str | None = None
    initial_subscription_name: str | None = None

    def to_document(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    @classmethod
    def from_document(cls, doc: dict[str, Any]) -> DeadLetterDefaults:
        """Raises InvalidArgument: an unknown key or a bad value."""
        unknown = set(doc) - set(cls.__dataclass_fields__)
        if unknown:
            raise InvalidArgument(f"unknown dead-letter policy field(s): {', '.join(sorted(unknown))}")
        out = cls(**doc)
        out.check()
        return out

    def check(self) -> None:
        """Raises InvalidArgument: a count below 1 or a name that cannot make a topic."""
        count = self.max_redeliver_count
        if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
            raise InvalidArgument(f"max_redeliver_count must be an integer >= 1, not {count!r}")
        for field in ("retry_letter_topic", "dead_letter_topic", "initial_subscription_name"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise InvalidArgument(f"{field} must be a non-empty string, not {value!r}")
        # The patterns must give valid names for an ordinary topic.
        resolve("persistent://t/ns/topic", "sub", None, self)


@dataclass(frozen=True)
class DeadLetterPolicy:
    """The policy in force for a consumer: names fully qualified."""

    max_redeliver_count: int
    retry_letter_topic: str
    dead_letter_topic: str
    initial_subscription_name: str

    def to_proto(self) -> pb.DeadLetterPolicy:
        return pb.DeadLetterPolicy(
            max_redeliver_count=self.max_redeliver_count, retry_letter_topic=self.retry_letter_topic,
            dead_letter_topic=self.dead_letter_topic, initial_subscription_name=self.initial_subscription_name,
        )


def _expand(pattern: str, topic: TopicName, subscription: str) -> str:
    return pattern.replace("{topic}", topic.partitioned_topic_name.local_name).replace("{subscription}", subscription)


def _topic(name: str, topic: TopicName, what: str) -> str:
    try:
        if "/" in name:
            return str(TopicName.parse(name))
        return str(topic.namespace.topic(name))
    except InvalidTopicName as exc:
        raise InvalidArgument(f"the {what} {name!r} is not a valid topic name: {exc.message}") from None


def resolve(
    topic: str, subscription: str, asked: pb.DeadLetterPolicy | None, defaults: DeadLetterDefaults | None
) -> DeadLetterPolicy:
    """The policy for a consumer of ``subscription`` on ``topic``: what it asked for, else
    the namespace's default, else the built-in one.

    Raises:
        InvalidArgument: a name that is not a valid topic or subscription name.
    """
    name = TopicName.parse(topic)
    d = defaults or DeadLetterDefaults()
    a = asked or pb.DeadLetterPolicy()
    count = a.max_redeliver_count or d.max_redeliver_count or DEFAULT_MAX_REDELIVER_COUNT
    retry = a.retry_letter_topic or _expand(d.retry_letter_topic or DEFAULT_RETRY_LETTER_TOPIC, name, subscription)
    dead = a.dead_letter_topic or _expand(d.dead_letter_topic or DEFAULT_DEAD_LETTER_TOPIC, name, subscription)
    initial = a.initial_subscription_name or _expand(
        d.initial_subscription_name or DEFAULT_INITIAL_SUBSCRIPTION, name, subscription
    )
    if "/" in initial or not initial.strip():
        raise InvalidArgument(f"the initial subscription name {initial!r} is not a valid subscription name")
    return DeadLetterPolicy(
        count, _topic(retry, name, "retry letter topic"), _topic(dead, name, "dead letter topic"), initial
    )


@dataclass(frozen=True)
class Move:
    """One copy to publish: where, what, and its deduplication key."""

    target: str
    message: pb.SingleMessage
    producer_name: str
    sequence_id: int
    dead: bool
    """True: to the dead letter topic."""


def _times(single: pb.SingleMessage) -> int:
    """The retries the message had (its ``RECONSUMETIMES``; 0 when none or garbled)."""
    try:
        return max(0, int(single.properties.get(RECONSUMETIMES, "0")))
    except ValueError:
        return 0


def _copy(single: pb.SingleMessage, source_topic: str, message_id: str) -> tuple[pb.SingleMessage, str]:
    copy = pb.SingleMessage(
        payload=single.payload, partition_key=single.partition_key, has_partition_key=single.has_partition_key,
        event_time_ms=single.event_time_ms,
    )
    copy.properties.update(single.properties)
    copy.properties[REAL_TOPIC] = single.properties.get(REAL_TOPIC) or source_topic
    origin = single.properties.get(ORIGIN_MESSAGE_ID) or message_id
    copy.properties[ORIGIN_MESSAGE_ID] = origin
    return copy, origin


def plan_reconsume(
    policy: DeadLetterPolicy, subscription: str, source_topic: str, message_id: str, single: pb.SingleMessage,
    delay_ms: int, now_ms: int | None = None,
) -> Move:
    """The copy ``reconsume_later`` publishes: to the retry topic, delayed by ``delay_ms``,
    or to the DLQ once the retries would exceed ``max_redeliver_count``.

    Raises:
        InvalidArgument: a delay outside 1 s – 864,000 s.
    """
    if not 1000 <= delay_ms <= MAX_DELAY_MS:
        raise InvalidArgument(f"a reconsume_later delay is 1 s to 864,000 s, not {delay_ms} ms")
    times = _times(single) + 1
    copy, origin = _copy(single, source_topic, message_id)
    producer = f"{MOVE_PRODUCER_PREFIX}{subscription}:{origin}"
    if times > policy.max_redeliver_count:
        copy.properties[DEAD_LETTER_REASON] = (
            f"reconsume_later after {times - 1} retries; max_redeliver_count is {policy.max_redeliver_count}"
        )
        return Move(policy.dead_letter_topic, copy, producer, times, dead=True)
    copy.properties[RETRY_TOPIC] = policy.retry_letter_topic
    copy.properties[RECONSUMETIMES] = str(times)
    copy.properties[DELAY_TIME] = str(delay_ms)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    copy.deliver_at_ms = now + delay_ms
    return Move(policy.retry_letter_topic, copy, producer, times, dead=False)


def plan_dead_letter(
    policy: DeadLetterPolicy, subscription: str, source_topic: str, message_id: str, single: pb.SingleMessage,
    redelivery_count: int,
) -> Move:
    """The DLQ copy of a message redelivered ``redelivery_count`` times (negative acks)."""
    copy, origin = _copy(single, source_topic, message_id)
    copy.properties[DEAD_LETTER_REASON] = (
        f"redelivery count {redelivery_count} reached max_redeliver_count {policy.max_redeliver_count}"
    )
    producer = f"{MOVE_PRODUCER_PREFIX}{subscription}:{origin}"
    return Move(policy.dead_letter_topic, copy, producer, _times(single) + 1, dead=True)
