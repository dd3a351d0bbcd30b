"""The shared local Spark session runs Python on its workers with the virtualenv's
packages (a smoke test of the set-up every Spark test relies on)."""

from __future__ import annotations


def test_a_local_session_runs_python_workers(spark) -> None:
    import magnetar

    rows = spark.sparkContext.parallelize(range(10), 2).map(lambda x: (x, __import__("magnetar").__name__)).collect()
    assert sorted(r[0] for r in rows) == list(range(10))
    assert {r[1] for r in rows} == {magnetar.__name__}
