"""Prometheus metrics: one ``/metrics`` HTTP endpoint per service process."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest, start_http_server
from prometheus_client.exposition import ThreadingWSGIServer

from magnetar.common.errors import MagnetarError

log = logging.getLogger(__name__)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # a line per scrape is noise


def serve_metrics(host: str, port: int, extra: Callable[[], str] | None = None) -> None:
    """Expose the default registry on http://host:port/metrics (port 0: disabled), on a
    thread of its own.

    Args:
        extra: text in Prometheus's text format appended to the registry's on each
            scrape (the broker's Pulsar metrics: far more series than the registry's
            objects could format in time).

    Raises:
        MagnetarError: the port cannot be bound (in use, no permission).
    """
    if not port:
        return
    try:
        if extra is None:
            start_http_server(port, addr=host)
        else:
            _serve(host, port, extra)
    except OSError as exc:
        raise MagnetarError(
            f"cannot serve metrics on {host}:{port} ({exc.strerror}): choose another metrics_port"
        ) from exc
    log.info("metrics on http://%s:%d/metrics", host, port)


def _serve(host: str, port: int, extra: Callable[[], str]) -> None:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "/") not in ("/", "/metrics"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found\n"]
        body = generate_latest(REGISTRY) + extra().encode()
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST), ("Content-Length", str(len(body)))])
        return [body]

    server = make_server(host, port, app, ThreadingWSGIServer, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
