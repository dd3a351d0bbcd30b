"""Errors as Pulsar's admin API answers them: ``{"reason": "..."}`` with Pulsar's codes.

Every route declares the error responses it can give (:func:`responses`); every error,
typed or not, becomes a JSON body; no traceback reaches a caller.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from magnetar.common import errors as e
from magnetar.gateway.auth import caller_role

log = logging.getLogger(__name__)


class ErrorBody(BaseModel):
    """Pulsar's error body (RestException / ErrorData)."""

    reason: str


class HttpError(Exception):
    """An error with the status and reason Pulsar gives (bad path names, unsupported
    values); raised by routes for what the typed errors do not say."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


# Most specific first: the first class the error is an instance of decides.
_STATUS: list[tuple[type[e.MagnetarError], int]] = [
    (e.NotEmpty, 409),
    (e.NotAllowedError, 405),
    (e.IncompatibleSchema, 409),
    (e.InvalidSchema, 422),
    (e.PreconditionFailed, 412),
    (e.InvalidTopicName, 412),
    (e.InvalidArgument, 400),
    (e.AlreadyExists, 409),
    (e.AuthenticationError, 401),
    (e.AuthorizationError, 403),
    (e.NotFound, 404),
    (e.ConsumerBusy, 412),
    (e.ProducerBusy, 412),
    (e.ProducerFenced, 412),
    (e.MetadataVersionConflict, 409),
    (e.Timeout, 504),
    (e.NotOwner, 503),
    (e.NotConnected, 503),
    (e.ServiceClosed, 503),
    (e.NotEnoughBookies, 503),
    (e.MetadataError, 503),
]

_DESCRIPTIONS = {
    400: "Bad request: a malformed body or value",
    401: "Authentication required: no token, or an invalid or expired one",
    403: "Not authorized: the role may not do this",
    404: "Not found",
    405: "Not allowed on this kind of resource",
    406: "Not acceptable: a value out of range (a partition count)",
    409: "Conflict: it exists already, is not empty, or an incompatible schema",
    412: "Precondition failed: an invalid name, or a resource in use",
    422: "Unprocessable: a change that is not allowed (fewer partitions), or schema data that does not parse",
    500: "Internal error: the operation failed (the reason says where)",
    503: "No broker or ZooKeeper available",
    504: "A broker did not answer in time",
}


def status_of(exc: e.MagnetarError) -> int:
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return 500


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error responses a route declares in the OpenAPI document (401 and 403, which
    any route gives with authentication on, and 503 always)."""
    return {c: {"model": ErrorBody, "description": _DESCRIPTIONS[c]} for c in sorted({*codes, 401, 403, 503})}


def error_response(status: int, reason: str) -> JSONResponse:
    return JSONResponse({"reason": reason}, status_code=status)


def install(app: FastAPI) -> None:
    """Register the handlers that turn every error into ``{"reason": ...}``."""

    @app.exception_handler(HttpError)
    async def _http_error(request: Request, exc: HttpError) -> JSONResponse:
        return error_response(exc.status, exc.reason)

    @app.exception_handler(e.MagnetarError)
    async def _magnetar(request: Request, exc: e.MagnetarError) -> JSONResponse:
        status = status_of(exc)
        if status in (401, 403):  # a broker refused the caller: one line, never the token
            log.warning("a broker refused %s %s to role %r: %s", request.method, request.url.path, caller_role.get(),
                        exc.message)
        elif status == 500:
            log.error("%s %s failed: %s", request.method, request.url.path, exc.message)
        return error_response(status, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(_describe(err) for err in exc.errors()[:5])
        return error_response(400, f"Invalid request: {problems}")

    @app.exception_handler(StarletteHTTPException)
    async def _starlette(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return error_response(500, f"Internal error ({type(exc).__name__}); see the gateway's log")


def _describe(err: Any) -> str:
    where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
    return f"{where}: {err.get('msg', 'invalid')}"
