"""The Python SDK over gRPC: Client, Producer, Consumer, Reader (blocking and asyncio).

``magnetar.Client`` is the blocking client (:mod:`.sync`); ``magnetar.asyncio`` is the
asyncio one (:mod:`.aio`). Both have the names and signatures of Pulsar's Python client.
"""

from magnetar.common.message_id import MessageId

from .message import Message
from .options import (
    ConsumerDeadLetterPolicy,
    ConsumerType,
    HashingScheme,
    InitialPosition,
    PartitionsRoutingMode,
    Result,
)
from .sync import Client, Consumer, Producer, Reader

__all__ = [
    "Client",
    "Consumer",
    "ConsumerDeadLetterPolicy",
    "ConsumerType",
    "HashingScheme",
    "InitialPosition",
    "Message",
    "MessageId",
    "PartitionsRoutingMode",
    "Producer",
    "Reader",
    "Result",
]
