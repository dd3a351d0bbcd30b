"""Spark tests: one local[2] SparkSession for the whole run (a session costs 7-11 s and
about 500 MB), with spark-jobs/ importable and the virtualenv's Python on the workers;
one cluster (a bookie, a broker and the gateway as processes, on the run's ZooKeeper)
for every Spark test that needs one (starting one costs 8 s on an idle machine, up to a
minute on a loaded one). The tests share it safely: each uses topics (or a namespace)
of its own, and none stops or breaks a service."""

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
def mcluster(zk_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from magnetar_spark.testing import cluster

    # Infinite retention: test_source reads topics that have no subscription, and the
    # broker's retention round (every 60 s) would otherwise delete their rolled-over
    # ledgers under a reader that comes late, as Pulsar's does.
    with cluster(zk_server, Path(tmp_path_factory.mktemp("spark-cluster")),
                 default_retention_time_minutes=-1, default_retention_size_mb=-1) as c:
        yield c


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from magnetar_spark.session import local_session

    session = local_session("magnetar-tests", master="local[2]")
    try:
        yield session
    finally:
        session.stop()
