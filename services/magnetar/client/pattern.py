"""Topic patterns of pattern subscriptions (pulsar-client's ``subscribe(re.compile(...))``).

A pattern names one namespace and a regular expression over its topics' names:
``persistent://t/ns/orders-.*`` (or ``t/ns/orders-.*``, or ``orders-.*`` in
``public/default``). As pulsar-client (PatternMultiTopicsConsumerImpl) does:

* the tenant and namespace are read as names, not as expressions: a pattern that
  would span namespaces (``t/.*/orders``) is refused with InvalidTopicName;
* the expression is matched whole (``fullmatch``) against each topic's name without its
  domain (``t/ns/orders-1``);
* the pattern's domain is ignored: ``regex_subscription_mode`` says which topics are
  taken (PersistentOnly: ``persistent://``; NonPersistentOnly: ``non-persistent://``;
  AllTopics: every topic). The broker lists the namespace's topics of that mode, the
  non-persistent ones from every broker serving one of the namespace's bundles.

Unlike pulsar-client, a compiled pattern's flags (``re.IGNORECASE`` …) are kept.
Pure: no network.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from magnetar.common.errors import InvalidArgument, InvalidTopicName
from magnetar.common.names import (
    DEFAULT_NAMESPACE,
    NON_PERSISTENT,
    PERSISTENT,
    PUBLIC_TENANT,
    NamespaceName,
)

from .options import RegexSubscriptionMode


@dataclass(frozen=True)
class TopicsPattern:
    """A parsed pattern: its text (as given, for ``Consumer.topic()``), its namespace,
    the compiled expression over ``tenant/namespace/topic`` and the mode."""

    text: str
    namespace: NamespaceName
    regex: re.Pattern[str]
    mode: RegexSubscriptionMode

    def matching(self, topics: list[str]) -> list[str]:
        """The topics of ``topics`` (full names, a partitioned topic by its base name)
        this pattern takes, in the given order."""
        taken = []
        for topic in topics:
            domain, _, rest = topic.partition("://")
            if self.mode is RegexSubscriptionMode.PersistentOnly and domain != PERSISTENT:
                continue
            if self.mode is RegexSubscriptionMode.NonPersistentOnly and domain != NON_PERSISTENT:
                continue
            if self.regex.fullmatch(rest) is not None:
                taken.append(topic)
        return taken


def is_pattern(topic: object, is_pattern_topic: bool) -> bool:
    """Whether ``subscribe`` was given a pattern: a compiled expression, or a str with
    ``is_pattern_topic`` (pulsar-client's asyncio form).

    Raises:
        InvalidArgument: ``is_pattern_topic`` with a list or tuple of topics (as
            pulsar-client refuses it).
    """
    if isinstance(topic, re.Pattern):
        return True
    if is_pattern_topic and not isinstance(topic, str):
        raise InvalidArgument(
            "is_pattern_topic=True takes one pattern (a str); a list of topics does not support pattern subscriptions"
        )
    return bool(is_pattern_topic)


def parse_pattern(topic: object, mode: RegexSubscriptionMode) -> TopicsPattern:
    """The :class:`TopicsPattern` of ``topic`` (a compiled expression or its text).

    Raises:
        InvalidTopicName: no tenant/namespace/topic shape, an unknown domain, or a tenant
            or namespace that is not a name (a pattern across namespaces).
        InvalidArgument: not a str pattern, or not a regular expression.
    """
    flags = 0
    if isinstance(topic, re.Pattern):
        if not isinstance(topic.pattern, str):
            raise InvalidArgument(f"a topic pattern is a str expression, not {type(topic.pattern).__name__}")
        text, flags = topic.pattern, topic.flags
    elif isinstance(topic, str):
        text = topic
    else:
        raise InvalidArgument(f"a topic pattern is a str or a compiled expression, not {type(topic).__name__}")
    if "://" in text:
        domain, rest = text.split("://", 1)
        if domain not in (PERSISTENT, NON_PERSISTENT):
            raise InvalidTopicName(f"topic pattern {text!r}: unknown domain {domain!r} (persistent or non-persistent)")
    else:
        rest = text if "/" in text else f"{PUBLIC_TENANT}/{DEFAULT_NAMESPACE}/{text}"
    parts = rest.split("/", 2)
    if len(parts) < 3 or not parts[2]:
        raise InvalidTopicName(
            f"topic pattern {text!r} is not persistent://<tenant>/<namespace>/<expression>, "
            "<tenant>/<namespace>/<expression> or <expression> (in public/default)"
        )
    try:
        namespace = NamespaceName(parts[0], parts[1])
    except InvalidArgument as exc:
        raise InvalidTopicName(
            f"topic pattern {text!r}: a pattern subscribes the topics of one namespace, and "
            f"{parts[0]}/{parts[1]} is not a namespace name ({exc.message})"
        ) from exc
    try:
        regex = re.compile(rest, flags)
    except re.error as exc:
        raise InvalidArgument(f"topic pattern {text!r} is not a regular expression: {exc}") from exc
    return TopicsPattern(text, namespace, regex, mode)
