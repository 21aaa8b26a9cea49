"""Spark's own Kafka connector for tests and benchmarks: the jars compat_tests/spark/install.sh
resolved from Maven Central, less those PySpark already ships (its Spark, Scala and Hadoop win)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any


def _pyspark_dir() -> Path | None:
    try:
        import pyspark
    except ImportError:
        return None
    return Path(pyspark.__file__).parent


def connector_dir() -> Path | None:
    """Where install.sh put the connector for the installed PySpark (None without PySpark)."""
    here = _pyspark_dir()
    if here is None:
        return None
    import pyspark

    return Path.home() / ".cache" / "quire" / f"spark-{pyspark.__version__}" / "kafka-connector"


def connector_ready() -> bool:
    d = connector_dir()
    return d is not None and (d / ".complete").exists()


def connector_jars() -> list[str]:
    d, here = connector_dir(), _pyspark_dir()
    assert d is not None and here is not None
    shipped = {_artifact(p.name) for p in (here / "jars").glob("*.jar")}
    return sorted(str(p) for p in d.glob("*.jar") if _artifact(p.name) not in shipped)


def _artifact(jar: str) -> str:
    return re.sub(r"-\d[^-]*(-[a-z]+\d*)?\.jar$", "", jar)


_session: Any = None


def shared_session() -> Any:
    """The test process's one SparkSession (local[2]), started with Spark's Kafka connector on its
    classpath when it is installed, and never stopped by a module: jars given to a later session
    in the same JVM never reach the driver's class loader, so a module that needs the connector
    after another module had its own session would fail ("Failed to find data source: kafka")."""
    global _session
    if _session is None:
        import atexit

        from pyspark.sql import SparkSession

        builder = (SparkSession.builder.master("local[2]").appName("quire-tests")
                   .config("spark.ui.enabled", "false")
                   .config("spark.sql.shuffle.partitions", "2")
                   .config("spark.python.worker.reuse", "true")
                   .config("spark.sql.session.timeZone", "UTC"))
        if connector_ready():
            builder = builder.config("spark.jars", ",".join(connector_jars()))
        _session = builder.getOrCreate()
        atexit.register(_session.stop)
    return _session
