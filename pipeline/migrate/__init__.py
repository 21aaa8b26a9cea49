"""`quire migrate`: Kafka topics into Quire at their original offsets, on Spark (job.py)."""

from __future__ import annotations

from pipeline.migrate.job import MigrateError, Options, main, run

__all__ = ["MigrateError", "Options", "main", "run"]
