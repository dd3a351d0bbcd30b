"""Which partitions an admin call on a topic applies to: the broker's subscription admin
and the admin client (which sends each partition's call to its owner) both ask here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from magnetar.common.errors import InvalidArgument, TopicNotFound
from magnetar.common.message_id import MessageId, message_id_sentinel
from magnetar.common.names import TopicName

if TYPE_CHECKING:
    from magnetar.proto.v1.broker_pb2 import MessageIdData


def admin_targets(
    topic: str, partitions: int, message_id: MessageId | MessageIdData | None = None, whole_topic: bool = False,
) -> list[str]:
    """The topics (partitions) an admin call on ``topic`` applies to.

    Args:
        partitions: the partition count of ``topic``'s partitioned topic (0: none).
        message_id: the call's message id, if any: on a partitioned topic an entry's id
            selects the partition it names (earliest and latest apply to every one).
        whole_topic: the call must apply to every partition (creating a subscription):
            an entry's id is refused on a partitioned topic.

    Raises:
        InvalidTopicName: a bad topic name.
        TopicNotFound: a partition beyond the partition count.
        InvalidArgument: the message id does not fit the topic.
    """
    name = TopicName.parse(topic)
    partition = -1
    if isinstance(message_id, MessageId):  # the broker core's; the admin client's is the wire's
        partition = MessageId.partition(message_id)
    elif message_id is not None:
        partition = message_id.partition
    if name.is_partition:
        if partitions and name.partition_index >= partitions:
            raise TopicNotFound(f"{name.partitioned_topic_name} has {partitions} partitions; {name} does not exist")
        if message_id is not None and message_id_sentinel(message_id) is None and partition not in (-1, name.partition_index):
            raise InvalidArgument(f"a message id of partition {partition} given for {name}")
        return [str(name)]
    if not partitions:
        return [str(name)]
    if message_id is None or message_id_sentinel(message_id) is not None:
        return [str(name.partition(i)) for i in range(partitions)]
    if whole_topic:
        raise InvalidArgument(
            f"{name} is partitioned: its subscription starts at earliest or latest on every partition "
            "(or create it on one partition, at a message id)"
        )
    if partition < 0:
        raise InvalidArgument(f"{name} is partitioned: give the partition in the message id (ledgerId:entryId:partitionIndex)")
    if partition >= partitions:
        raise InvalidArgument(f"{name} has {partitions} partitions; the message id names partition {partition}")
    return [str(name.partition(partition))]
