"""The dead-letter policy in force for a consumer: what it asked for when it subscribed
(``Subscribe.enable_retry``, ``Subscribe.dead_letter_policy``), else its namespace's
default (the policies' ``dead_letter_policy`` key, see :mod:`magnetar.metadata.tenants`),
else the built-in one:

- ``max_redeliver_count`` 16;
- retry letter topic ``{topic}-{subscription}-RETRY``, dead letter topic
  ``{topic}-{subscription}-DLQ`` (``{topic}`` is the local name of the topic, of the
  partitioned topic for a partition; a name without ``/`` is in the topic's namespace);
- the DLQ's initial subscription ``{subscription}-DLQ-sub``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from magnetar.common.errors import InvalidArgument, InvalidTopicName
from magnetar.common.names import TopicName, check_subscription_name

DEFAULT_MAX_REDELIVER_COUNT = 16
DEFAULT_RETRY_LETTER_TOPIC = "{topic}-{subscription}-RETRY"
DEFAULT_DEAD_LETTER_TOPIC = "{topic}-{subscription}-DLQ"
DEFAULT_INITIAL_SUBSCRIPTION = "{subscription}-DLQ-sub"
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
    topic: str, subscription: str, asked: DeadLetterDefaults | None, defaults: DeadLetterDefaults | None
) -> DeadLetterPolicy:
    """The policy for a consumer of ``subscription`` on ``topic``: what it asked for, else
    the namespace's default, else the built-in one (field by field; a field asked as 0 or
    '' counts as not asked, as on the wire).

    Raises:
        InvalidArgument: a name that is not a valid topic or subscription name.
    """
    name = TopicName.parse(topic)
    d = defaults or DeadLetterDefaults()
    a = asked or DeadLetterDefaults()
    count = a.max_redeliver_count or d.max_redeliver_count or DEFAULT_MAX_REDELIVER_COUNT
    retry = a.retry_letter_topic or _expand(d.retry_letter_topic or DEFAULT_RETRY_LETTER_TOPIC, name, subscription)
    dead = a.dead_letter_topic or _expand(d.dead_letter_topic or DEFAULT_DEAD_LETTER_TOPIC, name, subscription)
    initial = a.initial_subscription_name or _expand(
        d.initial_subscription_name or DEFAULT_INITIAL_SUBSCRIPTION, name, subscription
    )
    if not initial.strip():
        raise InvalidArgument(f"the initial subscription name {initial!r} is not a valid subscription name")
    try:
        check_subscription_name(initial)
    except InvalidArgument as exc:
        raise InvalidArgument(f"the dead letter topic's initial subscription: {exc.message}") from None
    return DeadLetterPolicy(
        count, _topic(retry, name, "retry letter topic"), _topic(dead, name, "dead letter topic"), initial
    )
