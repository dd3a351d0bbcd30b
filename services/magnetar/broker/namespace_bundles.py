"""A namespace's bundles as a broker keeps them: the boundaries stored in the
namespace's policies document under ``bundles`` (Pulsar's BundlesData), read through a
watched cache (no ZooKeeper read per lookup), and the split of a bundle this broker owns
(docs/broker.md, "Namespace bundles")."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from magnetar.common.bundles import (
    NamespaceBundles,
    SplitAlgorithm,
    is_bundle_name,
    split_positions,
)
from magnetar.common.errors import InvalidArgument, NotOwner, PreconditionFailed
from magnetar.common.names import NamespaceName, TopicName
from magnetar.common.tasks import KeyedTasks
from magnetar.metadata.errors import CorruptMetadata

if TYPE_CHECKING:
    from magnetar.broker.config import BrokerConfig
    from magnetar.metadata.ownership import ZkOwnershipStore

log = logging.getLogger(__name__)

BUNDLES_KEY = "bundles"
"""The key of a namespace's policies document holding its bundles:
``{"boundaries": ["0x00000000", …, "0xffffffff"], "numBundles": N}``."""


class BundleDocuments(Protocol):
    """Where namespaces' policies are (``ZkTenantStore``)."""

    async def watch_policies(self, tenant: str, namespace: str, changed: Callable[[], None]) -> dict[str, Any]: ...

    async def update_policies(
        self, tenant: str, namespace: str, fn: Callable[[dict[str, Any]], Mapping[str, Any]]
    ) -> dict[str, Any]: ...


def stored_bundles(doc: Mapping[str, Any], default_count: int, where: str) -> NamespaceBundles:
    """The bundles a policies document holds (none stored: ``default_count`` equal ones).

    Raises: CorruptMetadata: the stored bundles are not valid.
    """
    try:
        return NamespaceBundles.from_document(doc.get(BUNDLES_KEY), default_count)
    except InvalidArgument as exc:
        raise CorruptMetadata(f"namespace {where} has invalid bundles data: {exc.message}") from exc


class NamespaceBundlesCache:
    """The bundles of the namespaces a broker has used, each kept until ZooKeeper says
    its policies changed (a data watch); then the next use reads them again.

    A read that a change overtakes is not kept: each namespace has a generation, bumped
    by every watch and every :meth:`put`, and a read stores its result only if the
    generation it started in is still current.
    """

    def __init__(self, documents: BundleDocuments, default_count: int) -> None:
        """Args: documents: the namespaces' policies; default_count: the bundles of a
        namespace that stores none (the brokers' bundles_per_namespace)."""
        self._documents = documents
        self.default_count = default_count
        self._cached: dict[str, NamespaceBundles] = {}
        self._generation: dict[str, int] = {}
        self._reads: KeyedTasks[str] = KeyedTasks("namespace-bundles", on_error=lambda _key, _exc: None)

    def cached(self, namespace: NamespaceName) -> NamespaceBundles | None:
        """The cached bundles of ``namespace`` (None: not read, or changed since)."""
        return self._cached.get(str(namespace))

    async def get(self, namespace: NamespaceName) -> NamespaceBundles:
        """The namespace's bundles (read from ZooKeeper only when not cached; callers
        at once share one read).

        Raises: NamespaceNotFound; CorruptMetadata.
        """
        key = str(namespace)
        hit = self._cached.get(key)
        if hit is not None:
            return hit
        task = self._reads.get(key)
        if task is None:
            task = self._reads.spawn(key, self._read(namespace), name=f"bundles:{key}")
        return await asyncio.shield(task)

    async def refresh(self, namespace: NamespaceName) -> NamespaceBundles:
        """The namespace's bundles read from ZooKeeper now (not from the cache)."""
        self._changed(str(namespace))
        await self._reads.wait([str(namespace)])  # a read begun before: its result is stale
        return await self.get(namespace)

    def put(self, namespace: NamespaceName, bundles: NamespaceBundles) -> None:
        """Keep ``bundles`` as written by this broker (its watch then reads them again)."""
        key = str(namespace)
        self._changed(key)
        self._cached[key] = bundles

    def clear(self) -> None:
        """Forget everything (the ZooKeeper session, and its watches, are gone)."""
        for key in list(self._cached):
            self._changed(key)

    async def close(self) -> None:
        await self._reads.close()

    def _changed(self, key: str) -> None:
        self._generation[key] = self._generation.get(key, 0) + 1
        self._cached.pop(key, None)

    async def _read(self, namespace: NamespaceName) -> NamespaceBundles:
        key = str(namespace)
        generation = self._generation.get(key, 0)
        doc = await self._documents.watch_policies(namespace.tenant, namespace.namespace, lambda: self._changed(key))
        bundles = stored_bundles(doc, self.default_count, key)
        if self._generation.get(key, 0) == generation:
            self._cached[key] = bundles
        return bundles


class SplittingBroker(Protocol):
    """What a split uses of the broker (``BrokerService``; named here, not imported:
    the service imports this module)."""

    broker_id: str
    config: BrokerConfig
    bundles: NamespaceBundlesCache
    ownership: ZkOwnershipStore

    @property
    def tenants(self) -> BundleDocuments: ...

    @property
    def nonpersistent(self) -> Mapping[str, Any]: ...

    _owned: set[tuple[str, str, str]]
    """The bundles it owns: a split replaces the old one by the new ones."""

    def check_serving(self, what: str) -> None: ...

    async def _lookup_bundle(self, key: tuple[str, str, str], topic: str, authoritative: bool) -> str: ...

    async def list_topic_partitions(self, namespace: str) -> list[str]: ...

    async def unload_bundle(self, namespace: str, bundle: str) -> None: ...


class BundleSplitter:
    """Splits the bundles one broker owns (Pulsar's ``splitAndOwnBundle``), one split
    at a time."""

    def __init__(self, service: SplittingBroker) -> None:
        self.service = service
        self._lock = asyncio.Lock()

    async def split(
        self, namespace: str, bundle: str, algorithm: str | SplitAlgorithm = SplitAlgorithm.RANGE_EQUALLY_DIVIDE,
        unload: bool = False, boundaries: Sequence[object] = (),
    ) -> list[str]:
        """Split ``bundle`` of ``namespace``; returns the new bundles it became.

        Both halves are owned here before the new boundaries are written (a broker that
        reads them finds this broker the owner), then the old bundle is released; its
        topics stay served and their clients undisturbed. With ``unload`` the halves are
        then unloaded (their topics closed, the next lookups place them).

        An unowned bundle is taken by this broker first.

        Raises:
            NotOwner: another broker owns the bundle (split it there).
            PreconditionFailed: no such bundle (or split since); nothing to split (a
                range of one hash, fewer than two topics to divide); more bundles than
                load_balancer_namespace_maximum_bundles.
            InvalidArgument: an unknown algorithm; bad boundaries.
            NamespaceNotFound.
        """
        service = self.service
        ns = NamespaceName.parse(namespace)
        chosen = SplitAlgorithm.parse(str(algorithm))
        service.check_serving(f"split of {ns}/{bundle}")
        # Refusals that need no lock first (a refused request waits behind no split).
        first = await service.bundles.get(ns)  # NamespaceNotFound
        if not is_bundle_name(bundle):
            first.range_of(bundle)  # PreconditionFailed: no bundle is spelled so
        async with self._lock:
            bundles = await service.bundles.get(ns)
            if bundle not in bundles.ranges:
                bundles = await service.bundles.refresh(ns)
            bundles.range_of(bundle)  # PreconditionFailed
            key = (ns.tenant, ns.namespace, bundle)
            # An unowned bundle is taken here first, as a lookup would (Pulsar's broker
            # asked to split one does the same).
            if key not in service._owned and await service._lookup_bundle(key, "", True) != service.broker_id:
                owner = await service.ownership.owner(*key)
                raise NotOwner(f"bundle {ns}/{bundle} is owned by {owner or 'no broker'}, not {service.broker_id}; "
                               "split it on its owner")
            topics = await self._topics_of(ns, bundles, bundle) if chosen is SplitAlgorithm.TOPIC_COUNT_EQUALLY_DIVIDE else []
            positions = split_positions(bundles, bundle, chosen, topics, boundaries)
            limit = service.config.load_balancer_namespace_maximum_bundles
            split = bundles.split(bundle, positions)
            if split.count > limit:
                raise PreconditionFailed(
                    f"splitting {ns}/{bundle} would make {split.count} bundles, more than "
                    f"loadBalancerNamespaceMaximumBundles ({limit})")
            halves = [b for b in split.ranges if b not in bundles.ranges]
            written = await self._own_and_write(ns, bundle, halves, positions, limit)
            service.bundles.put(ns, written)
            service._owned.discard(key)
            service._owned.update((ns.tenant, ns.namespace, h) for h in halves)
            await service.ownership.release(*key)
        log.info("bundle %s/%s split (%s) into %s", ns, bundle, chosen, ", ".join(halves))
        if unload:
            for half in halves:
                await service.unload_bundle(str(ns), half)
        return halves

    async def _own_and_write(
        self, ns: NamespaceName, bundle: str, halves: list[str], positions: list[int], limit: int,
    ) -> NamespaceBundles:
        """Own ``halves``, then write the split (compare-and-set on the namespace's
        policies); on failure the halves are released and nothing is written."""
        service = self.service
        default = service.bundles.default_count
        acquired: list[str] = []
        result: list[NamespaceBundles] = []

        def split(doc: dict[str, Any]) -> dict[str, Any]:
            current = stored_bundles(doc, default, str(ns))
            updated = current.split(bundle, positions)  # PreconditionFailed: split meanwhile
            if updated.count > limit:
                raise PreconditionFailed(
                    f"splitting {ns}/{bundle} would make {updated.count} bundles, more than "
                    f"loadBalancerNamespaceMaximumBundles ({limit})")
            result[:] = [updated]
            doc[BUNDLES_KEY] = updated.to_document()
            return doc

        try:
            for half in halves:
                owner = await service.ownership.try_acquire(ns.tenant, ns.namespace, half, service.broker_id)
                if owner != service.broker_id:
                    raise PreconditionFailed(f"bundle {ns}/{half} is owned by {owner} already; split not done")
                acquired.append(half)
            await service.tenants.update_policies(ns.tenant, ns.namespace, split)
        except BaseException:
            for half in acquired:
                await service.ownership.release(ns.tenant, ns.namespace, half)
            raise
        return result[0]

    async def _topics_of(self, ns: NamespaceName, bundles: NamespaceBundles, bundle: str) -> list[str]:
        """The topics of ``bundle`` this broker knows: the persistent ones in ZooKeeper
        (each partition), the non-persistent ones it serves."""
        names = set(await self.service.list_topic_partitions(str(ns)))
        names.update(t for t in self.service.nonpersistent if TopicName.parse(t).namespace == ns)
        return sorted(t for t in names if bundles.bundle_of(t) == bundle)
