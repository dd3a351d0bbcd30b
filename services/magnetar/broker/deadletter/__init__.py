"""Retry letter topics and dead letter queues (docs/retry-dlq.md).

A consumer subscribed with a dead-letter policy (:mod:`.policy`) can ask for a message
again later: ``reconsume_later`` moves it to the subscription's retry letter topic,
delayed; past ``max_redeliver_count`` retries, or once negative acks have redelivered it
that many times, it moves to the dead letter queue (DLQ) instead. The broker makes the
moves, the SDK only asks.

A move publishes a copy (:mod:`.copies`) and then acknowledges the original
(:mod:`.moves`). The copy goes under a producer name and sequence id of its own, so the
target's deduplication stores a repeated move (a crash between the two steps) once.
Copies are stored through a :class:`MovePublisher`: the core's
:class:`~.publisher.ServiceMovePublisher` publishes on topics this broker serves and hands
the others to the gRPC adapter
:class:`~magnetar.broker.rpc.remote_moves.RemoteMovePublisher`.

Both publishers are imported from their modules: ``publisher.py`` needs the topic
(``topic.py`` imports this package), and ``broker/rpc/remote_moves.py`` loads gRPC,
which the core must not.
"""

from magnetar.broker.deadletter.copies import MOVE_PRODUCER_PREFIX
from magnetar.broker.deadletter.moves import MovePublisher, SubscriptionMoves
from magnetar.broker.deadletter.policy import (
    DEAD_LETTER_KEY,
    DeadLetterDefaults,
    DeadLetterPolicy,
    resolve,
)

__all__ = [
    "DEAD_LETTER_KEY",
    "MOVE_PRODUCER_PREFIX",
    "DeadLetterDefaults",
    "DeadLetterPolicy",
    "MovePublisher",
    "SubscriptionMoves",
    "resolve",
]
