"""A broker's stats of one namespace's loaded topics at once (GetNamespaceTopicStats)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from magnetar.broker.namespace_stats import loaded_topic_stats
from magnetar.broker.stats import TopicStats
from magnetar.common.errors import InvalidArgument


class FakeTopic:
    def __init__(self, name: str) -> None:
        self.name = name

    def stats(self) -> TopicStats:
        return TopicStats(self.name, len(self.name), 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0)


def topics(*names: str) -> dict[str, Any]:
    return {name: FakeTopic(name) for name in names}


def test_only_the_namespaces_topics_sorted_partitions_one_by_one():
    loaded = topics("persistent://t/ns/b", "persistent://t/ns2/a", "persistent://t/ns/a-partition-1",
                    "persistent://t/ns/a-partition-0", "persistent://u/ns/a")
    stats = loaded_topic_stats(cast(Any, loaded), "t/ns")
    assert [s.topic for s in stats] == ["persistent://t/ns/a-partition-0", "persistent://t/ns/a-partition-1",
                                        "persistent://t/ns/b"]
    assert stats[2].msg_in_counter == len("persistent://t/ns/b")  # each topic's own stats
    assert loaded_topic_stats(cast(Any, loaded), "t/none") == []


@pytest.mark.parametrize("bad", ["", "t", "t/ns/x", "t/"])
def test_a_bad_namespace_name_is_refused(bad: str):
    with pytest.raises(InvalidArgument):
        loaded_topic_stats(cast(Any, topics("persistent://t/ns/a")), bad)
