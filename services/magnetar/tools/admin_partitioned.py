"""``magnetar admin topics`` verbs of partitioned topics, with pulsar-admin's names:
``list-partitioned-topics``, ``get-partitioned-topic-metadata``,
``update-partitioned-topic``, ``delete-partitioned-topic`` and ``partitioned-stats``.
Each runs over gRPC (``--url``) or the gateway's REST API (``--admin-url``) with the same
output; ``partitioned-stats`` prints the gateway's PartitionedTopicStats JSON either way
(over gRPC made from the partitions' stats by the gateway's own conversion)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from magnetar.client.admin import AdminClient
from magnetar.client.rest_admin import RestAdmin, _topic
from magnetar.common.errors import TopicNotFound
from magnetar.common.names import TopicName

ACTIONS = ("list-partitioned-topics", "get-partitioned-topic-metadata", "update-partitioned-topic",
           "delete-partitioned-topic", "partitioned-stats")


async def partitioned_topics(admin: AdminClient | RestAdmin, namespace: str) -> list[str]:
    """The partitioned topics of a namespace, sorted."""
    if isinstance(admin, RestAdmin):
        return sorted(await admin.request("GET", f"/admin/v2/persistent/{namespace}/partitioned"))
    names = [n for n in await admin.topics(namespace) if not TopicName.parse(n).is_partition]
    return sorted([n for n in names if await admin.partitions(n)], key=TopicName.parse)


async def _partition_count(admin: AdminClient | RestAdmin, topic: str) -> int:
    """Raises: TopicNotFound: not a partitioned topic (Pulsar's reason)."""
    count = 0 if TopicName.parse(topic).is_partition else await admin.partitions(topic)
    if not count:
        raise TopicNotFound(f"Partitioned Topic {topic} not found")
    return count


async def run_partitioned(admin: AdminClient | RestAdmin, args: argparse.Namespace) -> bool:
    """The verbs of this module; False when ``args`` is none of them."""
    action, name = args.action, getattr(args, "name", "")
    if action == "list-partitioned-topics":
        for topic in await partitioned_topics(admin, name):
            print(topic)
    elif action == "get-partitioned-topic-metadata":
        count = 0 if TopicName.parse(name).is_partition else await admin.partitions(name)
        print(json.dumps({"partitions": count}, indent=2))
    elif action == "update-partitioned-topic":
        await _partition_count(admin, name)
        await admin.update_partitions(name, args.partitions)
    elif action == "delete-partitioned-topic":
        await admin.delete_partitioned_topic(name, force=args.force)
    elif action == "partitioned-stats":
        print(json.dumps(await _partitioned_stats(admin, name, args.per_partition), indent=2))
    else:
        return False
    return True


async def _partitioned_stats(admin: AdminClient | RestAdmin, topic: str, per_partition: bool) -> Any:
    if isinstance(admin, RestAdmin):
        return await admin.request("GET", _topic(topic, "partitioned-stats"),
                                   params={"perPartition": str(per_partition).lower()})
    from magnetar.gateway import topic_stats  # pydantic models: only for this verb

    count = await _partition_count(admin, topic)
    each = await admin.partition_stats(topic)
    names = [str(TopicName.parse(topic).partition(i)) for i in range(count)]
    return topic_stats.partitioned_stats(names, each, per_partition).model_dump(mode="json")


def add_partitioned_commands(topics: argparse._SubParsersAction[Any]) -> None:
    topics.add_parser("list-partitioned-topics", help="list a namespace's partitioned topics",
                      operations=("PersistentTopics_getPartitionedTopicList",)).add_argument(
        "name", metavar="TENANT/NAMESPACE")
    topics.add_parser("get-partitioned-topic-metadata", help='print a topic\'s partition count as JSON {"partitions": N} '
                      "(0: not partitioned)", operations=("PersistentTopics_getPartitionedMetadata", "NonPersistentTopics_getPartitionedMetadata")).add_argument(
        "name", metavar="TOPIC")
    p = topics.add_parser("update-partitioned-topic", help="grow a partitioned topic to N partitions (never fewer)",
                          operations=("PersistentTopics_updatePartitionedTopic", "NonPersistentTopics_updatePartitionedTopic"))
    p.add_argument("name", metavar="TOPIC")
    p.add_argument("-p", "--partitions", type=int, required=True, metavar="N", help="the new partition count")
    p = topics.add_parser("delete-partitioned-topic", help="delete a partitioned topic and its partitions",
                          operations=("PersistentTopics_deletePartitionedTopic", "NonPersistentTopics_deletePartitionedTopic"))
    p.add_argument("name", metavar="TOPIC")
    p.add_argument("-f", "--force", action="store_true",
                   help="also with producers or consumers connected (they fail with TopicNotFound)")
    p = topics.add_parser("partitioned-stats", help="print a partitioned topic's stats as JSON: the sum of its "
                          "partitions', and each one's", operations=("PersistentTopics_getPartitionedStats", "NonPersistentTopics_getPartitionedStats"))
    p.add_argument("name", metavar="TOPIC")
    p.add_argument("--per-partition", action=argparse.BooleanOptionalAction, default=True,
                   help="each partition's stats too (default: yes)")
