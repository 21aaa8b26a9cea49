"""A streaming read of the `quire` data source across a gateway failover: ZooKeeper, 3 bookie
processes, 2 `quire gateway` processes; a stream (quire.meta = the ZooKeeper URL) runs while
the gateway owning most partitions is SIGKILLed and producers carry on through the survivor.
The stream reads bookies, not gateways: it must continue over the recovered (fenced and closed)
ledgers and the new owner's ledgers, and end with exactly what a Kafka consumer gets."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("confluent_kafka")

from confluent_kafka import Producer

import pipeline
from compat_tests.support.spark import shared_session
from gateway.cluster import inspect
from store.meta.factory import open_meta
from tests.pipeline.test_source import consume_all, create_topic, spark_rows, wait_confirmed
from tests.support.bookies import start_bookies, stop_all
from tests.support.cluster import GatewayProc

pytestmark = pytest.mark.slow

TOPIC = "streamed-failover"
PARTITIONS = 4
WITHIN = 120.0


@pytest.fixture(scope="module")
def spark() -> Any:
    s = shared_session()  # one per test process (see compat_tests.support.spark)
    pipeline.register(s)
    return s


def produce(bootstrap: str, start: int, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                  "message.timeout.ms": 60_000})
    for i in range(start, start + n):
        p.produce(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode() * 20, partition=i % PARTITIONS)
        p.poll(0)
    assert p.flush(90) == 0


def owners(url: str) -> dict[int, int]:
    async def get() -> dict[int, int]:
        meta = open_meta(url)
        await meta.start()
        try:
            t = {t.name: t for t in await inspect.topics(meta)}[TOPIC]
            return await inspect.owners(meta, t.topic_id)
        finally:
            await meta.close()

    return asyncio.run(get())


def wait_rows(q: Any, n: int) -> None:
    """Until the stream's micro-batches have read `n` rows in all (its progress events)."""
    deadline = time.monotonic() + WITHIN
    while sum(p["numInputRows"] for p in q.recentProgress) < n:
        assert q.exception() is None, q.exception()
        assert time.monotonic() < deadline, f"the stream read {sum(p['numInputRows'] for p in q.recentProgress)}/{n}"
        q.awaitTermination(0.5)  # returns at once when the query failed


def test_stream_continues_across_a_gateway_kill(spark: Any, zookeeper: Any, tmp_path: Path) -> None:
    url = zookeeper.url()
    bookies = start_bookies(3, url, tmp_path / "bookies")
    gateways = {n: GatewayProc(n, url, tmp_path / f"gateway-{n}.log") for n in (1, 2)}
    q = None
    try:
        for g in gateways.values():
            g.start()
        for g in gateways.values():
            g.wait_ready()
        bootstrap = ",".join(g.address for g in gateways.values())
        create_topic(bootstrap, TOPIC, PARTITIONS)
        produce(bootstrap, 0, 200)
        first = consume_all(bootstrap, TOPIC, PARTITIONS)
        wait_confirmed(url, TOPIC, first)

        out, ckpt = tmp_path / "out", tmp_path / "ckpt"
        df = (spark.readStream.format("quire").option("quire.meta", url).option("subscribe", TOPIC)
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "120")
              .option("includeHeaders", "true").load())
        q = (df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
             .trigger(processingTime="1 second").start())
        wait_rows(q, len(first))

        held = owners(url)
        load = Counter(held.values())
        victim = max(load, key=lambda n: (load[n], n))
        gateways[victim].kill()
        survivor = gateways[2 if victim == 1 else 1]
        produce(survivor.address, 200, 200)  # the moved partitions come back on the survivor
        everything = consume_all(survivor.address, TOPIC, PARTITIONS)
        assert len(everything) == 400
        wait_confirmed(url, TOPIC, everything)
        wait_rows(q, len(everything))
        q.stop()
        assert q.exception() is None
        rows = spark_rows(spark.read.parquet(str(out)))
        assert rows == everything  # no loss, no duplicates, across the recovered ledgers
    finally:
        if q is not None and q.isActive:
            q.stop()
        for g in gateways.values():
            g.kill()
        stop_all(bookies)
