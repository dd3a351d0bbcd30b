"""Prometheus metrics of the gateway: requests by route template, method and status,
and their latencies, served at ``/metrics`` on the gateway's own port."""

from __future__ import annotations

import time

from fastapi import FastAPI, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send


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
        app.add_middleware(_Measure, metrics=self)

    def exposition(self) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


class _Measure:
    """ASGI middleware: counts and times each HTTP request by the route that served it
    (its path template, ``/admin/v2/tenants/{tenant}``, so labels stay few; ``other``
    for paths no route matched). WebSocket sessions are not counted here."""

    def __init__(self, app: ASGIApp, metrics: GatewayMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        started = time.perf_counter()
        try:
            await self.app(scope, receive, send_status)
        finally:
            route = getattr(scope.get("route"), "path", "other")
            method = scope["method"]
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.latency.labels(method, route).observe(time.perf_counter() - started)
