"""``python -m magnetar.broker`` / ``magnetar broker``: run one broker."""

from __future__ import annotations

import argparse
import asyncio
import sys

from magnetar.broker.config import BrokerConfig
from magnetar.common.errors import MagnetarError
from magnetar.common.logging import configure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="magnetar broker", description="Run a broker.")
    parser.add_argument("--config", help="TOML config file (see conf/broker.toml)")
    parser.add_argument("--zookeeper", help="ZooKeeper connect string HOST:PORT")
    parser.add_argument("--zk-root", dest="zk_root", help="root znode (default /magnetar)")
    parser.add_argument("--host", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="gRPC port (default 6650)")
    parser.add_argument("--metrics-port", dest="metrics_port", type=int, help="Prometheus port (0: off)")
    args = parser.parse_args(argv)
    try:
        config = BrokerConfig.load(
            args.config, zookeeper=args.zookeeper, zk_root=args.zk_root, host=args.host, port=args.port,
            metrics_port=args.metrics_port,
        )
    except MagnetarError as exc:
        print(f"magnetar broker: {exc.message}", file=sys.stderr)
        return 2
    configure("broker", config.log_level)
    from magnetar.broker.server import BrokerServer

    try:
        asyncio.run(BrokerServer(config).run_until_signalled())
    except MagnetarError as exc:
        print(f"magnetar broker: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
