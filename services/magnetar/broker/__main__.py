"""``python -m magnetar.broker`` / ``magnetar broker``: run one broker."""

from __future__ import annotations

import sys

from magnetar.broker.config import DEFAULT_PORT, BrokerConfig
from magnetar.common.service_main import Server, run_service, service_parser


def main(argv: list[str] | None = None) -> int:
    parser = service_parser("broker", "Run a broker.", DEFAULT_PORT)

    def make_server(config: BrokerConfig) -> Server:
        from magnetar.broker.process import BrokerServer

        return BrokerServer(config)

    return run_service("broker", parser, BrokerConfig, make_server, argv)


if __name__ == "__main__":
    sys.exit(main())
