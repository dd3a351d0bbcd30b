"""The gateway's configuration (env prefix ``MAGNETAR_GATEWAY_``; sample: conf/gateway.toml)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from magnetar.common.config import (
    AuthenticationSettings,
    ClientTlsConfig,
    ServiceConfig,
    ServiceTokenSettings,
)

DEFAULT_PORT = 8080


class GatewayConfig(ServiceConfig, ClientTlsConfig, AuthenticationSettings, ServiceTokenSettings):
    model_config = SettingsConfigDict(env_prefix="MAGNETAR_GATEWAY_", extra="forbid")
    client_certificates_optional: ClassVar[bool] = True  # uvicorn asks for one without requiring it

    cluster_name: str = "standalone"
    """The name ``/admin/v2/clusters`` reports (one cluster per ZooKeeper root)."""
    broker_service_url: str = ""
    """Brokers to send admin calls to (``magnetar://h1:6660,h2:6660``); empty: the brokers
    registered in ZooKeeper, refreshed every ``broker_refresh_interval_s``."""
    broker_refresh_interval_s: float = Field(default=5.0, gt=0)
    """How often the registered brokers are read again from ZooKeeper."""
    operation_timeout_s: float = Field(default=30.0, gt=0)
    """Longest wait for one broker call."""
    console_rates_interval_s: float = Field(default=10.0, gt=0)
    """How often the brokers' live load is sampled for the cluster's rates over the last
    15 minutes (``/admin/v2/broker-stats/rates-history``, the console's overview)."""
    websocket_max_receiver_queue: int = Field(default=1000, ge=1)
    """Most messages a WebSocket consumer buffers (Pulsar caps ``receiverQueueSize`` at 1000)."""
