"""The web console (docs/console.md): a static app at ``/console`` that calls the gateway's
REST API from the browser, with the operator's own token.

The gateway serves the files only; every page reads and changes the cluster through the
same ``/admin/v2`` paths a ``curl`` would use, so the console can do nothing the API
refuses. The files are served without credentials (they hold no data); the API calls
they make carry the token the operator signed in with."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"
PREFIX = "/console"


def install(app: FastAPI) -> None:
    """Serve the console's files at ``/console/`` (``/console`` redirects there, so the
    pages' relative module imports resolve)."""

    @app.get(PREFIX, include_in_schema=False)
    async def console_root() -> RedirectResponse:
        return RedirectResponse(f"{PREFIX}/", status_code=307)

    app.mount(PREFIX, StaticFiles(directory=STATIC, html=True), name="console")
