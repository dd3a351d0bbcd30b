"""Building a SparkSession for the jobs and the tests, with the ``magnetar`` data source
registered."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any


def local_session(app_name: str, master: str = "local[2]", **conf: str) -> Any:
    """A SparkSession on ``master`` with the ``magnetar`` format registered.

    The workers run this interpreter (``PYSPARK_PYTHON``), so they see the same packages.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # The workers import magnetar_spark (the data source's classes are pickled by
    # reference): put spark-jobs/ on their path when it is not installed.
    jobs_dir = str(Path(__file__).resolve().parents[1])
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if jobs_dir not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([jobs_dir, *paths])
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).master(master)
    defaults = {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.driver.memory": "1g",
        "spark.sql.session.timeZone": "UTC",
    }
    for key, value in {**defaults, **conf}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    try:
        from magnetar_spark import register
    except ImportError:  # the data source is not built yet
        return session
    register(session)
    return session
