"""The broker's core: which topics it serves (bundle ownership), opening them on their
managed ledgers, lookups, and the admin operations. Knows nothing of gRPC."""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from magnetar.broker.authorization import NamespaceAuth
from magnetar.broker.authorizer import Authorizer
from magnetar.broker.clusters import REPLICATION_CLUSTERS_KEY, ClusterAdmin
from magnetar.broker.compaction.compactor import TwoPhaseCompactor
from magnetar.broker.compaction.reader import CompactedEntries
from magnetar.broker.compaction.status import Compactions
from magnetar.broker.config import BrokerConfig
from magnetar.broker.deadletter import DEAD_LETTER_KEY, DeadLetterDefaults
from magnetar.broker.deadletter.publisher import ServiceMovePublisher
from magnetar.broker.dispatch.delaybuckets import collect_orphaned_spill_areas
from magnetar.broker.inactive_topics import InactiveTopicTask
from magnetar.broker.lease import SessionLease
from magnetar.broker.loadbalance.manager import LoadManager
from magnetar.broker.loadbalance.report import BundleStats, LoadReport
from magnetar.broker.loadbalance.splitter import OwnerSplitter
from magnetar.broker.loadbalance.usage import ProcessUsage, bundle_stats
from magnetar.broker.namespace_bundles import BUNDLES_KEY, BundleSplitter, NamespaceBundlesCache
from magnetar.broker.namespace_policies import (
    AutoTopicCreation,
    InactiveTopicDeleteMode,
    InactiveTopicPolicies,
    NamespacePolicies,
    NamespacePolicyAdmin,
    PolicyKind,
    QuotaType,
    auto_topic_creation,
    from_document,
    managed_ledger_config,
    overlay,
)
from magnetar.broker.nonpersistent.listing import (
    PeerTopicLister,
    TopicsMode,
    fold_partitions,
    non_persistent_topics,
)
from magnetar.broker.nonpersistent.topic import NonPersistentTopic
from magnetar.broker.policy_task import NamespacePolicyTask
from magnetar.broker.rates import RateSampler
from magnetar.broker.retention import RetentionTask
from magnetar.broker.schema.compatibility import SchemaCompatibilityStrategy, effective
from magnetar.broker.schema.registry import Compatibility, SchemaRegistry, SchemaRules
from magnetar.broker.tenant_info import TenantInfo
from magnetar.broker.topic import PersistentTopic
from magnetar.broker.topic_policies import TopicPolicyAdmin, policy_owner
from magnetar.common.bundles import (
    LAST_BOUNDARY,
    NamespaceBundles,
    SplitAlgorithm,
    bundle_of,
    is_bundle_name,
    topic_hash,
)
from magnetar.common.errors import (
    AlreadyExists,
    InvalidArgument,
    InvalidTopicName,
    MagnetarError,
    NotOwner,
    PreconditionFailed,
    SchemaNotFound,
    TopicNotFound,
)
from magnetar.common.gcpolicy import GcPolicy
from magnetar.common.names import NON_PERSISTENT, PERSISTENT, NamespaceName, TopicName
from magnetar.common.tasks import KeyedTasks
from magnetar.managedledger.config import ManagedLedgerConfig
from magnetar.managedledger.ledger import ManagedLedger
from magnetar.managedledger.opening import empty_ledger_list
from magnetar.metadata.clusters import ZkClusterStore
from magnetar.metadata.errors import CorruptMetadata
from magnetar.metadata.nodes import SessionState
from magnetar.metadata.schemas import SchemaInfo, StoredSchema, ZkSchemaStore
from magnetar.metadata.topic_policies import ZkTopicPolicyStore

if TYPE_CHECKING:
    from magnetar.broker.deadletter import MovePublisher
    from magnetar.broker.loadbalance.manager import LoadPeers
    from magnetar.ledger.client import LedgerClient
    from magnetar.metadata.managed_ledgers import ZkManagedLedgerStore
    from magnetar.metadata.ownership import ZkOwnershipStore
    from magnetar.metadata.session import ZkSession
    from magnetar.metadata.tenants import ZkTenantStore

log = logging.getLogger(__name__)


class PulsarServiceUrls(NamedTuple):
    """Where a broker serves Pulsar's binary protocol ("": not that way)."""

    url: str = ""
    """``pulsar://host:port``."""
    url_tls: str = ""
    """``pulsar+ssl://host:port``."""


def _advertised(record: dict[str, object]) -> tuple[PulsarServiceUrls, str]:
    """A broker registration's Pulsar protocol URLs and framed session address ("": a
    key its broker did not write)."""

    def text(key: str) -> str:
        value = record.get(key)
        return value if isinstance(value, str) else ""

    return PulsarServiceUrls(text("pulsar_service_url"), text("pulsar_service_url_tls")), text("session_address")


class BrokerService:
    def __init__(
        self, config: BrokerConfig, broker_id: str, session: ZkSession, *, ledgers: LedgerClient,
        ml_store: ZkManagedLedgerStore, tenants: ZkTenantStore, ownership: ZkOwnershipStore,
        remote_mover: MovePublisher | None = None, pulsar_urls: PulsarServiceUrls | None = None,
        peer_topics: PeerTopicLister | None = None, load_peers: LoadPeers | None = None, session_address: str = "",
    ) -> None:
        """Args: ledgers, ml_store, tenants, ownership: the ledger client and metadata
        stores the service uses (and closes: the ledger client); remote_mover: publishes
        retry and dead-letter copies to topics other brokers serve (closed with the
        service; None: such moves fail with NotOwner); pulsar_urls: where this broker
        serves Pulsar's binary protocol (``pulsar://``, ``pulsar+ssl://``; advertised in
        its registration; empty: not served); peer_topics: asks other brokers which
        non-persistent topics they serve (closed with the service; None: a namespace's
        list has this broker's only); load_peers: the load manager's calls to other
        brokers (None: unowned bundles are taken by the broker asked, as without a load
        manager, and the leader splits only the hot bundles this broker owns)."""
        self.config = config
        self.broker_id = broker_id
        self.pulsar_urls = pulsar_urls or PulsarServiceUrls()
        self.session_address = session_address
        """``host:port`` of this broker's framed session listener (broker/session/; "": none)."""
        self.session = session
        self.ledgers = ledgers
        self.ml_store = ml_store
        self.tenants = tenants
        self.ownership = ownership
        self.schema_registry = SchemaRegistry(ZkSchemaStore(session))
        self.clusters = ClusterAdmin(ZkClusterStore(session), tenants, config.cluster_name)
        """This cluster and the registered ones (Pulsar's /admin/v2/clusters)."""
        self.compactions = Compactions()
        """The compactions of the topics it serves (one at a time per topic)."""
        self.ml_config = ManagedLedgerConfig(
            ensemble_size=config.ensemble_size, write_quorum=config.write_quorum, ack_quorum=config.ack_quorum,
            max_entries_per_ledger=config.max_entries_per_ledger, max_size_per_ledger=config.max_ledger_size_bytes,
            max_ledger_age_s=config.max_ledger_age_s, cursor_persist_interval_s=config.cursor_persist_interval_s,
            cache_max_bytes=config.ml_cache_max_bytes, max_open_readers=config.ml_max_open_readers,
            read_batch_entries=config.ml_read_batch_entries,
            max_unacked_ranges_to_persist=config.max_unacked_ranges_to_persist,
            max_batch_acks_to_persist=config.max_batch_acks_to_persist,
            max_redelivery_counts_to_persist=config.max_redelivery_counts_to_persist,
        )
        self.topics: dict[str, PersistentTopic] = {}
        self.nonpersistent: dict[str, NonPersistentTopic] = {}
        """The ``non-persistent://`` topics served here (memory only: see broker/nonpersistent/)."""
        self._opening: dict[str, asyncio.Task[PersistentTopic]] = {}
        self._owned: set[tuple[str, str, str]] = set()
        self.bundles = NamespaceBundlesCache(tenants, config.bundles_per_namespace)
        """Each used namespace's bundle boundaries, watched (broker/namespace_bundles.py)."""
        self.splitter = BundleSplitter(self)
        self._lookups: KeyedTasks[tuple[str, str, str]] = KeyedTasks("broker", on_error=lambda _key, _exc: None)
        """Bundle lookups under way: callers of one bundle share one (errors reach them)."""
        self._closing: KeyedTasks[str] = KeyedTasks("broker", on_error=self._close_failed)
        """Topics being closed (unloaded): a reopen here waits for the close to end."""
        self.lease = SessionLease(config.zk_session_timeout_s)
        self._lapsed = True  # not serving until the first answer from ZooKeeper
        self._lapses = 0  # times serving stopped (lease run out, session lost)
        self._lease_task: asyncio.Task[None] | None = None
        self.mover: MovePublisher = ServiceMovePublisher(self, remote_mover)
        self.peer_topics = peer_topics
        self.gc_policy = GcPolicy(
            config.gc_freeze_interval_s, config.gc_full_collect_interval_s, config.gc_max_full_pause_s
        )
        self.rates = RateSampler(collections.ChainMap(self.topics, self.nonpersistent), config.stats_interval_s)  # type: ignore[arg-type]
        self.namespace_policies = NamespacePolicyAdmin(tenants, on_change=self._policies_changed)
        self.topic_policies = TopicPolicyAdmin(ZkTopicPolicyStore(session), self.namespace_policies,
                                               exists=self.topic_exists)
        self._topic_level: dict[str, NamespacePolicies] = {}
        """What each served topic's partitioned topic (or itself) sets, by the name the
        policies are kept under: read at load and every policy round, so a namespace's
        change applied at once keeps the topics' overrides."""
        self.policy_task = NamespacePolicyTask(
            self.topics, self.namespace_policies, config.policy_check_interval_s,
            compact=self._compact_over_threshold, topic_level=self.read_topic_level,
            setters=self.topic_policies.setters,
        )
        self.inactive_topics = InactiveTopicTask(
            self.topics,
            InactiveTopicPolicies(InactiveTopicDeleteMode(config.delete_inactive_topics_mode),
                                  config.delete_inactive_topics_max_inactive_duration_s,
                                  config.delete_inactive_topics_enabled),
            config.delete_inactive_topics_frequency_s, self.delete_topic,
            drop_partitioned=self.drop_partitioned_if_empty,
        )
        """Deletes the served topics no client uses (Pulsar's inactive-topic GC)."""
        self.authorizer = Authorizer(tenants, config.superuser_roles, config.authorization_cache_ttl_s)
        """Namespace permissions (kept with authorization off too) and, with
        ``config.authorization_enabled``, the decisions every door asks."""
        self._usage = ProcessUsage(config.load_balancer_override_broker_nic_speed_gbps)
        self.load_manager = LoadManager(
            config, broker_id, session, measure=self.load_report, unload_local=self.unload_bundle,
            peers=load_peers, splitter=OwnerSplitter(self, load_peers),
        ) if config.load_balancer_enabled else None
        """Load reports, placement of unowned bundles, shedding (docs/load-balancing.md)."""

    async def start(self) -> None:
        # Delayed-delivery spill files of crashed brokers: a cache nobody reads again.
        await asyncio.to_thread(collect_orphaned_spill_areas, self.config.delayed_spill_dir or None)
        await self.tenants.ensure_defaults((self.config.cluster_name,))
        record: dict[str, object] = {"address": self.broker_id}
        if self.pulsar_urls.url:
            record["pulsar_service_url"] = self.pulsar_urls.url
        if self.pulsar_urls.url_tls:
            record["pulsar_service_url_tls"] = self.pulsar_urls.url_tls
        if self.session_address:
            record["session_address"] = self.session_address
        await self.ownership.register_broker(
            self.broker_id, record, stale_wait_s=2 * self.config.zk_session_timeout_s + 5
        )
        self.session.add_state_listener(self._session_state)
        await self._renew_lease()
        self._lease_task = asyncio.get_running_loop().create_task(self._keep_lease(), name="broker-lease")
        if self.load_manager is not None:
            await self.load_manager.start()
        self.retention = RetentionTask(
            self.topics, self.tenants, self.config,
            topic_level=lambda name: getattr(self._topic_level.get(str(policy_owner(name))), "retention", None),
        )
        self.retention.start()
        self.policy_task.start()
        self.inactive_topics.start()
        self.gc_policy.start()
        self.rates.start()

    # -- serving only while ownership is sure (see broker/lease.py) ------------------
    def serving(self) -> bool:
        """True while this broker may serve its topics: its ZooKeeper session is surely
        alive. When the lease has run out (no answer from ZooKeeper, or this process was
        stopped), every topic is unloaded first, so nothing is served past it."""
        if self._lapsed:
            return False
        if self.lease.valid():
            return True
        self._lapse(
            f"no answer from ZooKeeper for {self.lease.term_s - self.lease.remaining_s():.1f} s "
            f"(session timeout {self.config.zk_session_timeout_s:g} s)"
        )
        return False

    @property
    def lease_held(self) -> bool:
        """The lease is held and topics are served (read without acting on a lapse)."""
        return not self._lapsed and self.lease.valid()

    @property
    def lease_lapses(self) -> int:
        """Times serving stopped: the lease ran out or the ZooKeeper session was lost."""
        return self._lapses

    def check_serving(self, what: str) -> None:
        """Raises: NotOwner when not :meth:`serving` (the client tries another broker)."""
        if not self.serving():
            raise self.not_serving(what)

    def not_serving(self, what: str) -> NotOwner:
        """The error a client gets from a broker that is not :meth:`serving`."""
        return NotOwner(
            f"broker {self.broker_id} has lost contact with ZooKeeper and serves no topics until it "
            f"is back ({what}); look the topic up again"
        )

    def _lapse(self, why: str) -> None:
        if self._lapsed:
            return
        self._lapsed = True
        self._lapses += 1
        log.warning("%s: not serving until ZooKeeper answers; unloading %d topics", why, len(self.topics) + len(self.nonpersistent))
        self._unload_all(why)

    def _unload_all(self, why: str) -> None:
        for name in [*self.topics, *self.nonpersistent]:
            self.unload(name, NotOwner(
                f"broker {self.broker_id} stopped serving {name} ({why}); look the topic up again"
            ))

    async def _renew_lease(self) -> None:
        sent = self.lease.clock()
        try:
            await self.ownership.ping()
        except MagnetarError as exc:
            log.debug("ZooKeeper ping failed: %s", exc.message)
            return
        self.lease.renewed(sent)
        if self._lapsed and self.lease.valid():
            self._lapsed = False
            if self._lapses:
                log.info("ZooKeeper answers: serving topics again")

    async def _keep_lease(self) -> None:
        """Renew the lease every ``ping_interval_s`` and stop serving when it runs out;
        a ping that hangs does not delay that check."""
        ping: asyncio.Task[None] | None = None
        try:
            while True:
                if ping is None or ping.done():
                    ping = asyncio.get_running_loop().create_task(self._renew_lease())
                wait = self.lease.ping_interval_s
                if not self._lapsed:
                    wait = min(wait, max(0.01, self.lease.remaining_s()))
                await asyncio.sleep(wait)
                self.serving()
        finally:
            if ping is not None:
                ping.cancel()
                await asyncio.gather(ping, return_exceptions=True)

    def _session_state(self, state: SessionState) -> None:
        if state is SessionState.LOST:
            # Our ownership znodes are gone: another broker may take the bundles now.
            log.warning("ZooKeeper session lost: releasing %d bundles and their topics", len(self._owned))
            self._owned.clear()
            self.bundles.clear()  # its watches went with the session
            self.lease.revoke()
            self._lapsed = True
            self._lapses += 1
            self._unload_all("its ZooKeeper session expired")

    def unload(self, name: str, reason: MagnetarError | None = None) -> None:
        """Stop serving a topic: its streams end with ``reason`` (default NotOwner: the
        clients look it up again), then it closes in the background."""
        topic: PersistentTopic | NonPersistentTopic | None = self.topics.pop(name, None) or self.nonpersistent.pop(name, None)
        if topic is not None:
            self._closing.spawn(name, topic.close(reason), name=f"close-topic:{name}")

    @staticmethod
    def _close_failed(name: str, exc: BaseException) -> None:
        log.warning("closing %s: %s", name, exc)

    async def unload_topic(self, topic: str) -> None:
        """An admin's unload of a topic this broker serves (every partition it serves of
        a partitioned one); the bundle stays owned here. A topic that exists but is not
        loaded is left as it is.

        Raises:
            NotOwner: another broker owns it; TopicNotFound: it does not exist.
        """
        name = self.parse(topic)
        if not name.is_persistent:
            await self._served_non_persistent(name)
            await self._unload_and_wait([str(name)])
            log.info("unloaded %s by admin request", name)
            return
        partitions = 0 if name.is_partition else await self.partitions(str(name))
        targets = [str(name.partition(i)) for i in range(partitions)] if partitions else [str(name)]
        served = [t for t in targets if t in self.topics or t in self._opening]
        if not served and not partitions:
            owner = await self.lookup(str(name))
            if owner != self.broker_id:
                raise NotOwner(f"topic {name} is served by {owner}; unload it there")
            doc, _ = await self.ml_store.get(name.tenant, name.namespace_part, name.local_name)
            if doc is None:
                raise TopicNotFound(f"topic {name} does not exist")
            return  # not loaded: nothing to unload
        await self._unload_and_wait(served)
        log.info("unloaded %s by admin request", ", ".join(served))

    async def _unload_and_wait(self, names: list[str]) -> None:
        """Unload ``names`` (once opened, when opening) and wait until they are closed."""
        for t in names:
            opening = self._opening.get(t)
            if opening is not None:
                await asyncio.gather(opening, return_exceptions=True)
            self.unload(t)
        await self._closing.wait(names)

    async def _check_bundle(self, ns: NamespaceName, bundle: str) -> NamespaceBundles:
        """The namespace's bundles, if ``bundle`` is one of them (read again when not:
        a split may have made it since). Raises: InvalidArgument."""
        bundles = await self.bundles.get(ns)
        if bundle not in bundles.ranges and is_bundle_name(bundle):
            bundles = await self.bundles.refresh(ns)
        if bundle not in bundles.ranges:
            raise InvalidArgument(f"{bundle!r} is not a bundle of {ns}; its bundles are {', '.join(bundles.ranges)}")
        return bundles

    async def bundles_data(self, namespace: str) -> NamespaceBundles:
        """The namespace's bundles (its boundaries), from the watched cache.

        Raises: InvalidArgument (a bad name); NamespaceNotFound; CorruptMetadata.
        """
        return await self.bundles.get(NamespaceName.parse(namespace))

    async def bundles_of(self, namespace: str) -> list[str]:
        """The namespace's bundles' names (``0x00000000_0x40000000``, …), in hash order."""
        return (await self.bundles_data(namespace)).ranges

    async def split_bundle(
        self, namespace: str, bundle: str, algorithm: str | SplitAlgorithm = SplitAlgorithm.RANGE_EQUALLY_DIVIDE,
        unload: bool = False, boundaries: Sequence[object] = (),
    ) -> list[str]:
        """Split a bundle this broker owns (Pulsar's split-bundle; see
        broker/namespace_bundles.py BundleSplitter.split); returns the new bundles.

        Raises: NotOwner; PreconditionFailed; InvalidArgument; NamespaceNotFound.
        """
        return await self.splitter.split(namespace, bundle, algorithm, unload, boundaries)

    async def unload_bundle(self, namespace: str, bundle: str) -> None:
        """An admin's unload of a namespace bundle this broker owns: its topics are closed
        and the bundle released (the next lookup, on any broker, takes it).

        Raises:
            InvalidArgument: no such bundle; NotOwner: this broker does not own it.
        """
        ns = NamespaceName.parse(namespace)
        await self.tenants.get_policies(ns.tenant, ns.namespace)  # NamespaceNotFound
        bundles = await self._check_bundle(ns, bundle)
        key = (ns.tenant, ns.namespace, bundle)
        if key not in self._owned:
            owner = await self.ownership.owner(*key)
            raise NotOwner(f"bundle {ns}/{bundle} is owned by {owner or 'no broker'}, not {self.broker_id}")
        self._owned.discard(key)  # lookups here stop answering this broker from now on
        names = [t for t in [*self.topics, *self._opening, *self.nonpersistent]
                 if self.parse(t).namespace == ns and bundles.bundle_of(t) == bundle]
        # The bundle goes once its topics are closed (their ledgers too), so a new owner
        # does not have to fence and recover them.
        await self._unload_and_wait(names)
        await self.ownership.release(*key)
        log.info("bundle %s/%s unloaded by admin request (%d topics)", ns, bundle, len(names))

    async def bundle_owners(self, namespace: str, bundle: str = "") -> list[tuple[str, str]]:
        """``(bundle, owner address or "")`` for one bundle or every bundle of a namespace.

        Raises:
            NamespaceNotFound; InvalidArgument: no such bundle.
        """
        ns = NamespaceName.parse(namespace)
        await self.tenants.get_policies(ns.tenant, ns.namespace)
        if bundle:
            await self._check_bundle(ns, bundle)
        chosen = [bundle] if bundle else (await self.bundles.get(ns)).ranges
        owners = await asyncio.gather(*(self.ownership.owner(ns.tenant, ns.namespace, b) for b in chosen))
        return [(b, o or "") for b, o in zip(chosen, owners, strict=True)]

    async def close(self) -> None:
        if self.load_manager is not None:
            await self.load_manager.close()
        if hasattr(self, "retention"):  # started
            await self.retention.close()
        await self.policy_task.close()
        await self.inactive_topics.close()
        if self._lease_task is not None:
            self._lease_task.cancel()
            await asyncio.gather(self._lease_task, return_exceptions=True)
        await self._closing.wait()
        await self._lookups.close()
        await self.bundles.close()
        await self.rates.close()
        await self.gc_policy.close()
        await self.mover.close()
        if self.peer_topics is not None:
            await self.peer_topics.close()
        await self.compactions.close()
        for topic in list(self.topics.values()):
            try:
                await topic.close(NotOwner(f"broker {self.broker_id} is shutting down; look the topic up again"))
            except MagnetarError as exc:
                log.warning("closing %s: %s", topic.name, exc.message)
        self.topics.clear()
        for np_topic in list(self.nonpersistent.values()):
            await np_topic.close(NotOwner(f"broker {self.broker_id} is shutting down; look the topic up again"))
        self.nonpersistent.clear()
        await self.ledgers.close()

    # -- namespace policies ------------------------------------------------------------
    def _compact_over_threshold(self, topic: PersistentTopic) -> None:
        """Compact a topic over its namespace's compaction threshold (in the background;
        a compaction of it already running is left to end)."""
        if self.compactions.running(topic.name):
            return
        log.info("topic %s is over its namespace's compaction threshold: compacting it", topic.name)
        self.compactions.trigger(topic.name, TwoPhaseCompactor(topic.ml, self.ledgers).compact)

    def _policies_changed(self, namespace: str, policies: NamespacePolicies) -> None:
        """A change made through this broker applies to its topics at once (other brokers
        read it at their policy task's next round)."""
        for name, topic in list(self.topics.items()):
            if str(TopicName.parse(name).namespace) == namespace:
                level = self._topic_level.get(str(policy_owner(name)))
                topic.apply_policies(policies if level is None else overlay(level, policies))

    # -- topic policies (docs/gateway.md: topic-level policies) -------------------------
    async def read_topic_level(self, topic: str) -> NamespacePolicies:
        """What ``topic`` (its partitioned topic, for a partition) sets, read anew; a
        corrupt document counts as none (logged)."""
        owner = str(policy_owner(topic))
        try:
            level = await self.topic_policies.level(owner)
        except CorruptMetadata as exc:
            log.warning("%s; its namespace's policies apply", exc.message)
            level = NamespacePolicies()
        self._topic_level[owner] = level
        return level

    async def set_topic_policy(
        self, topic: str, kind: PolicyKind, value: object, quota_type: QuotaType = QuotaType.DESTINATION_STORAGE,
    ) -> None:
        """Set one of ``topic``'s policies (see TopicPolicyAdmin.set) and apply what then
        applies to its partitions served here."""
        await self._topic_policy_applied(topic, await self.topic_policies.set(topic, kind, value, quota_type))

    async def remove_topic_policy(
        self, topic: str, kind: PolicyKind, quota_type: QuotaType = QuotaType.DESTINATION_STORAGE,
    ) -> None:
        """Remove one of ``topic``'s policies (its namespace's applies again)."""
        await self._topic_policy_applied(topic, await self.topic_policies.remove(topic, kind, quota_type))

    async def _topic_policy_applied(self, topic: str, level: NamespacePolicies) -> None:
        owner = policy_owner(topic)
        self._topic_level[str(owner)] = level
        served = [t for name, t in list(self.topics.items()) if policy_owner(name) == owner]
        if served:
            applied = overlay(level, await self.namespace_policies.get(str(owner.namespace)))
            for t in served:
                t.apply_policies(applied)

    async def create_namespace(
        self, namespace: str, policies: NamespacePolicies, bundles: int = 0, *,
        permissions: NamespaceAuth | None = None, replication_clusters: Sequence[str] = (),
        boundaries: Sequence[object] = (),
    ) -> None:
        """Create ``tenant/namespace`` with ``policies``, ``permissions`` (Pulsar's
        auth_policies), ``replication_clusters`` and its bundles (``boundaries``, else
        ``bundles`` equal ranges, else bundles_per_namespace), all checked before anything
        is written.

        Raises:
            PreconditionFailed: ``bundles`` or the boundaries' count is not in
                1..load_balancer_namespace_maximum_bundles, or the boundaries are not
                valid or do not make ``bundles`` (when given); a replication cluster
                that does not exist or the tenant is not allowed on.
            InvalidArgument, PreconditionFailed: a policy refused (see namespace_policies).
            TenantNotFound, AlreadyExists.
        """
        extra: dict[str, Any] = {BUNDLES_KEY: self._new_bundles(bundles, boundaries).to_document()}
        if permissions is not None:
            extra.update(permissions.bounded().to_doc())
        if replication_clusters:
            extra[REPLICATION_CLUSTERS_KEY] = await self._replication_clusters(namespace, replication_clusters)
        await self.namespace_policies.create_namespace(namespace, policies, extra)

    def _new_bundles(self, count: int, boundaries: Sequence[object]) -> NamespaceBundles:
        """A new namespace's bundles, as Pulsar's create checks them (its reasons)."""
        limit = self.config.load_balancer_namespace_maximum_bundles
        try:
            if boundaries:
                bundles = NamespaceBundles.of(boundaries)
                if count and count != bundles.count:
                    raise InvalidArgument(f"numBundles {count} does not match the {bundles.count} bundles the boundaries make")
            else:
                bundles = NamespaceBundles.equal(count or self.config.bundles_per_namespace)
        except InvalidArgument as exc:
            raise PreconditionFailed(f"Invalid number of bundles: {exc.message}") from exc
        if bundles.count > limit:
            raise PreconditionFailed(
                f"Invalid number of bundles. Number of bundles has to be in the range of (1, {limit}]: "
                f"got {bundles.count} (loadBalancerNamespaceMaximumBundles)")
        return bundles

    async def _replication_clusters(self, namespace: str, clusters: Sequence[str]) -> list[str]:
        """``clusters`` sorted, if each exists and the namespace's tenant is allowed on it
        (Pulsar's reasons). Raises: PreconditionFailed; TenantNotFound."""
        tenant = NamespaceName.parse(namespace).tenant
        missing = await self.clusters.missing(list(clusters))
        if missing:
            raise PreconditionFailed(f"Invalid cluster id: {missing[0]}")
        allowed = TenantInfo.from_doc(await self.tenants.get_tenant(tenant)).allowed_clusters
        for cluster in clusters:
            if cluster not in allowed:
                raise PreconditionFailed(
                    f"Cluster [{cluster}] is not in the list of allowed clusters list for tenant [{tenant}]")
        return sorted(set(clusters))

    async def replication_clusters(self, namespace: str) -> list[str]:
        """The namespace's replication clusters as stored. Raises: NamespaceNotFound."""
        ns = NamespaceName.parse(namespace)
        return list((await self.tenants.get_policies(ns.tenant, ns.namespace)).get(REPLICATION_CLUSTERS_KEY) or ())

    @staticmethod
    def _topic_policies(doc: dict[str, Any], namespace: str) -> NamespacePolicies:
        try:
            return from_document(doc, namespace)
        except CorruptMetadata as exc:
            log.warning("%s; its topics use the broker's defaults", exc.message)
            return NamespacePolicies()

    # -- retry and dead-letter defaults --------------------------------------------
    async def dead_letter_defaults(self, namespace: str) -> DeadLetterDefaults | None:
        """The namespace's retry/dead-letter defaults (None: it sets none).

        Raises:
            NamespaceNotFound; CorruptMetadata: the stored defaults are not valid.
        """
        ns = NamespaceName.parse(namespace)
        stored = (await self.tenants.get_policies(ns.tenant, ns.namespace)).get(DEAD_LETTER_KEY)
        if stored is None:
            return None
        try:
            return DeadLetterDefaults.from_document(stored)
        except (TypeError, InvalidArgument) as exc:
            raise CorruptMetadata(f"namespace {ns} has an invalid dead-letter policy: {stored!r}") from exc

    async def set_dead_letter_defaults(self, namespace: str, defaults: DeadLetterDefaults) -> None:
        """Store (or, with every field None, remove) the namespace's defaults.

        Raises:
            InvalidArgument: a bad value (nothing written); NamespaceNotFound.
        """
        defaults.check()
        ns = NamespaceName.parse(namespace)
        doc = defaults.to_document()

        def put(policies: dict[str, Any]) -> dict[str, Any]:
            if doc:
                policies[DEAD_LETTER_KEY] = doc
            else:
                policies.pop(DEAD_LETTER_KEY, None)
            return policies

        await self.tenants.update_policies(ns.tenant, ns.namespace, put)

    # -- names, ownership, lookup ----------------------------------------------
    @staticmethod
    def parse(topic: str) -> TopicName:
        return TopicName.parse(topic)

    async def _bundle(self, name: TopicName) -> tuple[str, str, str]:
        """``(tenant, namespace, bundle)`` of ``name`` by its namespace's cached bundles."""
        bundles = await self.bundles.get(name.namespace)
        return (name.tenant, name.namespace_part, bundles.bundle_of(name))

    def _served_bundle(self, name: TopicName) -> tuple[str, str, str]:
        """:meth:`_bundle` without waiting, for a topic served here: by its namespace's
        cached boundaries, else the owned bundle whose range holds its hash (the cache
        entry is dropped on a change until the next use reads it again)."""
        cached = self.bundles.cached(name.namespace)
        if cached is not None:
            return (name.tenant, name.namespace_part, cached.bundle_of(name))
        h = topic_hash(name)
        for key in self._owned:
            if key[:2] == (name.tenant, name.namespace_part):
                lower, upper = (int(part, 16) for part in key[2].split("_"))
                if lower <= h < upper or h == upper == LAST_BOUNDARY:
                    return key
        return (name.tenant, name.namespace_part, bundle_of(name, self.config.bundles_per_namespace))

    async def lookup(self, topic: str, authoritative: bool = False) -> str:
        """The address of the broker that serves ``topic``; an unowned bundle goes to the
        least loaded broker (the load manager's placement), or to this one when
        ``authoritative`` (the placement of the broker that asked chose this one).

        Concurrent lookups of one bundle share one conversation with ZooKeeper: a burst
        (thousands of dead-letter moves to a new topic) is a handful of requests, not
        thousands (which once held the event loop long enough to lose the lease)."""
        name = self.parse(topic)
        self.check_serving(f"lookup of {name}")
        for _ in range(3):
            key = await self._bundle(name)
            if key in self._owned:
                return self.broker_id
            task = self._lookups.get(key)
            if task is None:
                task = self._lookups.spawn(
                    key, self._lookup_bundle(key, str(name), authoritative), name=f"lookup:{'/'.join(key)}"
                )
            owner = await asyncio.shield(task)
            if owner:
                return owner
            # The bundle was split meanwhile (this broker's boundaries were behind): again.
        raise NotOwner(f"the bundles of {name.namespace} kept changing during a lookup of {name}; look it up again")

    async def _lookup_bundle(self, key: tuple[str, str, str], topic: str, authoritative: bool) -> str:
        """The bundle's owner, placing it when unowned (the load manager's placement, or
        this broker when ``authoritative``); "" when the bundle is no longer one of its
        namespace's (split since this broker read the boundaries)."""
        tenant, ns, bundle = key
        owner = await self.ownership.owner(tenant, ns, bundle)
        if owner is None:
            owner = await self._place(key, topic, authoritative)
            # Taken after reading the boundaries: a split (which holds the old bundle
            # until its new boundaries are written) may have released it. Read them anew.
            if owner == self.broker_id and bundle not in (await self.bundles.refresh(NamespaceName(tenant, ns))).ranges:
                await self.ownership.release(tenant, ns, bundle)
                return ""
        if owner == self.broker_id:
            if not await self.ownership.still_owns(tenant, ns, bundle, self.broker_id):
                # Our id, but a previous run's session: it expires within the session timeout.
                raise NotOwner(
                    f"bundle {tenant}/{ns}/{bundle} is still held by this broker's previous session; "
                    f"it is released within {self.config.zk_session_timeout_s:g} s, retry then"
                )
            self._owned.add(key)
        return owner

    async def _place(self, key: tuple[str, str, str], topic: str, authoritative: bool) -> str:
        """Give the unowned bundle to the least loaded broker: this one takes it; another
        is asked to (an authoritative lookup of ``topic``). One that cannot be asked is
        left out until its next report, and the bundle stays here."""
        manager = self.load_manager
        if manager is not None and manager.peers is not None and not authoritative:
            chosen = manager.select("/".join(key))
            if chosen != self.broker_id:
                try:
                    return await manager.peers.take_bundle(chosen, topic)
                except MagnetarError as exc:
                    log.info("placing %s on %s: %s; taking it here", "/".join(key), chosen, exc.message)
                    manager.forget(chosen)
        return await self.ownership.try_acquire(*key, self.broker_id)

    def load_report(self) -> LoadReport:
        """This broker's load now: its process's usage and each owned bundle's traffic."""
        stats = bundle_stats(
            [*self.topics.values(), *self.nonpersistent.values()], lambda t: "/".join(self._served_bundle(self.parse(t)))
        )
        for key in self._owned:
            stats.setdefault("/".join(key), BundleStats())
        return self._usage.report(self.broker_id, stats, self.pulsar_urls.url)

    async def pulsar_urls_of(self, broker_id: str) -> PulsarServiceUrls:
        """The ``pulsar://`` and ``pulsar+ssl://`` URLs broker ``broker_id`` serves
        Pulsar's protocol at, from its registration; "" for a way it does not serve (its
        listener is off, it registered before brokers advertised one, it is not
        registered)."""
        if broker_id == self.broker_id:
            return self.pulsar_urls
        return _advertised(await self.ownership.broker_record(broker_id) or {})[0]

    async def advertised_by(self, broker_id: str) -> tuple[PulsarServiceUrls, str]:
        """What broker ``broker_id`` advertises for clients, from its registration (one
        read): its Pulsar protocol URLs (:meth:`pulsar_urls_of`) and its framed session's
        ``host:port`` ("": none)."""
        if broker_id == self.broker_id:
            return self.pulsar_urls, self.session_address
        return _advertised(await self.ownership.broker_record(broker_id) or {})

    async def partitions(self, topic: str) -> int:
        name = self.parse(topic)
        if name.is_partition:
            return 0
        return await self.tenants.get_partitions(name.tenant, name.namespace_part, name.local_name, domain=name.domain)

    async def get_topic(self, topic: str, create: bool = True, explicit: bool = False) -> PersistentTopic:  # type: ignore[return]
        """The served topic, opened on first use; ``create`` allows auto-creation (when the
        config does), ``explicit`` creates it regardless (an admin's create).

        Raises:
            NotOwner: another broker serves it (the client looks it up again).
            TopicNotFound / NamespaceNotFound: it does not exist and may not be created.
        """
        name = self.parse(topic)
        key = str(name)
        self.check_serving(f"topic {key}")
        if not name.is_persistent:
            # The doors use both kinds alike (broker/nonpersistent/topic.py).
            return await self._non_persistent(name, create, explicit)  # type: ignore[return-value]
        existing = self.topics.get(key)
        if existing is not None:
            return existing
        if key not in self._opening:  # an opening under way was started after a lookup
            if await self.lookup(key) != self.broker_id:
                raise NotOwner(f"topic {key} is served by another broker; look it up again")
            existing = self.topics.get(key)
            if existing is not None:
                return existing
        task = self._opening.get(key)
        joined = task is not None
        if task is None:
            task = self._opening[key] = asyncio.get_running_loop().create_task(self._open(name, create, explicit))
            task.add_done_callback(functools.partial(self._opened, key))
        try:
            return await asyncio.shield(task)
        except TopicNotFound:
            if not joined or not (create or explicit):
                raise
            # We joined an opening that may not create the topic (an admin's look): we may.
            # Its done callback (_opened) may not have run yet: drop it here, or the retry
            # would join the same finished opening again, for ever.
            if self._opening.get(key) is task:
                del self._opening[key]
            return await self.get_topic(topic, create, explicit)

    def _opened(self, key: str, task: asyncio.Task[PersistentTopic]) -> None:
        self._opening.pop(key, None)
        if not task.cancelled():
            # Retrieved here: every waiter that stayed has its outcome, and one that
            # left (a cancelled stream) must not leave "exception was never retrieved".
            task.exception()

    async def _open(self, name: TopicName, create: bool, explicit: bool) -> PersistentTopic:
        tenant, ns, local = name.tenant, name.namespace_part, name.local_name
        closing = self._closing.get(str(name))
        if closing is not None:  # unloaded a moment ago: its last writes go first
            await asyncio.wait({closing}, timeout=self.config.zk_session_timeout_s)
        policies_doc = await self.tenants.get_policies(tenant, ns)  # NamespaceNotFound
        policies = self._topic_policies(policies_doc, str(name.namespace))
        if not name.is_partition and await self.tenants.get_partitions(tenant, ns, local) > 0:
            raise InvalidTopicName(f"{name} is a partitioned topic: produce to and consume from its partitions")
        doc, _ = await self.ml_store.get(tenant, ns, local)
        if doc is None and not explicit and not (create and await self._may_create(name, policies)):
            raise TopicNotFound(
                f"Topic not found: {name} does not exist and its namespace's auto-creation does not create it")
        # A namespace's persistence policies choose the quorums of its new ledgers.
        ml = await ManagedLedger.open(
            tenant, ns, local, self.ledgers, self.ml_store, managed_ledger_config(self.ml_config, policies))
        topic = PersistentTopic(str(name), name.partition_index, ml, self.config, on_fenced=self.unload)
        topic.compacted = CompactedEntries(ml, self.ledgers)
        topic.mover = self.mover
        topic.ml_defaults = self.ml_config
        topic.policies = overlay(await self.read_topic_level(str(name)), policies)
        await topic.load()
        if not self.serving() or await self._bundle(name) not in self._owned:
            # Ownership was lost (or the bundle unloaded) while the topic was opening.
            await topic.close()
            raise NotOwner(f"broker {self.broker_id} no longer owns {name}; look it up again")
        self.topics[str(name)] = topic
        log.info("topic %s opened (%d entries)", name, ml.number_of_entries)
        return topic

    # -- non-persistent topics (broker/nonpersistent/) -------------------------------
    async def _non_persistent(self, name: TopicName, create: bool, explicit: bool) -> NonPersistentTopic:
        """The served non-persistent topic; made empty on first use when ``create`` and
        auto-creation allow, or ``explicit``. It exists while it is loaded: nothing of it
        is in ZooKeeper or on the bookies.

        Raises:
            NotOwner: another broker owns its bundle. TopicNotFound: not loaded here and
            may not be made. NamespaceNotFound.
        """
        key = str(name)
        existing = self.nonpersistent.get(key)
        if existing is not None:
            return existing
        if await self.lookup(key) != self.broker_id:
            raise NotOwner(f"topic {key} is served by another broker; look it up again")
        declared = await self.tenants.get_partitions(
            name.tenant, name.namespace_part, name.partitioned_topic_name.local_name, domain=NON_PERSISTENT)
        if declared and not name.is_partition:
            raise InvalidTopicName(f"{name} is a partitioned topic: produce to and consume from its partitions")
        # A declared partition is made on first use whatever auto-creation says (as Pulsar's).
        partition = name.is_partition and name.partition_index < declared
        if not explicit and not partition and not (create and self.config.allow_auto_topic_creation):
            raise TopicNotFound(f"non-persistent topic {key} is not loaded (auto-creation is off)")
        policies_doc = await self.tenants.get_policies(name.tenant, name.namespace_part)  # NamespaceNotFound
        existing = self.nonpersistent.get(key)  # made by a concurrent call meanwhile
        if existing is not None:
            return existing
        if not self.serving() or await self._bundle(name) not in self._owned:
            raise NotOwner(f"broker {self.broker_id} no longer owns {name}; look it up again")
        topic = self.nonpersistent[key] = NonPersistentTopic(key, name.partition_index, self.config)
        topic.apply_policies(self._topic_policies(policies_doc, str(name.namespace)))
        log.info("non-persistent topic %s loaded", key)
        return topic

    async def _served_non_persistent(self, name: TopicName) -> NonPersistentTopic:
        """A non-persistent topic an admin names: served here.

        Raises: NotOwner: its bundle is another broker's; TopicNotFound: not loaded.
        """
        served = self.nonpersistent.get(str(name))
        if served is not None:
            return served
        owner = await self.lookup(str(name))
        if owner != self.broker_id:
            raise NotOwner(f"topic {name} is served by {owner}; ask there")
        raise TopicNotFound(f"Topic {name} not found: a non-persistent topic exists while it is loaded")

    def list_non_persistent_topics(self, namespace: str) -> list[str]:
        """The non-persistent topics of ``tenant/namespace`` this broker serves, sorted."""
        ns = NamespaceName.parse(namespace)
        return sorted(t for t in self.nonpersistent if self.parse(t).namespace == ns)

    async def namespace_topics(
        self, namespace: str, mode: TopicsMode = TopicsMode.PERSISTENT, *, as_partitions: bool = False
    ) -> list[str]:
        """The topics of ``tenant/namespace`` in ``mode``'s domains, sorted: the persistent
        ones from ZooKeeper, the non-persistent ones asked of every owner of the
        namespace's bundles (broker/nonpersistent/listing.py). A partitioned topic by its
        base name, or (``as_partitions``, as GET_TOPICS_OF_NAMESPACE answers) as each of
        its partitions.

        Raises: InvalidArgument: not a namespace name. NamespaceNotFound, TenantNotFound.
        """
        ns = NamespaceName.parse(namespace)
        names: set[str] = set()
        if PERSISTENT in mode.domains:
            names.update(await (self.list_topic_partitions(str(ns)) if as_partitions else self.list_topics(str(ns))))
        if NON_PERSISTENT in mode.domains:
            owners = [owner for _, owner in await self.bundle_owners(str(ns))]  # NamespaceNotFound
            loaded = await non_persistent_topics(
                str(ns), owners, self.broker_id, self.list_non_persistent_topics, self.peer_topics)
            declared = {}
            for base in await self.tenants.list_partitioned_topics(ns.tenant, ns.namespace, domain=NON_PERSISTENT):
                declared[base] = await self.partitions(base)
            names.update(fold_partitions(loaded, declared, as_partitions=as_partitions))
        return sorted(names)

    def auto_topic_creation(self, policies: NamespacePolicies) -> AutoTopicCreation:
        """What applies to a namespace's new topics: its autoTopicCreation, else the config's."""
        c = self.config
        return auto_topic_creation(
            policies, c.allow_auto_topic_creation, c.allow_auto_topic_creation_type, c.default_num_partitions)

    async def _may_create(self, name: TopicName, policies: NamespacePolicies) -> bool:
        """Whether a producer or consumer may create ``name`` by using it: a declared
        partition of a partitioned topic always (as Pulsar's), else as the namespace's
        auto-creation says (a partitioned type creates partitioned topics, made by
        :meth:`client_partitions`, not a topic of this name)."""
        if name.is_partition:
            base = name.partitioned_topic_name
            declared = await self.tenants.get_partitions(name.tenant, name.namespace_part, base.local_name, domain=name.domain)
            if name.partition_index < declared:
                return True
        rule = self.auto_topic_creation(policies)
        return rule.allow_auto_topic_creation and (not rule.partitioned or name.is_partition)

    async def client_partitions(self, topic: str) -> int:
        """:meth:`partitions`, as a producer or consumer asks before using ``topic``: a
        missing topic of a namespace that auto-creates partitioned topics is created with
        its ``default_num_partitions`` (Pulsar's brokers do it on this question).

        Raises: as :meth:`partitions`; NamespaceNotFound.
        """
        name = self.parse(topic)
        count = await self.partitions(str(name))
        if count or name.is_partition or not name.is_persistent:
            # A non-persistent topic is partitioned only by an admin here.
            return count
        tenant, ns, local = name.tenant, name.namespace_part, name.local_name
        rule = self.auto_topic_creation(self._topic_policies(await self.tenants.get_policies(tenant, ns), str(name.namespace)))
        if not rule.partitioned or (await self.ml_store.get(tenant, ns, local))[0] is not None:
            return 0
        try:
            await self.tenants.create_partitioned_topic(tenant, ns, local, rule.default_num_partitions or 1)
            log.info("topic %s auto-created with %d partitions", name, rule.default_num_partitions or 1)
        except AlreadyExists:
            pass  # another client's question made it
        return await self.partitions(str(name))

    async def create_missed_partition(self, topic: str) -> bool:
        """Create the managed ledger of a declared partition that has none (Pulsar's
        createMissedPartitions, for one partition); returns whether it was missing.

        Raises:
            InvalidArgument: not a partition's name.
            TopicNotFound: the partitioned topic, or this partition of it, is not declared.
            NotOwner: another broker serves the partition.
        """
        name = self.parse(topic)
        if not name.is_partition:
            raise InvalidArgument(f"{name} is not a partition's name (topic-partition-N)")
        base = name.partitioned_topic_name
        declared = await self.tenants.get_partitions(name.tenant, name.namespace_part, base.local_name, domain=name.domain)
        if name.partition_index >= declared:
            raise TopicNotFound(f"Partitioned Topic not found: {base} has no partition {name.partition_index}")
        if (await self.ml_store.get(name.tenant, name.namespace_part, name.local_name))[0] is not None:
            return False
        await self.get_topic(str(name), explicit=True)
        log.info("partition %s created (it had no managed ledger)", name)
        return True

    # -- admin -----------------------------------------------------------------
    async def create_topic(self, topic: str, partitions: int) -> None:
        name = self.parse(topic)
        if partitions:
            if name.is_partition:
                raise InvalidTopicName(f"{name} names a partition; create the partitioned topic {name.partitioned_topic_name}")
            if not name.is_persistent and str(name) in self.nonpersistent:
                raise AlreadyExists(f"{name} already exists as a non-partitioned topic")
            await self.tenants.create_partitioned_topic(
                name.tenant, name.namespace_part, name.local_name, partitions, domain=name.domain)
            return
        if not name.is_persistent:
            if str(name) in self.nonpersistent:
                raise AlreadyExists(f"topic {name} already exists")
            if await self.partitions(str(name)):
                raise AlreadyExists(f"{name} already exists as a partitioned topic")
            await self.get_topic(str(name), explicit=True)
            return
        if name.is_partition:
            raise InvalidTopicName(f"{name} names a partition; create the partitioned topic {name.partitioned_topic_name}")
        # Metadata only (docs/gateway.md, "Creating a topic"): the topic is loaded, and its
        # first ledger opened, by whoever uses it first, on the broker that owns it then.
        await self.tenants.create_non_partitioned_topic(
            name.tenant, name.namespace_part, name.local_name, empty_ledger_list())

    async def list_topics(self, namespace: str) -> list[str]:
        """Every topic of ``tenant/namespace``: partitioned topics by their base name,
        non-partitioned ones (partitions are listed as the partitioned topic). A topic
        whose name only looks like a partition's (``x-partition-3`` with no partitioned
        topic ``x``: auto-created, as Pulsar's brokers allow) is a topic of its own."""
        ns = NamespaceName.parse(namespace)
        await self.tenants.get_policies(ns.tenant, ns.namespace)  # NamespaceNotFound
        partitioned = set(await self.tenants.list_partitioned_topics(ns.tenant, ns.namespace))
        plain = set()
        for local in await self.ml_store.list_topics(ns.tenant, ns.namespace):
            name = ns.topic(local)
            if not (name.is_partition and str(name.partitioned_topic_name) in partitioned):
                plain.add(str(name))
        return sorted(partitioned | plain)

    # -- schemas (the registry: broker/schema/; docs/schemas.md) ------------------------
    def _schema_topic(self, topic: str) -> str:
        """The name a topic's schema is kept under (a partition's: its partitioned topic's)."""
        name = self.parse(topic)
        return str(name.partitioned_topic_name if name.is_partition else name)

    async def schema_rules(self, topic: str) -> SchemaRules:
        """The schema rules of ``topic``'s namespace (its strategy resolved: UNDEFINED or
        unset is the broker's ``schema_compatibility_strategy``).

        Raises: NamespaceNotFound.
        """
        policies = await self.namespace_policies.get(str(self.parse(topic).namespace))
        strategy = effective(
            policies.schema_compatibility_strategy or SchemaCompatibilityStrategy.UNDEFINED,
            SchemaCompatibilityStrategy.parse(self.config.schema_compatibility_strategy),
        )
        return SchemaRules(strategy, policies.allow_auto_update_schema, policies.validation_enforced)

    async def topic_schema(self, topic: str, version: int | None = None) -> StoredSchema | None:
        """The schema ``topic`` keeps (a partition: its partitioned topic's), its latest
        version or ``version``; None: none (deleted, or no such version)."""
        try:
            return await self.schema_registry.get(self._schema_topic(topic), version)
        except SchemaNotFound:
            return None

    async def declare_schema(self, topic: str, schema: SchemaInfo, *, consumer: bool = False) -> StoredSchema:
        """A producer (or, ``consumer``, a consumer or reader) of ``topic`` declares
        ``schema`` (type NONE: bytes, no schema): the version it writes or reads with.

        A producer's schema identical to a live version gets that version; a new one is
        registered as the next version when the namespace's ``isAllowAutoUpdateSchema``
        and its compatibility strategy allow. A consumer's is registered when the topic
        has no schema and is idle (no producers, consumers or data), else checked against
        the registered versions (it may read them; then the version identical to it, or
        the latest). A producer without a schema is refused by
        ``schemaValidationEnforced`` on a topic with one; a consumer without one is not
        checked. Without a schema, the answer is version -1 of type NONE.

        Raises:
            IncompatibleSchema: refused (the message names the strategy, the version
                and the first field that does not resolve).
            InvalidSchema: the definition does not parse for its type.
            NamespaceNotFound.
        """
        key = self._schema_topic(topic)
        rules = await self.schema_rules(topic)
        if schema.type == 0:
            if not consumer:
                await self.schema_registry.require_schema_for(key, rules)
            return StoredSchema(schema, -1)
        if not consumer:
            return await self.schema_registry.put(key, schema, rules)
        stored = await self.schema_registry.consume(key, schema, rules, idle=self._schema_idle(topic))
        if stored is not None:
            return stored
        return await self.schema_registry.get(key)

    def _schema_idle(self, topic: str) -> bool:
        """No producer, no consumer and no data on ``topic`` here (Pulsar's test before
        a consumer's schema is registered)."""
        if not self.parse(topic).is_persistent:
            np_topic = self.nonpersistent.get(str(self.parse(topic)))
            return np_topic is None or not (np_topic.producers or any(s.consumers for s in np_topic.subscriptions.values()))
        served = self.topics.get(str(self.parse(topic)))
        if served is None:
            return True
        consumers = any(s.consumers for s in served.subscriptions.values())
        return not served.producers and not consumers and served.ml.number_of_entries == 0

    async def get_schema(self, topic: str, version: int | None = None) -> StoredSchema:
        """Admin: the latest schema of ``topic``, or its ``version``.

        Raises: SchemaNotFound (none, deleted, no such version); InvalidTopicName.
        """
        return await self.schema_registry.get(self._schema_topic(topic), version)

    async def get_all_schemas(self, topic: str) -> list[StoredSchema]:
        """Admin: every version since the last delete, oldest first (empty: none)."""
        return list(await self.schema_registry.versions(self._schema_topic(topic)))

    async def post_schema(self, topic: str, schema: SchemaInfo) -> StoredSchema:
        """Admin upload: registered as a producer's schema (the namespace's strategy
        applies; ``isAllowAutoUpdateSchema`` does not); an identical live version is
        returned as it is.

        Raises: IncompatibleSchema; InvalidSchema; InvalidArgument (type NONE: there is
        nothing to upload); NamespaceNotFound.
        """
        if schema.type == 0:
            raise InvalidArgument("a schema of type NONE (BYTES) is no schema: nothing to upload")
        key = self._schema_topic(topic)
        return await self.schema_registry.put(key, schema, await self.schema_rules(topic), admin=True)

    async def delete_schema(self, topic: str) -> int | None:
        """Admin: delete the schema (the delete is a version of its own; GET answers not
        found afterwards and the next schema registers without a check). The delete's
        version; None: the topic had no schema."""
        return await self.schema_registry.delete(self._schema_topic(topic))

    async def test_schema_compatibility(self, topic: str, schema: SchemaInfo) -> Compatibility:
        """Admin: would ``schema`` be registered under the namespace's strategy? Stores
        nothing. Raises: InvalidSchema; NamespaceNotFound."""
        rules = await self.schema_rules(topic)
        return await self.schema_registry.test(self._schema_topic(topic), schema, rules.strategy)

    async def schema_version_of(self, topic: str, schema: SchemaInfo) -> int:
        """Admin: the version of the live schema identical to ``schema``.

        Raises: SchemaNotFound.
        """
        return await self.schema_registry.version_of(self._schema_topic(topic), schema)

    async def list_topic_partitions(self, namespace: str) -> list[str]:
        """Every topic of ``tenant/namespace`` as Pulsar's brokers list them to clients
        (GET_TOPICS_OF_NAMESPACE): a partitioned topic as its partitions (each of them,
        also one not opened yet), a non-partitioned one by its name; sorted.

        Raises:
            InvalidArgument: not a namespace name. NamespaceNotFound, TenantNotFound.
        """
        ns = NamespaceName.parse(namespace)
        await self.tenants.get_policies(ns.tenant, ns.namespace)  # NamespaceNotFound
        names = {str(ns.topic(local)) for local in await self.ml_store.list_topics(ns.tenant, ns.namespace)}
        for topic in await self.tenants.list_partitioned_topics(ns.tenant, ns.namespace):
            name = TopicName.parse(topic)
            count = await self.tenants.get_partitions(name.tenant, name.namespace_part, name.local_name)
            names.update(str(name.partition(i)) for i in range(count))
        return sorted(names)

    async def topic_exists(self, name: TopicName) -> bool:
        """Whether ``name`` exists as Pulsar's admin asks it: a persistent topic with a
        managed ledger or partitioned metadata, a non-persistent one served here."""
        if not name.is_persistent:
            return str(name) in self.nonpersistent
        if not name.is_partition and await self.tenants.get_partitions(name.tenant, name.namespace_part, name.local_name):
            return True
        return (await self.ml_store.get(name.tenant, name.namespace_part, name.local_name))[0] is not None

    async def delete_topic(self, topic: str, force: bool = False) -> None:
        """Delete a topic (every partition of a partitioned one) and its data; with
        ``force`` also while producers or consumers are connected (their streams end with
        TopicNotFound: they fail rather than create the topic again).

        Raises:
            TopicNotFound; PreconditionFailed when producers or consumers are connected.
        """
        name = self.parse(topic)
        np_partitions = 0 if name.is_persistent else await self.partitions(str(name))
        if np_partitions:
            # Its partitions live on their owners (the admin client deletes each there
            # first); what is kept of it is its count.
            for i in range(np_partitions):
                part = self.nonpersistent.get(str(name.partition(i)))
                if part is not None and not force and (part.producers or any(s.consumers for s in part.subscriptions.values())):
                    raise PreconditionFailed(f"topic {part.name} has connected producers or consumers; close them first")
            await self.tenants.delete_partitioned_topic(
                name.tenant, name.namespace_part, name.local_name, domain=NON_PERSISTENT)
            return
        if not name.is_persistent:
            np_topic = await self._served_non_persistent(name)
            if not force and (np_topic.producers or any(s.consumers for s in np_topic.subscriptions.values())):
                raise PreconditionFailed(f"topic {name} has connected producers or consumers; close them first")
            self.nonpersistent.pop(str(name), None)
            await np_topic.close(TopicNotFound(f"topic {name} was deleted"))
            # Its schema stays: schemas are kept by tenant/namespace/topic, without the
            # domain (as Pulsar's registry), so it is the persistent namesake's as well.
            return
        partitions = 0 if name.is_partition else await self.partitions(str(name))
        targets = [name.partition(i) for i in range(partitions)] if partitions else [name]
        for target in targets:
            served = self.topics.get(str(target))
            if not force and served is not None and (served.producers or any(s.consumers for s in served.subscriptions.values())):
                raise PreconditionFailed(f"topic {target} has connected producers or consumers; close them first")
        for target in targets:
            doc, _ = await self.ml_store.get(target.tenant, target.namespace_part, target.local_name)
            if doc is None:
                if not partitions:
                    raise TopicNotFound(f"topic {target} does not exist")
                continue
            topic_obj = await self.get_topic(str(target), create=False)
            await topic_obj.close_and_delete()
            self.topics.pop(str(target), None)
        if partitions:
            await self.tenants.delete_partitioned_topic(name.tenant, name.namespace_part, name.local_name)
        if not name.is_partition:  # its schema and policies go with it (a partition's are its topic's)
            await self.schema_registry.drop(str(name))
            await self.topic_policies.delete(str(name))
            self._topic_level.pop(str(name), None)

    async def drop_partitioned_if_empty(self, topic: str) -> bool:
        """Forget a partitioned topic (its metadata, schema and policies) when none of its
        partitions has a managed ledger (Pulsar's tryToDeletePartitionedMetadata, asked by
        the inactive-topic task after deleting a partition); returns whether it did.

        Raises: TopicNotFound (not, or no longer, a partitioned topic).
        """
        name = self.parse(topic)
        count = await self.partitions(str(name))
        if not count:
            raise TopicNotFound(f"partitioned topic {name} does not exist")
        for i in range(count):
            part = name.partition(i)
            if (await self.ml_store.get(part.tenant, part.namespace_part, part.local_name))[0] is not None:
                return False
        await self.tenants.delete_partitioned_topic(name.tenant, name.namespace_part, name.local_name)
        await self.schema_registry.drop(str(name))
        await self.topic_policies.delete(str(name))
        self._topic_level.pop(str(name), None)
        return True

    def new_producer_name(self) -> str:
        return f"{self.broker_id.replace(':', '-')}-{uuid.uuid4().hex[:8]}"
