"""Request and response bodies, with Pulsar's JSON field names (admin v2)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class PulsarModel(BaseModel):
    """Unknown fields are ignored, as Pulsar's Jackson mapping does."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class TenantInfo(PulsarModel):
    adminRoles: list[str] = Field(default_factory=list, description="roles that administer the tenant")
    allowedClusters: list[str] = Field(default_factory=list, description="clusters its namespaces may use")


class ClusterData(PulsarModel):
    serviceUrl: str = Field(description="the gateway's HTTP URL")
    brokerServiceUrl: str = Field(description="the brokers' service URL (magnetar://…)")
    brokerServiceUrlTls: str = ""
    serviceUrlTls: str = ""


class LookupData(PulsarModel):
    brokerUrl: str
    brokerUrlTls: str = ""
    httpUrl: str = ""
    httpUrlTls: str = ""
    nativeUrl: str = ""
    brokerUrlSsl: str = ""


class Health(PulsarModel):
    status: str
    zookeeper: bool = False
    brokers: int = 0
    reason: str = ""
