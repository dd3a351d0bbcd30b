"""Compaction admin on the topics this broker serves (pulsar-admin's ``topics compact``
and ``compaction-status``): trigger a compaction of a non-partitioned topic or one
partition, and its status."""

from __future__ import annotations

from typing import TYPE_CHECKING

from magnetar.broker.compaction.compactor import TwoPhaseCompactor
from magnetar.broker.compaction.status import LongRunningProcessStatus
from magnetar.broker.topic_admin import TopicAdmin

if TYPE_CHECKING:
    from magnetar.broker.service import BrokerService


class CompactionAdmin:
    """Compactions of one broker's topics (see the module docstring)."""

    def __init__(self, service: BrokerService) -> None:
        self.service = service

    async def trigger(self, topic: str) -> None:
        """Start compacting ``topic`` up to its last entry now (in the background).

        Raises:
            AlreadyExists: a compaction of it is running (Pulsar's 409).
            TopicNotFound, NotOwner, InvalidTopicName: as :meth:`TopicAdmin.topic`.
        """
        served = await TopicAdmin(self.service).topic(topic)
        compactor = TwoPhaseCompactor(served.ml, self.service.ledgers)
        self.service.compactions.trigger(served.name, compactor.compact)

    async def status(self, topic: str) -> LongRunningProcessStatus:
        """The status of the last compaction of ``topic`` on this broker (NOT_RUN after
        a restart or a hand-over, as Pulsar's: the status is not stored).

        Raises:
            TopicNotFound, NotOwner, InvalidTopicName: as :meth:`TopicAdmin.topic`.
        """
        served = await TopicAdmin(self.service).topic(topic)
        return self.service.compactions.status(served.name)
