"""Spark's own Kafka connector (spark-sql-kafka-0-10, from Maven Central through
compat_tests/spark/install.sh) against a Quire gateway, unchanged: batch write, batch read and a
streaming read with Trigger.AvailableNow, and a micro-batch read of a live producer written back with
writeStream, checked against what a Kafka consumer of Quire gets.
One Spark session (local[2]) for the module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql import SparkSession

from compat_tests.support.clients import create_topic, unique
from compat_tests.support.spark import connector_ready, shared_session
from compat_tests.support.targets import Target

pytestmark = pytest.mark.skipif(not connector_ready(),
                                reason="Spark's Kafka connector is not resolved (compat_tests/install.sh)")


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    return shared_session()  # one per test process, the connector on its classpath


def consume_all(bootstrap: str, topic: str, partitions: int) -> list[tuple[Any, ...]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("check"), "enable.auto.commit": False})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[tuple[Any, ...]] = []
        while len(out) < sum(ends.values()):
            m = c.poll(10)
            assert m is not None and m.error() is None, m and m.error()
            out.append((m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ())))
        return sorted(out, key=repr)
    finally:
        c.close()


def rows_of(df: Any) -> list[tuple[Any, ...]]:
    return sorted(((r.partition, r.offset, r.key and bytes(r.key), r.value and bytes(r.value),
                    tuple((h.key, h.value and bytes(h.value)) for h in (r.headers or ())))
                   for r in df.collect()), key=repr)


@pytest.mark.compat(suite="spark", client="spark-sql-kafka")
def test_batch_write_then_batch_and_streaming_reads(spark: SparkSession, target: Target, tmp_path: Path) -> None:
    bs = target.bootstrap
    topic = unique("spark-kafka")
    create_topic(bs, topic, partitions=2)
    rows = [(f"k{i}".encode() if i % 4 else None, f"v{i}".encode(), [("h", f"{i}".encode())] if i % 3 == 0 else [],
             i % 2) for i in range(60)]
    df = spark.createDataFrame(rows, "key binary, value binary, headers array<struct<key:string,value:binary>>, "
                                     "partition int")
    df.write.format("kafka").option("kafka.bootstrap.servers", bs).option("topic", topic).save()
    expected = consume_all(bs, topic, 2)
    assert len(expected) == 60

    read = (spark.read.format("kafka").option("kafka.bootstrap.servers", bs).option("subscribe", topic)
            .option("startingOffsets", "earliest").option("endingOffsets", "latest")
            .option("includeHeaders", "true").load())
    assert rows_of(read) == expected

    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bs).option("subscribe", topic)
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "25")
              .option("includeHeaders", "true").load())
    q = (stream.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None
    assert rows_of(spark.read.parquet(str(out))) == expected


@pytest.mark.compat(suite="spark", client="spark-sql-kafka")
def test_streaming_read_of_a_live_producer_written_with_write_stream(spark: SparkSession, target: Target,
                                                                     tmp_path: Path) -> None:
    """A micro-batch query (processing-time trigger) reads a topic while a producer keeps writing to
    it, and writes each row to a second topic with Spark's Kafka sink (writeStream): the second
    topic ends with every produced record, each once (no failure in the run: nothing replayed)."""
    bs = target.bootstrap
    src, dst = unique("spark-live"), unique("spark-sink")
    create_topic(bs, src, partitions=2)
    create_topic(bs, dst, partitions=2)
    n = 300
    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bs).option("subscribe", src)
              .option("startingOffsets", "earliest").option("includeHeaders", "true").load()
              .selectExpr("key", "value", "headers", "partition"))
    q = (stream.writeStream.format("kafka").option("kafka.bootstrap.servers", bs).option("topic", dst)
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="500 milliseconds").start())
    try:
        p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
        for i in range(n):  # in small flushes, so the query sees the topic grow across micro-batches
            p.produce(src, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2,
                      headers=[("i", f"{i}".encode())])
            if i % 50 == 49:
                assert p.flush(30) == 0
                q.processAllAvailable()
        assert p.flush(30) == 0
        q.processAllAvailable()
        assert q.exception() is None
        batches = [b for b in q.recentProgress if b["numInputRows"]]
        assert len(batches) > 1  # the records arrived over several micro-batches
    finally:
        q.stop()
    want = sorted((p, k, v, h) for p, _, k, v, h in consume_all(bs, src, 2))
    assert len(want) == n
    assert sorted((p, k, v, h) for p, _, k, v, h in consume_all(bs, dst, 2)) == want


@pytest.mark.compat(suite="spark", client="spark-sql-kafka")
def test_quire_source_has_the_kafka_source_schema(spark: SparkSession, tmp_path: Path) -> None:
    """format("quire") gives the very schema (names, types, nullability) of Spark's Kafka source,
    with and without headers, batch and streaming: a job switches by the format name. Schemas
    only: nothing is read (no broker, an empty data dir)."""
    import pipeline

    pipeline.register(spark)
    (tmp_path / "meta").mkdir()
    for headers in ("false", "true"):
        for read in (spark.read, spark.readStream):
            kafka = (read.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:1")
                     .option("subscribe", "t").option("includeHeaders", headers).load())
            quire = (read.format("quire").option("quire.meta", str(tmp_path)).option("subscribe", "t")
                     .option("includeHeaders", headers).load())
            assert quire.schema == kafka.schema, (headers, quire.schema, kafka.schema)
