"""Prometheus metrics of the gateway: requests by route template, method and status,
and their latencies, served at ``/metrics`` on the gateway's own port."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from starlette.routing import Match


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "magnetar_gateway_requests", "HTTP requests answered", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "magnetar_gateway_request_seconds", "HTTP request latency", ["method", "route"], registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )

    def install(self, app: FastAPI) -> None:
        @app.middleware("http")
        async def _measure(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
            started = time.perf_counter()
            response = await call_next(request)
            route = _route_template(app, request)
            self.requests.labels(request.method, route, str(response.status_code)).inc()
            self.latency.labels(request.method, route).observe(time.perf_counter() - started)
            return response

    def exposition(self) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


def _route_template(app: FastAPI, request: Request) -> str:
    """The path template that matched (``/admin/v2/tenants/{tenant}``), so labels stay
    few; ``other`` for paths no route matches."""
    for route in app.router.routes:
        match, _ = route.matches(request.scope)
        if match is Match.FULL:
            return getattr(route, "path", "other")
    return "other"
