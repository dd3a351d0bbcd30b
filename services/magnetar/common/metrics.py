"""Prometheus metrics: one ``/metrics`` HTTP endpoint per service process."""

from __future__ import annotations

import logging

from prometheus_client import start_http_server

from magnetar.common.errors import MagnetarError

log = logging.getLogger(__name__)


def serve_metrics(host: str, port: int) -> None:
    """Expose the default registry on http://host:port/metrics (port 0: disabled).

    Raises:
        MagnetarError: the port cannot be bound (in use, no permission).
    """
    if port:
        try:
            start_http_server(port, addr=host)
        except OSError as exc:
            raise MagnetarError(
                f"cannot serve metrics on {host}:{port} ({exc.strerror}): choose another metrics_port"
            ) from exc
        log.info("metrics on http://%s:%d/metrics", host, port)
