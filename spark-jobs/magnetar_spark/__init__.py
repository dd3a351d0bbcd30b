"""The ``magnetar`` PySpark data source (batch and streaming reads of topics, writes with
deduplicating producers) and what the Spark jobs share; see docs/spark.md."""

from __future__ import annotations

from typing import Any

__all__ = ["DefaultSource", "register"]


def register(spark: Any) -> None:
    """Register format ``magnetar`` on ``spark`` (a SparkSession)."""
    from .source import MagnetarDataSource

    spark.dataSource.register(MagnetarDataSource)


def __getattr__(name: str) -> Any:
    if name == "DefaultSource":
        from .source import DefaultSource

        return DefaultSource
    raise AttributeError(name)
