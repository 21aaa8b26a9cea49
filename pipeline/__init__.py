"""PySpark data source over the store (and, later, migration tooling).

    import pipeline
    pipeline.register(spark)
    spark.read.format("quire").option("quire.meta", "./quire-data").option("subscribe", "t").load()
"""

from __future__ import annotations

from typing import Any

from pipeline.source import PUSHDOWN_CONF, QuireDataSource

__all__ = ["QuireDataSource", "register"]


def register(spark: Any) -> None:
    """Registers the `quire` format with a SparkSession, and turns on Python data sources'
    filter push-down (PySpark refuses a reader that implements it while it is off)."""
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(QuireDataSource)
