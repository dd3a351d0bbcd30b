"""Pulsar's TenantInfo: the roles that administer a tenant and the clusters its
namespaces may use, checked against the clusters there are before it is stored."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from magnetar.common.errors import PreconditionFailed


@dataclass(frozen=True)
class TenantInfo:
    admin_roles: tuple[str, ...] = ()
    allowed_clusters: tuple[str, ...] = ()

    @classmethod
    def of(cls, admin_roles: Iterable[str], allowed_clusters: Iterable[str]) -> TenantInfo:
        return cls(tuple(sorted(set(admin_roles))), tuple(sorted(set(allowed_clusters))))

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> TenantInfo:
        return cls.of(doc.get("admin_roles") or (), doc.get("allowed_clusters") or ())

    def to_doc(self) -> dict[str, list[str]]:
        return {"admin_roles": list(self.admin_roles), "allowed_clusters": list(self.allowed_clusters)}

    def checked(self, clusters: str | Collection[str]) -> TenantInfo:
        """This info, if every allowed cluster is one of ``clusters`` (the brokers' own
        and the registered ones).

        Raises:
            PreconditionFailed: no allowed cluster, a blank one, or an unknown one
                (Pulsar's 412 ``Clusters can not be empty`` / ``Clusters do not exist``).
        """
        if not self.allowed_clusters or any(not c.strip() for c in self.allowed_clusters):
            raise PreconditionFailed("Clusters can not be empty")
        known = (clusters,) if isinstance(clusters, str) else tuple(clusters)
        unknown = [c for c in self.allowed_clusters if c not in known]
        if unknown:
            raise PreconditionFailed(f"Clusters do not exist: {', '.join(unknown)} (the clusters are {', '.join(known)})")
        return self
