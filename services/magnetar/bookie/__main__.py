"""``python -m magnetar.bookie`` / ``magnetar bookie``: run one bookie."""

from __future__ import annotations

import sys

from magnetar.bookie.config import DEFAULT_PORT, BookieConfig
from magnetar.common.service_main import Server, run_service, service_parser


def main(argv: list[str] | None = None) -> int:
    parser = service_parser("bookie", "Run a bookie (storage node).", DEFAULT_PORT)
    parser.add_argument("--data-dir", dest="data_dir", help="data directory (default ./data/bookie)")

    def make_server(config: BookieConfig) -> Server:
        from magnetar.bookie.process import BookieServer

        return BookieServer(config)

    return run_service("bookie", parser, BookieConfig, make_server, argv)


if __name__ == "__main__":
    sys.exit(main())
