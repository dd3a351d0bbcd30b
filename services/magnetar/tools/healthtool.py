"""``magnetar health``: is a service up? For container HEALTHCHECKs and exec probes.

``magnetar health HOST:PORT`` asks the gRPC health service (bookie, broker, auditor);
``magnetar health http://HOST:PORT/readyz`` wants a 200 (the gateway). Without a target it
takes ``MAGNETAR_HEALTH_TARGET``, and without that it tries the services' default local
endpoints (broker 6660, bookie 3181, auditor 3182, gateway 8080 ``/readyz``) and is healthy
when one of them serves: one service per container on its default port, as the image's
``HEALTHCHECK`` expects.

Exit code 0 healthy, 1 not (one line on stderr saying what was tried), 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys

from magnetar.common.errors import MagnetarError
from magnetar.common.healthcheck import grpc_health_serving, http_ready
from magnetar.common.tls import add_tls_flags, tls_from_flags

TARGET_ENV = "MAGNETAR_HEALTH_TARGET"
DEFAULT_TARGETS = ("localhost:6660", "localhost:3181", "localhost:3182", "http://localhost:8080/readyz")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="magnetar health",
        description="Exit 0 when the service answers its health check: gRPC health for HOST:PORT, "
        f"HTTP 200 for a URL. Default target: ${TARGET_ENV}, else every service's default local port.",
    )
    parser.add_argument("target", nargs="?", help="HOST:PORT (gRPC health) or http(s)://... (wants 200)")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds per check (default 2)")
    add_tls_flags(parser)
    return parser


def healthy(target: str, timeout_s: float, args: argparse.Namespace) -> bool:
    """True when ``target`` answers its health check within ``timeout_s``."""
    tls = tls_from_flags(args, target)
    if target.startswith(("http://", "https://")):
        return http_ready(target, timeout_s, tls)
    return grpc_health_serving(target, timeout_s, tls=tls)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.timeout <= 0:
        print("magnetar health: --timeout must be positive", file=sys.stderr)
        return 2
    target = args.target or os.environ.get(TARGET_ENV, "")
    targets = (target,) if target else DEFAULT_TARGETS
    try:
        if any(healthy(t, args.timeout, args) for t in targets):
            return 0
    except MagnetarError as exc:
        print(f"magnetar health: {exc.message}", file=sys.stderr)
        return 2
    print(f"magnetar health: not serving: {', '.join(targets)}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
