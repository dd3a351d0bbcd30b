"""Spark tests: one local[2] SparkSession for the whole run (a session costs 7-11 s and
about 500 MB), with spark-jobs/ importable and the virtualenv's Python on the workers."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

SPARK_JOBS = Path(__file__).resolve().parents[2] / "spark-jobs"
sys.path.insert(0, str(SPARK_JOBS))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable  # workers must see the virtualenv's packages
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(SPARK_JOBS), os.environ.get("PYTHONPATH", "")) if p)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from magnetar_spark.session import local_session

    session = local_session("magnetar-tests", master="local[2]")
    try:
        yield session
    finally:
        session.stop()
