"""Automatic compaction (Pulsar's namespace ``compactionThreshold``): a topic is compacted
when the bytes stored after its compaction horizon (all of them, if never compacted)
exceed the threshold. The broker's policy task asks at each of its rounds
(:mod:`magnetar.broker.policy_task`); a compaction already running is left to end."""

from __future__ import annotations

from magnetar.broker.backlog import backlog_bytes
from magnetar.broker.compaction.compactor import COMPACTION_SUBSCRIPTION, compacted_view
from magnetar.managedledger.ledger import ManagedLedger


def uncompacted_bytes(ml: ManagedLedger) -> int:
    """Bytes (estimated, as a backlog's) stored after the compacted view's horizon."""
    view = compacted_view(ml.cursors.get(COMPACTION_SUBSCRIPTION))
    if view is None:
        return ml.total_size
    return backlog_bytes(ml.layout, view.horizon)


def compaction_due(ml: ManagedLedger, threshold: int | None) -> bool:
    """Whether a topic is over its namespace's ``threshold`` (None or 0: never)."""
    return bool(threshold) and uncompacted_bytes(ml) > (threshold or 0)
