"""``python -m magnetar.auditor`` / ``magnetar auditor``: run one auditor replica."""

from __future__ import annotations

import sys

from magnetar.auditor.config import DEFAULT_PORT, AuditorConfig
from magnetar.common.service_main import Server, run_service, service_parser


def main(argv: list[str] | None = None) -> int:
    parser = service_parser(
        "auditor", "Run an auditor replica (keeps every ledger at Qw copies).", DEFAULT_PORT
    )
    parser.add_argument(
        "--grace-period", dest="grace_period_s", type=float,
        help="seconds a bookie may be gone before its ledgers are re-replicated (default 30)",
    )  # fmt: skip

    def make_server(config: AuditorConfig) -> Server:
        from magnetar.auditor.process import AuditorServer

        return AuditorServer(config)

    return run_service("auditor", parser, AuditorConfig, make_server, argv)


if __name__ == "__main__":
    sys.exit(main())
