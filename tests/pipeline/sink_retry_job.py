"""A Spark job for test_sink_exactly_once, run in its own process: a session whose master lets
Spark retry a failed task (`local[2,3]`; the suite's shared session is `local[2]`, and one process
holds one SparkContext). Writes N keyed rows into TOPIC through `format("quire")`; a Python UDF
fails every task's first attempt at its row 3/4. Spark then ends the writer's input cleanly (as
if the task had no more rows): the first attempts commit the rows they got, and the retries must
write only the rest.

Usage: python -m tests.pipeline.sink_retry_job BOOTSTRAP TOPIC N"""

from __future__ import annotations

import sys

PAD = 2000  # bytes per value: the rows a first attempt gets before the failure span many buffers


def main(bootstrap: str, topic: str, n: int) -> None:
    from pyspark import TaskContext
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import pipeline

    spark = (SparkSession.builder.master("local[2,3]").appName("quire-sink-retry")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             # the writer gets its rows in Arrow batches of this size: small, so it has some before the failure
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100").getOrCreate())
    try:
        pipeline.register(spark)
        half = n // 2

        @F.udf("binary")
        def fail_first_attempt(i: int) -> bytes:
            ctx = TaskContext.get()
            if ctx is not None and ctx.attemptNumber() == 0 and i % half == half * 3 // 4:
                raise RuntimeError(f"injected failure of the first attempt at row {i}")
            return f"v{i}".encode().ljust(PAD, b".")

        df = (spark.range(n, numPartitions=2)
              .select(F.col("id").cast("string").cast("binary").alias("key"), fail_first_attempt("id").alias("value")))
        df.write.format("quire").option("kafka.bootstrap.servers", bootstrap).option("topic", topic) \
            .option("kafka.linger.ms", "1").mode("append").save()
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
