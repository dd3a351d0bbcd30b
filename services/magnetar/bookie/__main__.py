"""``python -m magnetar.bookie`` / ``magnetar bookie``: run one bookie."""

from __future__ import annotations

import argparse
import asyncio
import sys

from magnetar.bookie.config import BookieConfig
from magnetar.common.errors import MagnetarError
from magnetar.common.logging import configure


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="magnetar bookie", description="Run a bookie (storage node).")
    parser.add_argument("--config", help="TOML config file (see conf/bookie.toml)")
    parser.add_argument("--zookeeper", help="ZooKeeper connect string HOST:PORT")
    parser.add_argument("--zk-root", dest="zk_root", help="root znode (default /magnetar)")
    parser.add_argument("--host", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="gRPC port (default 3181)")
    parser.add_argument("--data-dir", dest="data_dir", help="data directory (default ./data/bookie)")
    parser.add_argument("--metrics-port", dest="metrics_port", type=int, help="Prometheus port (0: off)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = BookieConfig.load(
            args.config, zookeeper=args.zookeeper, zk_root=args.zk_root, host=args.host,
            port=args.port, data_dir=args.data_dir, metrics_port=args.metrics_port,
        )
    except MagnetarError as exc:
        print(f"magnetar bookie: {exc.message}", file=sys.stderr)
        return 2
    configure("bookie", config.log_level)
    from magnetar.bookie.server import BookieServer

    try:
        asyncio.run(BookieServer(config).run_until_signalled())
    except MagnetarError as exc:
        print(f"magnetar bookie: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
