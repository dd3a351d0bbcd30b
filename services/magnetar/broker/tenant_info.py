"""Pulsar's TenantInfo: the roles that administer a tenant and the clusters its
namespaces may use, checked against this cluster before it is stored."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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

    def checked(self, cluster: str) -> TenantInfo:
        """This info, if every allowed cluster is ``cluster`` (the only one there is).

        Raises:
            PreconditionFailed: no allowed cluster, a blank one, or an unknown one
                (Pulsar's 412 ``Clusters can not be empty`` / ``Clusters do not exist``).
        """
        if not self.allowed_clusters or any(not c.strip() for c in self.allowed_clusters):
            raise PreconditionFailed("Clusters can not be empty")
        unknown = [c for c in self.allowed_clusters if c != cluster]
        if unknown:
            raise PreconditionFailed(f"Clusters do not exist: {', '.join(unknown)} (this cluster is {cluster})")
        return self
