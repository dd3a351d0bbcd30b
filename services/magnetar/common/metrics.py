"""Prometheus metrics: one ``/metrics`` HTTP endpoint per service process."""

from __future__ import annotations

import logging

from prometheus_client import start_http_server

log = logging.getLogger(__name__)


def serve_metrics(host: str, port: int) -> None:
    """Expose the default registry on http://host:port/metrics (port 0: disabled)."""
    if port:
        start_http_server(port, addr=host)
        log.info("metrics on http://%s:%d/metrics", host, port)
