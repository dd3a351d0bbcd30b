"""What the calling role may do, asked before doing it: the web console offers only the
operations this says the role may do (docs/console-operations.md).

Each operation is named by the gateway's operationId and decided by the brokers' own
pure decision (:mod:`magnetar.broker.authorization`, through
:class:`~magnetar.broker.authorizer.Authorizer`) over the same tenant and namespace
documents the brokers read, with the gateway's ``superuser_roles``. It is advice: the
brokers decide each call again (with their own superusers), so a role this wrongly
allows is still refused (403), and nothing here opens anything.

What each operation needs is what the broker asks of the RPC behind it
(:mod:`magnetar.broker.rpc.authorization`): a subscription's operations need consume on
that subscription; producing needs produce on the topic; a DLQ replay consumes the DLQ
through its subscription and produces to each message's ``REAL_TOPIC`` (the console
asks about each real topic's ``Topics_produceOnPersistentTopic`` too); topic
administration needs a tenant admin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from magnetar.broker.authorization import Action, Request
from magnetar.broker.authorizer import AuthDocuments, Authorizer


@dataclass(frozen=True)
class Scope:
    """What the question is about: a topic (full name) and a subscription of it, or a
    namespace (``tenant/namespace``)."""

    topic: str | None = None
    subscription: str | None = None
    namespace: str | None = None


def _on_subscription(scope: Scope) -> Request | None:
    if scope.topic is None or scope.subscription is None:
        return None
    return Request(Action.CONSUME, topic=scope.topic, subscription=scope.subscription)


def _on_topic(action: Action) -> Callable[[Scope], Request | None]:
    return lambda scope: None if scope.topic is None else Request(action, topic=scope.topic)


def _on_namespace(action: Action) -> Callable[[Scope], Request | None]:
    return lambda scope: None if scope.namespace is None else Request(action, namespace=scope.namespace)


OPERATIONS: Mapping[str, Callable[[Scope], Request | None]] = {
    # a topic's subscriptions (Pulsar: SUBSCRIBE, UNSUBSCRIBE, SKIP, CLEAR_BACKLOG, RESET_CURSOR, PEEK_MESSAGES)
    "PersistentTopics_createSubscription": _on_subscription,
    "PersistentTopics_deleteSubscription": _on_subscription,
    "PersistentTopics_skipMessages": _on_subscription,
    "PersistentTopics_skipAllMessages": _on_subscription,
    "PersistentTopics_resetCursor": _on_subscription,
    "PersistentTopics_expireTopicMessages": _on_subscription,
    "PersistentTopics_peekNthMessage": _on_subscription,
    "Magnetar_peekMessages": _on_subscription,
    # dead letters: the DLQ's subscription (a replay also produces to the real topics)
    "Magnetar_peekDeadLetters": _on_subscription,
    "Magnetar_replayDeadLetters": _on_subscription,
    "Magnetar_purgeDeadLetters": _on_subscription,
    # a topic
    "PersistentTopics_getStats": _on_topic(Action.LOOKUP),
    "Topics_produceOnPersistentTopic": _on_topic(Action.PRODUCE),
    "PersistentTopics_deleteTopic": _on_topic(Action.ADMIN_TOPIC),
    "PersistentTopics_getInternalStats": _on_topic(Action.ADMIN_TOPIC),
    # a namespace
    "Namespaces_getTopics": _on_namespace(Action.LOOKUP),
    "Namespaces_getPolicies": _on_namespace(Action.ADMIN_NAMESPACE),
    "Magnetar_getDeadLetterTopics": _on_namespace(Action.LOOKUP),
}
"""operationId -> the request it is, for a scope (None: the scope does not name what it acts on)."""


async def allowed_operations(
    role: str | None, scope: Scope, *, documents: AuthDocuments, superusers: Iterable[str], authentication: bool,
) -> dict[str, bool]:
    """Each operation of :data:`OPERATIONS` that ``scope`` names, and whether ``role`` may
    do it there. Without authentication every one is allowed (the brokers ask nobody).

    Raises: InvalidArgument: a malformed topic or namespace name.
    """
    requests = {op: request for op, of in OPERATIONS.items() if (request := of(scope)) is not None}
    if not authentication:
        return dict.fromkeys(requests, True)
    authorizer = Authorizer(documents, superusers, ttl_s=60.0)  # a new one per question: each document read once
    return {op: await authorizer.allowed(role, request) for op, request in requests.items()}
