"""Retention: which acknowledged data each served topic keeps, and the broker's periodic
task that deletes the rest.

Every ``retention_check_interval_s`` the task asks each topic the broker serves to drop
the ledgers its namespace's retention no longer keeps (``ManagedLedger.trim_consumed``).
A namespace's retention (``retention_time_minutes``, ``retention_size_mb``; -1 unlimited)
is read from its policies once per round; a namespace without one uses the broker's
defaults (Pulsar's 0 and 0: consumed ledgers go at once). A topic-level retention (the
topic's, or for a partition its partitioned topic's, given by ``topic_level``) overrides
its namespace's, as Pulsar's; removed, the namespace's applies again at the next round.
A failure on one topic or namespace is logged and the round goes on; the next round
tries again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from magnetar.common.errors import MagnetarError, ServiceClosed
from magnetar.common.names import NamespaceName, TopicName
from magnetar.common.tasks import PeriodicRounds
from magnetar.metadata.tenants import NamespaceRetention

log = logging.getLogger(__name__)

UNLIMITED = -1
_MB = 1024 * 1024


@dataclass(frozen=True)
class RetentionPolicy:
    """How much acknowledged data a topic keeps: -1 unlimited, 0 none."""

    retention_time_minutes: int
    retention_size_mb: int

    @property
    def time_s(self) -> float | None:
        """The age limit in seconds; None when unlimited."""
        return None if self.retention_time_minutes == UNLIMITED else self.retention_time_minutes * 60.0

    @property
    def size_bytes(self) -> int | None:
        """The size limit in bytes; None when unlimited."""
        return None if self.retention_size_mb == UNLIMITED else self.retention_size_mb * _MB


class RetentionStore(Protocol):
    """Where namespace retention is stored (``ZkTenantStore``)."""

    async def get_retention(self, tenant: str, namespace: str) -> NamespaceRetention | None: ...

    async def set_retention(self, tenant: str, namespace: str, retention: NamespaceRetention) -> None: ...


class RetentionDefaults(Protocol):
    """The broker config's retention fields."""

    retention_check_interval_s: float
    default_retention_time_minutes: int
    default_retention_size_mb: int


class RetentionTask:
    """The broker's retention: namespace policy lookups and the periodic trim task.

    Owned by :class:`~magnetar.broker.service.BrokerService`: :meth:`start` creates the
    task, :meth:`close` cancels and awaits it.
    """

    def __init__(
        self, topics: Mapping[str, Any], store: RetentionStore, config: RetentionDefaults,
        topic_level: Callable[[str], RetentionPolicy | None] = lambda name: None,
    ) -> None:
        """Args:
        topics: the served topics by name (read anew every round); each has ``ml``.
        store: namespace retention policies.
        config: the interval and the defaults.
        topic_level: the retention a served topic sets itself (None: its namespace's applies).
        """
        self._topics = topics
        self._store = store
        self._config = config
        self._topic_level = topic_level
        # run_once looked up each round, so it can be replaced (tests do).
        self._rounds = PeriodicRounds("retention", lambda: config.retention_check_interval_s, lambda: self.run_once())

    @property
    def defaults(self) -> RetentionPolicy:
        return RetentionPolicy(self._config.default_retention_time_minutes, self._config.default_retention_size_mb)

    async def retention_policies(self, namespace: str) -> RetentionPolicy:
        """The retention that applies to ``tenant/namespace`` (the defaults when it sets none).

        Raises:
            InvalidArgument: a bad namespace name.
            NamespaceNotFound: no such namespace.
        """
        ns = NamespaceName.parse(namespace)
        stored = await self._store.get_retention(ns.tenant, ns.namespace)
        if stored is None:
            return self.defaults
        return RetentionPolicy(stored.retention_time_minutes, stored.retention_size_mb)

    async def set_retention(self, namespace: str, policy: RetentionPolicy) -> None:
        """Store the retention of ``tenant/namespace``; topics follow at the next round.

        Raises:
            InvalidArgument: a bad name or a value below -1 (nothing is written).
            NamespaceNotFound: no such namespace.
        """
        ns = NamespaceName.parse(namespace)
        await self._store.set_retention(
            ns.tenant, ns.namespace, NamespaceRetention(policy.retention_time_minutes, policy.retention_size_mb)
        )

    # -- the periodic task -----------------------------------------------------------
    def start(self) -> None:
        self._rounds.start()

    async def close(self) -> None:
        await self._rounds.close()

    async def run_once(self) -> dict[str, list[int]]:
        """One round over the served topics; returns the ledgers deleted per topic."""
        policies: dict[str, RetentionPolicy | None] = {}
        trimmed: dict[str, list[int]] = {}
        for name, topic in list(self._topics.items()):
            namespace = str(TopicName.parse(name).namespace)
            if namespace not in policies:
                policies[namespace] = await self._policy_or_none(namespace)
            policy = self._topic_level(name) or policies[namespace]
            if policy is None:
                continue
            try:
                deleted = await topic.ml.trim_consumed(policy.time_s, policy.size_bytes)
            except ServiceClosed:
                continue  # unloaded meanwhile: its next owner trims it
            except MagnetarError as exc:
                log.warning("retention of %s: %s", name, exc.message)
                continue
            except Exception:
                log.exception("retention of %s failed", name)
                continue
            if deleted:
                trimmed[name] = list(deleted)
        return trimmed

    async def _policy_or_none(self, namespace: str) -> RetentionPolicy | None:
        try:
            return await self.retention_policies(namespace)
        except MagnetarError as exc:
            log.warning("retention of namespace %s: cannot read its policy, skipping it this round: %s", namespace, exc.message)
            return None
