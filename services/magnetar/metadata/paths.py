"""Every znode path Magnetar uses is spelled here, under one root (default ``/magnetar``).

::

    <root>/bookies/available/<host:port>   ephemeral, JSON info of a writable bookie
    <root>/bookies/readonly/<host:port>    ephemeral, JSON info of a read-only bookie
    <root>/cookies/<host:port>             persistent, JSON: the bookie's cookie (docs/bookie.md)
    <root>/ledgers/L<id, 19 digits>        ledger metadata (docs/ledger.md)
    <root>/idgen/ledgers                   ledger id generator
    <root>/ledger-writers/<writer id>      ephemeral, a live ledger client that writes ledgers
    <root>/underreplication/ledgers/L<id>  persistent, JSON: the bookies a ledger is missing
    <root>/underreplication/locks/L<id>    ephemeral, the auditor replica replicating it
    <root>/auditor/election                kazoo Election of the auditor replicas
    <root>/auditor/last-audit              JSON: when and how the last periodic check ran
    <root>/admin/tenants/<tenant>                              tenant info (JSON)
    <root>/admin/clusters/<cluster>                            cluster data (JSON: service URLs)
    <root>/admin/tenants/<tenant>/<namespace>                  namespace policies (JSON)
    <root>/admin/partitioned-topics/<tenant>/<namespace>/<topic>   {"partitions": N}, persistent
    <root>/admin/non-persistent-partitioned-topics/<tenant>/<namespace>/<topic>   {"partitions": N}
    <root>/schemas/<tenant>/<namespace>/<topic>                JSON: the topic's schema (docs/pulsar-protocol.md)
    <root>/managed-ledgers/<tenant>/<namespace>/persistent/<topic>              ledger list (JSON)
    <root>/managed-ledgers/<tenant>/<namespace>/persistent/<topic>/<cursor>     cursor (JSON)
    <root>/brokers/<host:port>                                 ephemeral, a live broker
    <root>/ownership/<tenant>/<namespace>/<bundle>             ephemeral, the owning broker
    <root>/loadbalance/brokers/<host:port>                     ephemeral, JSON: the broker's load report
    <root>/loadbalance/leader                                  kazoo Election of the load manager's leader
"""

from __future__ import annotations

from magnetar.common.errors import InvalidArgument

MAX_ZNODE_NAME_LENGTH = 4096
"""Longest name of one znode here, in characters; the names that reach it are checked
shorter by :mod:`magnetar.common.names`. A bound, so that no path can make a request
ZooKeeper drops the session over."""


def _check_name(kind: str, name: str) -> str:
    if len(name) > MAX_ZNODE_NAME_LENGTH:
        raise InvalidArgument(
            f"invalid {kind} for a znode name: {name[:40]!r}… is {len(name):,} characters long, "
            f"more than {MAX_ZNODE_NAME_LENGTH:,}"
        )
    if not name or "/" in name or name in (".", "..") or any(ord(c) < 32 for c in name):
        raise InvalidArgument(f"invalid {kind} for a znode name: {name!r}")
    return name


class ZkPaths:
    """Builds the znode paths under one root."""

    def __init__(self, root: str = "/magnetar") -> None:
        """Args: root: absolute znode path, e.g. ``/magnetar`` (not ``/`` itself).

        Raises:
            InvalidArgument: the root is not an absolute path without a trailing slash.
        """
        if not root.startswith("/") or root == "/" or root.endswith("/") or "//" in root:
            raise InvalidArgument(f"ZooKeeper root must look like /magnetar, got {root!r}")
        for part in root[1:].split("/"):
            _check_name("root path component", part)
        self.root = root

    def bookies(self) -> str:
        """Parent of both bookie registration lists."""
        return f"{self.root}/bookies"

    def bookies_available(self) -> str:
        """Parent of writable bookies' registrations."""
        return f"{self.root}/bookies/available"

    def bookie_available(self, bookie_id: str) -> str:
        """Registration of a writable bookie."""
        return f"{self.bookies_available()}/{_check_name('bookie id', bookie_id)}"

    def bookies_readonly(self) -> str:
        """Parent of read-only bookies' registrations."""
        return f"{self.root}/bookies/readonly"

    def bookie_readonly(self, bookie_id: str) -> str:
        """Registration of a read-only bookie."""
        return f"{self.bookies_readonly()}/{_check_name('bookie id', bookie_id)}"

    def cookies(self) -> str:
        """Parent of the bookies' cookies (BookKeeper's ``/ledgers/cookies``)."""
        return f"{self.root}/cookies"

    def cookie(self, bookie_id: str) -> str:
        """The cookie of one bookie: which directories hold its data."""
        return f"{self.cookies()}/{_check_name('bookie id', bookie_id)}"

    def ledgers(self) -> str:
        """Parent of ledger metadata znodes."""
        return f"{self.root}/ledgers"

    def ledger(self, ledger_id: int) -> str:
        """Metadata of one ledger (zero-padded so names sort by id)."""
        if ledger_id < 0:
            raise InvalidArgument(f"ledger id must not be negative, got {ledger_id}")
        return f"{self.ledgers()}/L{ledger_id:019d}"

    def ledger_id_generator(self) -> str:
        """The znode ledger ids are drawn from."""
        return f"{self.root}/idgen/ledgers"

    def ledger_writers(self) -> str:
        """Parent of live ledger writers' ephemeral registrations."""
        return f"{self.root}/ledger-writers"

    def ledger_writer(self, writer_id: str) -> str:
        return f"{self.ledger_writers()}/{_check_name('writer id', writer_id)}"

    # -- auditor ------------------------------------------------------------------
    def under_replicated_ledgers(self) -> str:
        """Parent of the under-replication markers."""
        return f"{self.root}/underreplication/ledgers"

    def under_replicated_ledger(self, ledger_id: int) -> str:
        return f"{self.under_replicated_ledgers()}/{self.ledger(ledger_id).rsplit('/', 1)[1]}"

    def replication_locks(self) -> str:
        return f"{self.root}/underreplication/locks"

    def replication_lock(self, ledger_id: int) -> str:
        return f"{self.replication_locks()}/{self.ledger(ledger_id).rsplit('/', 1)[1]}"

    def auditor_election(self) -> str:
        return f"{self.root}/auditor/election"

    def last_audit(self) -> str:
        return f"{self.root}/auditor/last-audit"

    # -- tenants, namespaces, partitioned topics --------------------------------
    def tenants(self) -> str:
        return f"{self.root}/admin/tenants"

    def clusters(self) -> str:
        return f"{self.root}/admin/clusters"

    def cluster(self, cluster: str) -> str:
        return f"{self.clusters()}/{_check_name('cluster', cluster)}"

    def tenant(self, tenant: str) -> str:
        return f"{self.tenants()}/{_check_name('tenant', tenant)}"

    def namespace(self, tenant: str, namespace: str) -> str:
        return f"{self.tenant(tenant)}/{_check_name('namespace', namespace)}"

    def partitioned_topics(self, tenant: str, namespace: str, domain: str = "persistent") -> str:
        """The folder of a namespace's partitioned topics of ``domain``.

        Pulsar keys them ``…/<tenant>/<namespace>/<domain>/<topic>``; here the persistent
        ones were kept ``…/<tenant>/<namespace>/<topic>`` before non-persistent topics could
        be partitioned, and stay there (a running cluster's znodes are read as they are).
        A ``<domain>`` folder under the namespace would be a persistent topic's name (a
        topic may be called ``non-persistent``), so the non-persistent ones have a tree of
        their own.
        """
        if domain == "persistent":
            top = "partitioned-topics"
        elif domain == "non-persistent":
            top = "non-persistent-partitioned-topics"
        else:
            raise InvalidArgument(f"unknown topic domain {domain!r}; the domains are persistent and non-persistent")
        return f"{self.root}/admin/{top}/{_check_name('tenant', tenant)}/{_check_name('namespace', namespace)}"

    def partitioned_topic(self, tenant: str, namespace: str, topic: str, domain: str = "persistent") -> str:
        return f"{self.partitioned_topics(tenant, namespace, domain)}/{_check_name('topic', topic)}"

    # -- topic policies -----------------------------------------------------------
    def namespace_topic_policies(self, tenant: str, namespace: str) -> str:
        return f"{self.root}/topic-policies/{_check_name('tenant', tenant)}/{_check_name('namespace', namespace)}"

    def topic_policies(self, tenant: str, namespace: str, topic: str) -> str:
        return f"{self.root}/topic-policies/{_check_name('tenant', tenant)}/{_check_name('namespace', namespace)}/{_check_name('topic', topic)}"

    # -- schemas ------------------------------------------------------------------
    def schemas(self, tenant: str, namespace: str) -> str:
        return f"{self.root}/schemas/{_check_name('tenant', tenant)}/{_check_name('namespace', namespace)}"

    def schema(self, tenant: str, namespace: str, topic: str) -> str:
        return f"{self.schemas(tenant, namespace)}/{_check_name('topic', topic)}"

    # -- managed ledgers and cursors --------------------------------------------
    def managed_ledgers(self, tenant: str, namespace: str) -> str:
        return f"{self.root}/managed-ledgers/{_check_name('tenant', tenant)}/{_check_name('namespace', namespace)}/persistent"

    def managed_ledger(self, tenant: str, namespace: str, topic: str) -> str:
        return f"{self.managed_ledgers(tenant, namespace)}/{_check_name('topic', topic)}"

    def cursor(self, tenant: str, namespace: str, topic: str, cursor: str) -> str:
        return f"{self.managed_ledger(tenant, namespace, topic)}/{_check_name('cursor', cursor)}"

    # -- brokers and ownership --------------------------------------------------
    def brokers(self) -> str:
        return f"{self.root}/brokers"

    def broker(self, broker_id: str) -> str:
        return f"{self.brokers()}/{_check_name('broker id', broker_id)}"

    def bundle_owner(self, tenant: str, namespace: str, bundle: str) -> str:
        return f"{self.root}/ownership/{_check_name('tenant', tenant)}/{_check_name('namespace', namespace)}/{_check_name('bundle', bundle)}"

    # -- load manager (docs/load-balancing.md) ------------------------------------
    def load_reports(self) -> str:
        """Parent of the brokers' load reports (Pulsar's ``/loadbalance/brokers``)."""
        return f"{self.root}/loadbalance/brokers"

    def load_report(self, broker_id: str) -> str:
        return f"{self.load_reports()}/{_check_name('broker id', broker_id)}"

    def load_manager_election(self) -> str:
        return f"{self.root}/loadbalance/leader"

    def __repr__(self) -> str:
        return f"ZkPaths({self.root!r})"
