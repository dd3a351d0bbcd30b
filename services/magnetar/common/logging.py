"""Structured logging: one line per event, ``time level service logger message k=v …``."""

from __future__ import annotations

import logging
import sys


class _Formatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        ts = self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}"
        fields = getattr(record, "fields", None) or {}
        extra = "".join(f" {k}={v}" for k, v in fields.items())
        line = f"{ts} {record.levelname:<5} {self.service} {record.name}: {record.getMessage()}{extra}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class _ClientGoneFilter(logging.Filter):
    """grpc.aio logs ERROR with a traceback ("ExecuteBatchError raised in core by servicer
    method [...]") when a client cancels a stream while the server is sending it a
    message: the client went away, nothing failed here. Told in one WARNING line."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.levelno >= logging.ERROR and message.startswith("ExecuteBatchError raised in core by servicer method"):
            method = message.rpartition(" ")[2]
            record.msg, record.args, record.exc_info, record.exc_text = (
                f"the client of {method} went away while a response was being sent", None, None, None
            )
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def configure(service: str, level: str = "INFO") -> None:
    """Send every log record of this process to stderr in the structured format."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(service))
    handler.addFilter(_ClientGoneFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("kazoo").setLevel(max(logging.WARNING, root.level))


def kv(**fields: object) -> dict[str, dict[str, object]]:
    """``log.info("msg", extra=kv(ledger=3))`` attaches key=value fields."""
    return {"fields": fields}
