"""The broker's configuration (env prefix ``MAGNETAR_BROKER_``; sample: conf/broker.toml)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from magnetar.common.config import (
    AuthenticationSettings,
    ClientTlsConfig,
    ServiceConfig,
    ServiceTokenSettings,
)
from magnetar.common.errors import InvalidArgument
from magnetar.ledger.metadata import check_quorums

DEFAULT_PORT = 6660
"""The gRPC door's port (``magnetar://``): Pulsar's 6650 and 6651 belong to Pulsar's
binary protocol (``protocol_port``, ``protocol_tls_port``), so that a Pulsar application
moves to Magnetar by changing only a host name."""


class BrokerConfig(ServiceConfig, ClientTlsConfig, AuthenticationSettings, ServiceTokenSettings):
    model_config = SettingsConfigDict(env_prefix="MAGNETAR_BROKER_", extra="forbid")

    protocol_port: int = Field(default=6650, ge=0, le=65535)
    """Port of Pulsar's binary protocol (``pulsar://``, served by broker/protocol/) on
    ``host``; 0: not served. Brokers advertise it in their registration, so lookups
    redirect pulsar-client to the owner's."""
    protocol_tls_port: int = Field(default=6651, ge=0, le=65535)
    """Port of Pulsar's binary protocol over TLS (``pulsar+ssl://``), served when
    ``tls_enabled`` with the same certificate, key, CA and client-certificate requirement
    as the gRPC port; 0: not served. Advertised beside ``protocol_port``'s URL."""
    session_port: int = Field(default=6661, ge=0, le=65535)
    """Port of the SDK's framed session (broker/session/: the ``Session`` RPC's messages
    over plain TCP, each a 4-byte length then the message, without gRPC's cost per
    message) on ``host``, with TLS when ``tls_enabled`` (the gRPC port's certificate,
    key, CA and client-certificate requirement); 0: not served. Advertised in the
    broker's registration and lookups; an SDK that cannot reach it uses the ``Session``
    RPC."""
    protocol_keepalive_s: float = Field(default=30.0, gt=0)
    """Pulsar protocol keepalive (Pulsar's keepAliveIntervalSeconds): a connection that
    sent nothing for this long gets a PING, and is closed when nothing came back by the
    next tick; one that has not completed its handshake by then is closed."""
    protocol_max_unsent_bytes: int = Field(default=4 * 1024 * 1024, gt=0)
    """Bytes a Pulsar protocol connection wrote that its client has not read yet, past
    which the broker sends its consumers nothing more and reads nothing more from it
    until the client reads (Netty's write-buffer high-water mark, in Pulsar)."""
    protocol_write_timeout_s: float = Field(default=60.0, gt=0)
    """A Pulsar protocol connection whose unread bytes stay over
    ``protocol_max_unsent_bytes`` this long is closed (a client that never reads)."""
    cluster_name: str = "standalone"
    """This cluster's name (Pulsar's): tenants' allowed clusters must name it."""
    zk_session_timeout_s: float = 5.0
    """ZooKeeper session timeout T: a dead broker's bundles move to another broker this long
    after it died; a broker that heard nothing from ZooKeeper for 0.7 T stops serving
    (broker/lease.py); clients recover from a broker fault within 2 T + 5 s."""
    ensemble_size: int = Field(default=2, ge=1)
    """Bookies per topic ledger (E)."""
    write_quorum: int = Field(default=2, ge=1)
    """Copies of each entry (Qw)."""
    ack_quorum: int = Field(default=2, ge=1)
    """Copies confirmed before a publish is acknowledged (Qa)."""
    max_entries_per_ledger: int = Field(default=50_000, ge=1)
    """A topic's ledger rolls over after this many entries ..."""
    max_ledger_size_bytes: int = Field(default=512 * 1024 * 1024, ge=1024)
    """... or this many bytes ..."""
    max_ledger_age_s: float = Field(default=4 * 3600, gt=0)
    """... or this age."""
    max_message_bytes: int = Field(default=5 * 1024 * 1024, ge=1024)
    """Largest entry (a batch of messages) a producer may publish (Pulsar's 5 MB)."""
    bundles_per_namespace: int = Field(default=4, ge=1)
    """Hash ranges a new namespace is split into when its create names no count (Pulsar's
    defaultNumberOfNamespaceBundles), and those of a namespace that stores no boundaries;
    a broker owns whole bundles."""
    load_balancer_namespace_maximum_bundles: int = Field(default=128, ge=1, le=65536)
    """Most bundles a namespace may have: at create, and after a split (Pulsar's
    loadBalancerNamespaceMaximumBundles)."""
    allow_auto_topic_creation: bool = True
    """Create a topic on first use; off: unknown topics are an error (a namespace's
    autoTopicCreation policy overrides this and the next two)."""
    allow_auto_topic_creation_type: Literal["non-partitioned", "partitioned"] = "non-partitioned"
    """What is auto-created (Pulsar's allowAutoTopicCreationType); a partitioned topic is
    made, with ``default_num_partitions``, when a client asks its partitioned metadata."""
    default_num_partitions: int = Field(default=1, ge=1)
    """Partitions of an auto-created partitioned topic (Pulsar's defaultNumPartitions)."""
    deduplication_enabled: bool = True
    """Drop a resend (same producer name, sequence id not above the last stored)."""
    deduplication_entries_interval: int = Field(default=1000, ge=0)
    """Store a snapshot of the deduplication state every this many entries (Pulsar's
    brokerDeduplicationEntriesInterval): a broker taking the topic over scans only the
    entries after it. 0: no snapshots (every entry is scanned)."""
    dispatch_max_entries: int = Field(default=100, ge=1)
    """Entries read per dispatcher round."""
    delayed_bucket_s: float = Field(default=5.0, gt=0)
    """Delayed delivery: a subscription keeps in memory the delayed messages due before
    the end of the next bucket of this width; later ones wait in per-bucket files."""
    delayed_spill_dir: str = ""
    """Where those files go (a cache, rebuilt from the topic: nothing durable); empty: the
    system's temp directory."""
    delayed_inline_max_bytes: int = Field(default=1024, ge=0)
    """A delayed entry up to this size is kept with its position (memory and files), so it
    goes out without a read when due; larger ones are read again from the bookies."""
    cursor_persist_interval_s: float = Field(default=1.0, gt=0)
    """Subscriptions' positions are written to ZooKeeper at most this often: after a
    crash, acks of the last interval may be delivered again (nothing older)."""
    max_unacked_messages_per_consumer: int = Field(default=50_000, ge=0)
    """A Shared or Key_Shared consumer holding this many unacknowledged messages gets
    nothing more until it acks half of them (Pulsar's ``maxUnackedMessagesPerConsumer``;
    0: no limit). Exclusive and Failover consumers and readers have no such limit."""
    stats_interval_s: float = Field(default=10.0, gt=0)
    """Topic stats' message and byte rates are those of the last interval this long."""
    expose_topic_level_metrics_in_prometheus: bool = True
    """``/metrics`` has Pulsar's series per topic and subscription (labels ``topic``,
    ``subscription``); false: summed per namespace (Pulsar's
    ``exposeTopicLevelMetricsInPrometheus``; docs/metrics.md)."""
    retention_check_interval_s: float = Field(default=60.0, gt=0)
    """How often each served topic deletes ledgers its retention no longer keeps."""
    default_retention_time_minutes: int = Field(default=0, ge=-1)
    """Retention of namespaces that set none (-1: unlimited; 0: consumed data goes at once)."""
    default_retention_size_mb: int = Field(default=0, ge=-1)
    """Retention size of namespaces that set none (-1: unlimited)."""
    policy_check_interval_s: float = Field(default=10.0, gt=0)
    """How often each served topic re-reads its namespace's policies (a change made
    through another broker) and expires messages past the message TTL and evicts
    backlog over a backlog quota (Pulsar checks every 5 minutes and every 60 s)."""
    delete_inactive_topics_enabled: bool = False
    """Pulsar's brokerDeleteInactiveTopicsEnabled (Pulsar's default: true; Magnetar's:
    false, so an upgrade deletes nothing): delete topics no client has used for
    ``delete_inactive_topics_max_inactive_duration_s`` (a namespace's
    inactiveTopicPolicies replace these settings). docs/broker.md"""
    delete_inactive_topics_frequency_s: float = Field(default=60.0, gt=0)
    """brokerDeleteInactiveTopicsFrequencySeconds: how often each broker looks."""
    delete_inactive_topics_mode: Literal["delete_when_no_subscriptions", "delete_when_subscriptions_caught_up"] = (
        "delete_when_no_subscriptions")
    """brokerDeleteInactiveTopicsMode: which idle topics may go."""
    delete_inactive_topics_max_inactive_duration_s: int = Field(default=60, ge=1, lt=2**31)
    """brokerDeleteInactiveTopicsMaxInactiveDurationSeconds: idle time before deletion."""
    schema_compatibility_strategy: Literal[
        "ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD", "FULL",
        "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE",
    ] = "FULL"
    """The schema compatibility strategy of namespaces whose ``schemaCompatibilityStrategy``
    is UNDEFINED (Pulsar's broker setting of the same name; docs/schemas.md)."""
    gc_freeze_interval_s: float = Field(default=10.0, ge=0)
    """Every this often the live objects are frozen out of the garbage collector's passes
    (see magnetar.common.gcpolicy; 0: the default collector, with its pauses)."""
    gc_full_collect_interval_s: float = Field(default=600.0, ge=0)
    """Every this often one full garbage collection runs over everything (frees cycles
    that died while frozen; 0: never)."""
    gc_max_full_pause_s: float = Field(default=1.0, gt=0)
    """A full garbage collection expected to stop the event loop longer than this is
    skipped (the broker would miss its ZooKeeper session's pings; see
    magnetar.common.gcpolicy)."""
    ledger_add_timeout_s: float = Field(default=10.0, gt=0)
    """A bookie that has not answered an add by then is replaced (an ensemble change)."""
    ledger_read_timeout_s: float = Field(default=10.0, gt=0)
    """A read a bookie has not answered by then goes to the next replica."""
    ml_cache_max_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    """Recently added entries each topic keeps in memory for tailing reads (0: none)."""
    ml_max_open_readers: int = Field(default=32, ge=1)
    """Closed ledgers each topic keeps open for reading."""
    ml_read_batch_entries: int = Field(default=1000, ge=1)
    """Most entries one read from the bookies asks for."""
    max_unacked_ranges_to_persist: int = Field(default=10_000, ge=1)
    """Acknowledged ranges stored per cursor (lowest first); acks of later ones are
    delivered again after a restart (Pulsar's managedLedgerMaxUnackedRangesToPersist)."""
    max_batch_acks_to_persist: int = Field(default=500, ge=1)
    """Partly acknowledged batch entries stored per cursor."""
    max_redelivery_counts_to_persist: int = Field(default=5_000, ge=1)
    """Redelivery counts stored per cursor; later ones restart from 0 after a restart."""
    authorization_enabled: bool = False
    """Check what each role may do (Pulsar's authorizationEnabled; docs/security.md):
    superusers, tenant admin roles, namespace and subscription permissions. Needs
    authentication_enabled (a role comes from a token)."""
    proxy_roles: list[str] = []
    """Roles that may act for another role (Pulsar's ``proxyRoles``): a call of one of
    them that names an ``original-principal`` is that principal's. The gateway uses it
    for callers it knows by their TLS client certificate, which it cannot forward; list
    the gateway's own role here. Anyone else naming an original principal is refused."""
    authorization_cache_ttl_s: float = Field(default=2.0, gt=0, le=4.0)
    """How long a tenant's admin roles and a namespace's permissions are used before
    being read again; open streams ask again every min(1 s, this), so a revoked role
    loses access, open streams included, within this + 1 s (at most 5 s)."""
    # -- load manager (Pulsar's loadBalancer* settings; docs/load-balancing.md) --------
    load_balancer_enabled: bool = True
    """Pulsar's loadBalancerEnabled: brokers report their load and a lookup places an
    unowned bundle on the least loaded broker; off: on the broker asked."""
    load_balancer_host_usage_check_interval_s: float = Field(default=60.0, gt=0)
    """loadBalancerHostUsageCheckIntervalMinutes: how often a broker measures its load,
    writes its report when due, and re-reads the others' reports."""
    load_balancer_report_update_threshold_percentage: float = Field(default=10.0, ge=0)
    """loadBalancerReportUpdateThresholdPercentage: the report is written when it changed
    by more than this (usage points, or percent of a rate or count) ..."""
    load_balancer_report_update_max_interval_s: float = Field(default=900.0, gt=0)
    """... or is this old (loadBalancerReportUpdateMaxIntervalMinutes)."""
    load_balancer_load_placement_strategy: Literal["LeastLongTermMessageRate", "LeastResourceUsageWithWeight"] = (
        "LeastLongTermMessageRate")
    """loadBalancerLoadPlacementStrategy: where an unowned bundle goes: the broker with
    the lowest message rate (Pulsar's default) or the lowest weighted resource usage."""
    load_balancer_shedding_enabled: bool = True
    """loadBalancerSheddingEnabled: the leader asks overloaded brokers to unload bundles."""
    load_balancer_shedding_interval_s: float = Field(default=60.0, gt=0)
    """loadBalancerSheddingIntervalMinutes: how often the leader looks."""
    load_balancer_shedding_grace_period_s: float = Field(default=1800.0, ge=0)
    """loadBalancerSheddingGracePeriodMinutes: a bundle unloaded is not unloaded again
    within this."""
    load_balancer_load_shedding_strategy: Literal["ThresholdShedder", "OverloadShedder"] = "ThresholdShedder"
    """loadBalancerLoadSheddingStrategy (Pulsar's default: ThresholdShedder)."""
    load_balancer_broker_threshold_shedder_percentage: float = Field(default=10.0, ge=0, le=100)
    """loadBalancerBrokerThresholdShedderPercentage: ThresholdShedder sheds from a broker
    this many points over the brokers' average usage."""
    load_balancer_broker_overloaded_threshold_percentage: float = Field(default=85.0, gt=0, le=100)
    """loadBalancerBrokerOverloadedThresholdPercentage: OverloadShedder sheds from a
    broker over this usage; placement avoids such a broker."""
    load_balancer_history_resource_percentage: float = Field(default=0.9, ge=0, lt=1)
    """loadBalancerHistoryResourcePercentage: ThresholdShedder's weight of a broker's
    earlier usage against the newest report (0: the newest only)."""
    load_balancer_bundle_unload_min_throughput_threshold: float = Field(default=10.0, ge=0)
    """loadBalancerBundleUnloadMinThroughputThreshold, MB/s: an offload worth less is
    not done (0: any)."""
    load_balancer_cpu_resource_weight: float = Field(default=1.0, ge=0)
    """loadBalancerCPUResourceWeight: weight of CPU in a broker's usage."""
    load_balancer_memory_resource_weight: float = Field(default=1.0, ge=0)
    """loadBalancerMemoryResourceWeight."""
    load_balancer_bandwith_in_resource_weight: float = Field(default=1.0, ge=0)
    """loadBalancerBandwithInResourceWeight (Pulsar's spelling)."""
    load_balancer_bandwith_out_resource_weight: float = Field(default=1.0, ge=0)
    """loadBalancerBandwithOutResourceWeight."""
    load_balancer_override_broker_nic_speed_gbps: float = Field(default=1.0, gt=0)
    """loadBalancerOverrideBrokerNicSpeedGbps: the network's capacity a broker's
    bandwidth usage is a share of (brokers sharing a host count their own topics' bytes)."""
    load_balancer_auto_bundle_split_enabled: bool = True
    """loadBalancerAutoBundleSplitEnabled: the leader splits hot bundles."""
    load_balancer_namespace_bundle_max_topics: int = Field(default=1000, ge=1)
    """loadBalancerNamespaceBundleMaxTopics: a bundle with more topics is hot ..."""
    load_balancer_namespace_bundle_max_sessions: int = Field(default=1000, ge=1)
    """... or more producers and consumers (loadBalancerNamespaceBundleMaxSessions) ..."""
    load_balancer_namespace_bundle_max_msg_rate: float = Field(default=30000.0, gt=0)
    """... or more messages/s in and out (loadBalancerNamespaceBundleMaxMsgRate) ..."""
    load_balancer_namespace_bundle_max_bandwidth_mbytes: float = Field(default=100.0, gt=0)
    """... or more MB/s in and out (loadBalancerNamespaceBundleMaxBandwidthMbytes)."""
    default_namespace_bundle_split_algorithm: Literal[
        "range_equally_divide", "topic_count_equally_divide"] = "range_equally_divide"
    """defaultNamespaceBundleSplitAlgorithm: how the leader splits a hot bundle."""
    crash_point: str = ""
    """Fault injection for crash tests: the broker exits at once on reaching this named
    point (``after_move_publish``: a retry/DLQ copy is stored, the original not yet
    acknowledged). Empty: never."""

    @model_validator(mode="after")
    def _ports(self) -> Self:
        served = [p for p in (self.port or DEFAULT_PORT, self.protocol_port, self.protocol_tls_port if self.tls_enabled else 0,
                              self.session_port) if p]
        if len(served) != len(set(served)):
            raise ValueError(
                f"port, protocol_port, protocol_tls_port and session_port must differ, got {self.port or DEFAULT_PORT}, "
                f"{self.protocol_port}, {self.protocol_tls_port}, {self.session_port}"
            )
        return self

    @model_validator(mode="after")
    def _bundles(self) -> Self:
        if self.bundles_per_namespace > self.load_balancer_namespace_maximum_bundles:
            raise ValueError(
                f"bundles_per_namespace ({self.bundles_per_namespace}) must not exceed "
                f"load_balancer_namespace_maximum_bundles ({self.load_balancer_namespace_maximum_bundles})")
        return self

    @model_validator(mode="after")
    def _authorization(self) -> Self:
        if self.authorization_enabled and not self.authentication_enabled:
            raise ValueError("authorization_enabled needs authentication_enabled: roles come from tokens")
        return self

    @model_validator(mode="after")
    def _quorums(self) -> Self:
        try:
            check_quorums(self.ensemble_size, self.write_quorum, self.ack_quorum)
        except InvalidArgument as exc:  # pydantic reports ValueErrors as bad settings
            raise ValueError(
                "quorums must satisfy ensemble_size >= write_quorum >= ack_quorum, got "
                f"{self.ensemble_size}, {self.write_quorum}, {self.ack_quorum}"
            ) from exc
        return self
