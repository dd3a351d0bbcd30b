"""Tenants, namespaces (with their policies) and partitioned topics in ZooKeeper.

A tenant is a znode holding its info; its namespaces are its children, each holding the
namespace's policies; a partitioned topic is a znode ``{"partitions": N}`` under the
namespace's partitioned-topics folder of its domain (layout in :mod:`magnetar.metadata.paths`).

Races with concurrent admins are settled by ZooKeeper itself: a namespace is created
under its tenant's znode (no tenant, no namespace); a partitioned topic is created in one
multi-operation with a check that its namespace still exists, and a namespace is deleted
together with its (empty) partitioned-topics folder, so neither can orphan the other.
Deleting a non-empty tenant or namespace is refused.

A namespace's retention is one key of its policies document:
``{"retention": {"retention_time_minutes": int, "retention_size_mb": int}}`` (-1:
unlimited; a namespace without the key uses the broker's defaults). Its bundles are
another: ``{"bundles": {"boundaries": ["0x00000000", …, "0xffffffff"], "numBundles": N}}``
(Pulsar's BundlesData; broker/namespace_bundles.py), which brokers read with
:meth:`ZkTenantStore.watch_policies`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from magnetar.common.errors import (
    AlreadyExists,
    InvalidArgument,
    InvalidTopicName,
    MetadataError,
    NamespaceNotFound,
    NotEmpty,
    NotFound,
    TenantNotFound,
    TopicNotFound,
)
from magnetar.common.names import (
    DEFAULT_NAMESPACE,
    NON_PERSISTENT,
    PERSISTENT,
    PUBLIC_TENANT,
    NamespaceName,
    TopicName,
    validate_tenant,
)
from magnetar.common.retry import RetryPolicy
from magnetar.metadata.codec import decode, encode
from magnetar.metadata.errors import CorruptMetadata, NodeExists
from magnetar.metadata.nodes import Op
from magnetar.metadata.session import ZkSession
from magnetar.metadata.versioned import read_modify_write

Document = dict[str, Any]

DEFAULT_MAX_PARTITIONS = 10_000
_CREATE_RETRY = RetryPolicy(max_tries=5, delay_s=0.0)
RETENTION_KEY = "retention"


class NamespaceRetention(NamedTuple):
    """A namespace's retention as stored (-1: unlimited; 0: nothing kept once consumed)."""

    retention_time_minutes: int
    retention_size_mb: int


def validate_retention(retention_time_minutes: int, retention_size_mb: int) -> NamespaceRetention:
    """The retention if both values are integers >= -1 (checked at run time: they may
    come from JSON).

    Raises:
        InvalidArgument: naming the bad value.
    """
    for field, value in (("retention_time_minutes", retention_time_minutes), ("retention_size_mb", retention_size_mb)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgument(f"{field} must be an integer, not {value!r}")
        if value < -1:
            raise InvalidArgument(f"{field} must be -1 (unlimited) or more, got {value}")
    return NamespaceRetention(retention_time_minutes, retention_size_mb)


class ZkTenantStore:
    """Typed admin metadata: tenants, namespaces and partitioned topics."""

    def __init__(self, session: ZkSession, *, max_partitions: int = DEFAULT_MAX_PARTITIONS) -> None:
        """Args:
        session: a started ZooKeeper session.
        max_partitions: the most partitions a partitioned topic may have.
        """
        self._session = session
        self._paths = session.paths
        self._max_partitions = max_partitions

    @property
    def max_partitions(self) -> int:
        """The most partitions a partitioned topic may have."""
        return self._max_partitions

    # -- tenants ----------------------------------------------------------------
    async def create_tenant(self, name: str, info: Mapping[str, Any] | None = None) -> None:
        """Create tenant ``name`` holding ``info`` (admin roles, allowed clusters …).

        Raises:
            InvalidArgument: bad name, or ``info`` is not a JSON object.
            AlreadyExists: the tenant exists.
        """
        path = self._paths.tenant(validate_tenant(name))
        data = encode(info or {})
        try:
            await self._session.create(path, data, makepath=True)
        except NodeExists as exc:
            raise AlreadyExists(f"tenant {name} already exists") from exc

    async def get_tenant(self, name: str) -> Document:
        """The tenant's info. Raises: TenantNotFound."""
        path = self._paths.tenant(validate_tenant(name))
        try:
            data, _ = await self._session.get(path)
        except NotFound as exc:
            raise TenantNotFound(f"tenant {name} does not exist") from exc
        return decode(data, path)

    async def update_tenant(
        self, name: str, fn: Callable[[Document], Mapping[str, Any]]
    ) -> Document:
        """Replace the tenant's info by ``fn(info)`` (compare-and-set; ``fn`` may run again).

        Raises:
            TenantNotFound: no such tenant.
        """
        path = self._paths.tenant(validate_tenant(name))
        return await _update(
            self._session, path, fn, lambda: TenantNotFound(f"tenant {name} does not exist")
        )

    async def list_tenants(self) -> list[str]:
        """Names of all tenants, sorted."""
        try:
            return sorted(await self._session.children(self._paths.tenants()))
        except NotFound:
            return []

    async def delete_tenant(self, name: str) -> None:
        """Delete an empty tenant.

        Raises:
            TenantNotFound: no such tenant.
            InvalidArgument: it still has namespaces.
        """
        path = self._paths.tenant(validate_tenant(name))
        await self._refuse_if_has_namespaces(name)
        try:
            await self._session.delete(path)
        except NotFound as exc:
            raise TenantNotFound(f"tenant {name} does not exist") from exc
        except MetadataError:
            # Most likely a namespace was created since the check: report that.
            await self._refuse_if_has_namespaces(name)
            raise
        # The tenant's folders are empty now (its namespaces took theirs).
        for folder in (
            posixpath.dirname(self._paths.partitioned_topics(name, DEFAULT_NAMESPACE)),
            posixpath.dirname(self._paths.partitioned_topics(name, DEFAULT_NAMESPACE, NON_PERSISTENT)),
            posixpath.dirname(posixpath.dirname(self._paths.managed_ledgers(name, DEFAULT_NAMESPACE))),
            posixpath.dirname(self._paths.schemas(name, DEFAULT_NAMESPACE)),
        ):
            try:
                await self._session.delete(folder)
            except (NotFound, MetadataError):
                pass

    async def _refuse_if_has_namespaces(self, tenant: str) -> None:
        namespaces = await self.list_namespaces(tenant)
        if namespaces:
            # Pulsar's reason first: its admin clients show it as is.
            raise NotEmpty(
                f"The tenant still has active namespaces: tenant {tenant} has {_count(namespaces, 'namespace')} "
                f"({', '.join(namespaces)}); delete them first"
            )

    # -- namespaces -------------------------------------------------------------
    async def create_namespace(
        self, tenant: str, namespace: str, policies: Mapping[str, Any] | None = None
    ) -> None:
        """Create ``tenant/namespace`` with ``policies``.

        Raises:
            InvalidArgument: bad name, or ``policies`` is not a JSON object.
            TenantNotFound: no such tenant.
            AlreadyExists: the namespace exists.
        """
        ns = NamespaceName(tenant, namespace)
        data = encode(policies or {})
        try:
            await self._session.create(
                self._paths.namespace(tenant, namespace), data, makepath=False
            )
        except NodeExists as exc:
            raise AlreadyExists(f"namespace {ns} already exists") from exc
        except NotFound as exc:
            raise TenantNotFound(
                f"tenant {tenant} does not exist (creating namespace {ns})"
            ) from exc

    async def get_policies(self, tenant: str, namespace: str) -> Document:
        """The namespace's policies. Raises: NamespaceNotFound."""
        ns = NamespaceName(tenant, namespace)
        path = self._paths.namespace(tenant, namespace)
        try:
            data, _ = await self._session.get(path)
        except NotFound as exc:
            raise NamespaceNotFound(f"namespace {ns} does not exist") from exc
        return decode(data, path)

    async def watch_policies(self, tenant: str, namespace: str, changed: Callable[[], None]) -> Document:
        """The namespace's policies; ``changed()`` runs once (on the event loop) when they
        next change or the namespace is deleted.

        Raises: NamespaceNotFound (nothing is watched then).
        """
        ns = NamespaceName(tenant, namespace)
        path = self._paths.namespace(tenant, namespace)
        try:
            data, _ = await self._session.get_watched(path, changed)
        except NotFound as exc:
            raise NamespaceNotFound(f"namespace {ns} does not exist") from exc
        return decode(data, path)

    async def update_policies(
        self, tenant: str, namespace: str, fn: Callable[[Document], Mapping[str, Any]]
    ) -> Document:
        """Replace the policies by ``fn(policies)`` with compare-and-set, retried on conflict.

        ``fn`` gets a private copy and may run more than once; an exception from it aborts
        with nothing written.

        Returns:
            The policies as written.

        Raises:
            NamespaceNotFound: no such namespace.
        """
        ns = NamespaceName(tenant, namespace)
        path = self._paths.namespace(tenant, namespace)
        return await _update(
            self._session, path, fn, lambda: NamespaceNotFound(f"namespace {ns} does not exist")
        )

    async def set_retention(self, tenant: str, namespace: str, retention: NamespaceRetention) -> None:
        """Store the namespace's retention in its policies.

        Raises:
            InvalidArgument: a value is not an integer >= -1 (nothing is written).
            NamespaceNotFound: no such namespace.
        """
        checked = validate_retention(*retention)

        def put(policies: Document) -> Document:
            policies[RETENTION_KEY] = checked._asdict()
            return policies

        await self.update_policies(tenant, namespace, put)

    async def get_retention(self, tenant: str, namespace: str) -> NamespaceRetention | None:
        """The namespace's retention; None when it sets none.

        Raises:
            NamespaceNotFound: no such namespace.
            CorruptMetadata: the stored retention is not valid.
        """
        stored = (await self.get_policies(tenant, namespace)).get(RETENTION_KEY)
        if stored is None:
            return None
        try:
            return validate_retention(stored["retention_time_minutes"], stored["retention_size_mb"])
        except (TypeError, KeyError, InvalidArgument) as exc:
            raise CorruptMetadata(f"namespace {tenant}/{namespace} has an invalid retention policy: {stored!r}") from exc

    async def list_namespaces(self, tenant: str) -> list[str]:
        """The tenant's namespaces as ``"tenant/namespace"``, sorted. Raises: TenantNotFound."""
        try:
            names = await self._session.children(self._paths.tenant(validate_tenant(tenant)))
        except NotFound as exc:
            raise TenantNotFound(f"tenant {tenant} does not exist") from exc
        return sorted(f"{tenant}/{ns}" for ns in names)

    async def delete_namespace(self, tenant: str, namespace: str) -> None:
        """Delete a namespace that has no topics, and every znode of it: its policies, its
        partitioned topics' and managed ledgers' folders, and its schemas (a schema goes
        with its topic, as in Pulsar; one still here has no topic left).

        Raises:
            NamespaceNotFound: no such namespace.
            InvalidArgument: it still has partitioned or non-partitioned topics.
        """
        ns = NamespaceName(tenant, namespace)
        path = self._paths.namespace(tenant, namespace)
        if await self._session.exists(path) is None:
            raise NamespaceNotFound(f"namespace {ns} does not exist")
        await self._refuse_if_has_topics(ns)
        folder = self._paths.partitioned_topics(tenant, namespace)
        np_folder = self._paths.partitioned_topics(tenant, namespace, NON_PERSISTENT)
        ledgers = self._paths.managed_ledgers(tenant, namespace)
        schemas = self._paths.schemas(tenant, namespace)
        for made in (folder, np_folder, ledgers, schemas):
            await self._session.ensure_path(made)
        left = [Op.delete(f"{schemas}/{topic}") for topic in await self._children(schemas)]
        try:
            # Together, so that a topic created meanwhile (a partitioned topic, a managed
            # ledger or a schema) makes every delete fail.
            await self._session.multi([
                *left, Op.delete(schemas), Op.delete(ledgers), Op.delete(posixpath.dirname(ledgers)),
                Op.delete(folder), Op.delete(np_folder), Op.delete(path),
            ])  # fmt: skip
        except NotFound as exc:
            raise NamespaceNotFound(f"namespace {ns} does not exist") from exc
        except MetadataError:
            await self._refuse_if_has_topics(ns)
            raise

    async def _refuse_if_has_topics(self, ns: NamespaceName) -> None:
        topics = await self._children(self._paths.partitioned_topics(ns.tenant, ns.namespace))
        topics += await self._children(self._paths.partitioned_topics(ns.tenant, ns.namespace, NON_PERSISTENT))
        # Non-partitioned topics and partitions are known by their managed ledgers; a
        # namespace deleted under them would orphan their ledgers.
        topics += await self._children(self._paths.managed_ledgers(ns.tenant, ns.namespace))
        if topics:
            names = sorted(set(topics))
            shown = ", ".join(names[:10]) + (", …" if len(names) > 10 else "")
            # Pulsar's reason first: its admin clients show it as is.
            raise NotEmpty(
                f"Cannot delete non empty namespace: namespace {ns} has {_count(names, 'topic')} ({shown}); "
                "delete them first"
            )

    # -- partitioned topics -----------------------------------------------------
    # Each method takes the topic's ``domain``: a persistent and a non-persistent topic of
    # one name are two topics, each partitioned or not (paths: metadata/paths.py).
    def _topic(self, tenant: str, namespace: str, topic: str, domain: str = PERSISTENT) -> TopicName:
        return TopicName(domain=domain, tenant=tenant, namespace=namespace, local_name=topic)

    async def create_partitioned_topic(
        self, tenant: str, namespace: str, topic: str, partitions: int, *, domain: str = PERSISTENT
    ) -> None:
        """Make ``topic`` (of ``domain``) a partitioned topic with ``partitions`` partitions.

        Raises:
            InvalidTopicName: bad name, or it names a partition (``…-partition-N``).
            InvalidArgument: ``partitions`` is not in [1, max_partitions].
            TenantNotFound, NamespaceNotFound: the namespace does not exist.
            AlreadyExists: the partitioned topic, or a non-partitioned topic of that
                name, exists.
        """
        name = self._topic(tenant, namespace, topic, domain)
        if name.is_partition:
            raise InvalidTopicName(
                f"{name} names partition {name.partition_index} of {name.partitioned_topic_name}; "
                "a partitioned topic's name must not end in -partition-<number>"
            )
        if (
            isinstance(partitions, bool)
            or not isinstance(partitions, int)
            or not (1 <= partitions <= self._max_partitions)
        ):
            raise InvalidArgument(
                f"a partitioned topic needs 1 to {self._max_partitions} partitions, got {partitions!r}"
            )
        ns_path = self._paths.namespace(tenant, namespace)
        folder = self._paths.partitioned_topics(tenant, namespace, domain)
        path = self._paths.partitioned_topic(tenant, namespace, topic, domain)
        async for _ in _CREATE_RETRY.attempts():
            await self._require_namespace(tenant, namespace)
            # A non-persistent topic has no managed ledger: whether one of that name is
            # loaded now is its broker's to say.
            if name.is_persistent and await self._session.exists(self._paths.managed_ledger(tenant, namespace, topic)):
                raise AlreadyExists(f"{name} already exists as a non-partitioned topic")
            await self._session.ensure_path(folder)
            try:
                await self._session.multi(
                    [Op.check(ns_path, -1), Op.create(path, encode({"partitions": partitions}))]
                )
                return
            except NodeExists as exc:
                raise AlreadyExists(f"partitioned topic {name} already exists") from exc
            except NotFound:
                continue  # the namespace or the folder went meanwhile: look again
        await self._require_namespace(tenant, namespace)
        raise MetadataError(f"creating partitioned topic {name} kept racing with namespace changes")

    async def get_partitions(self, tenant: str, namespace: str, topic: str, *, domain: str = PERSISTENT) -> int:
        """The partition count of a partitioned topic; 0 when ``topic`` is not one."""
        self._topic(tenant, namespace, topic, domain)
        path = self._paths.partitioned_topic(tenant, namespace, topic, domain)
        try:
            data, _ = await self._session.get(path)
        except NotFound:
            return 0
        partitions = decode(data, path).get("partitions")
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise CorruptMetadata(f"znode {path} has no valid partition count: {partitions!r}")
        return partitions

    async def update_partitions(
        self, tenant: str, namespace: str, topic: str, partitions: int, *, domain: str = PERSISTENT
    ) -> int:
        """Grow a partitioned topic to ``partitions`` partitions (compare-and-set; the
        same count changes nothing); returns the count it had.

        Raises:
            TopicNotFound: ``topic`` is not a partitioned topic.
            InvalidArgument: fewer partitions than it has, or more than max_partitions.
        """
        name = self._topic(tenant, namespace, topic, domain)
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions > self._max_partitions:
            raise InvalidArgument(
                f"a partitioned topic has at most {self._max_partitions} partitions, got {partitions!r}"
            )
        path = self._paths.partitioned_topic(tenant, namespace, topic, domain)
        old: list[int] = []

        def grow(doc: Document | None) -> Document:
            if doc is None:
                raise TopicNotFound(f"{name} is not a partitioned topic")
            current = doc.get("partitions")
            if isinstance(current, bool) or not isinstance(current, int) or current < 1:
                raise CorruptMetadata(f"znode {path} has no valid partition count: {current!r}")
            if partitions < current:
                raise InvalidArgument(
                    f"{name} has {current} partitions; the count can only grow, not go down to {partitions}"
                )
            old[:] = [current]
            return doc | {"partitions": partitions}

        await read_modify_write(self._session, path, grow)
        return old[0]

    async def delete_partitioned_topic(
        self, tenant: str, namespace: str, topic: str, *, domain: str = PERSISTENT
    ) -> None:
        """Forget the partitioned topic (its partitions' data is the broker's to delete).

        Raises:
            TopicNotFound: it is not a partitioned topic.
        """
        name = self._topic(tenant, namespace, topic, domain)
        try:
            await self._session.delete(self._paths.partitioned_topic(tenant, namespace, topic, domain))
        except NotFound as exc:
            raise TopicNotFound(f"partitioned topic {name} does not exist") from exc

    async def list_partitioned_topics(self, tenant: str, namespace: str, *, domain: str = PERSISTENT) -> list[str]:
        """Full names (``persistent://…``, or ``non-persistent://…`` of that ``domain``)
        of the namespace's partitioned topics, sorted.

        Raises:
            TenantNotFound, NamespaceNotFound: the namespace does not exist.
        """
        NamespaceName(tenant, namespace)
        await self._require_namespace(tenant, namespace)
        names = await self._children(self._paths.partitioned_topics(tenant, namespace, domain))
        return [str(t) for t in sorted(self._topic(tenant, namespace, n, domain) for n in names)]

    # -- defaults and helpers ---------------------------------------------------
    async def ensure_defaults(self, clusters: tuple[str, ...] = ()) -> None:
        """Create tenant ``public`` (allowed on ``clusters``) and namespace
        ``public/default`` where missing.

        Safe to run from many brokers at once.
        """
        try:
            await self.create_tenant(PUBLIC_TENANT, {"admin_roles": [], "allowed_clusters": list(clusters)})
        except AlreadyExists:
            pass
        try:
            await self.create_namespace(PUBLIC_TENANT, DEFAULT_NAMESPACE, {})
        except AlreadyExists:
            pass

    async def _require_namespace(self, tenant: str, namespace: str) -> None:
        if await self._session.exists(self._paths.namespace(tenant, namespace)) is not None:
            return
        if await self._session.exists(self._paths.tenant(tenant)) is None:
            raise TenantNotFound(f"tenant {tenant} does not exist")
        raise NamespaceNotFound(f"namespace {tenant}/{namespace} does not exist")

    async def _children(self, path: str) -> list[str]:
        try:
            return await self._session.children(path)
        except NotFound:
            return []


def _count(items: list[str], noun: str) -> str:
    return f"{len(items)} {noun}" + ("" if len(items) == 1 else "s")


async def _update(
    session: ZkSession,
    path: str,
    fn: Callable[[Document], Mapping[str, Any]],
    missing: Callable[[], Exception],
) -> Document:
    """Compare-and-set ``fn`` over an existing document; raise ``missing()`` if there is none."""

    def apply(doc: Document | None) -> Document:
        if doc is None:
            raise missing()
        updated = fn(doc)
        if not isinstance(updated, Mapping):
            raise InvalidArgument(f"the update must return a mapping, not {type(updated).__name__}")
        return dict(updated)

    doc, _ = await read_modify_write(session, path, apply)
    return doc
