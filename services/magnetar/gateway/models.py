"""Request and response bodies, with Pulsar's JSON field names (admin v2)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from magnetar.proto.v1 import broker_pb2 as pb


class PulsarModel(BaseModel):
    """Unknown fields are ignored, as Pulsar's Jackson mapping does."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class TenantInfo(PulsarModel):
    adminRoles: list[str] = Field(default_factory=list, description="roles that administer the tenant")
    allowedClusters: list[str] = Field(default_factory=list, description="clusters its namespaces may use")


class ClusterData(PulsarModel):
    """Pulsar's ClusterData: the four service URLs ("" unset; Pulsar's other fields are
    accepted and ignored). Of the brokers' own cluster, an unset URL is answered with the
    live one (the gateway's, the brokers')."""

    serviceUrl: str = Field(default="", max_length=4096, description="http://host:port")
    serviceUrlTls: str = Field(default="", max_length=4096, description="https://host:port")
    brokerServiceUrl: str = Field(default="", max_length=4096, description="pulsar://host:port or magnetar://…")
    brokerServiceUrlTls: str = Field(default="", max_length=4096, description="pulsar+ssl://host:port")

    def to_proto(self) -> pb.ClusterData:
        return pb.ClusterData(
            service_url=self.serviceUrl, service_url_tls=self.serviceUrlTls,
            broker_service_url=self.brokerServiceUrl, broker_service_url_tls=self.brokerServiceUrlTls,
        )


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
