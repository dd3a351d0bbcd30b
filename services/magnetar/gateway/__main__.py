"""``python -m magnetar.gateway`` / ``magnetar gateway``: serve the REST and WebSocket APIs."""

from __future__ import annotations

import sys

from magnetar.common.service_main import Server, run_service, service_parser
from magnetar.gateway.config import DEFAULT_PORT, GatewayConfig


def main(argv: list[str] | None = None) -> int:
    parser = service_parser("gateway", "Serve Pulsar's admin REST API and WebSocket API over HTTP.", DEFAULT_PORT)
    parser.add_argument("--cluster-name", dest="cluster_name", help="the cluster's name (default standalone)")
    parser.add_argument("--broker-url", dest="broker_service_url",
                        help="brokers to ask (default: those registered in ZooKeeper)")

    def make_server(config: GatewayConfig) -> Server:
        from magnetar.gateway.server import GatewayServer

        return GatewayServer(config)

    return run_service("gateway", parser, GatewayConfig, make_server, argv)


if __name__ == "__main__":
    sys.exit(main())
