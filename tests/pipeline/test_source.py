"""The `quire` PySpark data source against a real standalone: batch reads return exactly what
a Kafka consumer of Quire returns (across ledger rollovers, every codec, null keys and values,
headers), also once closed ledgers are offloaded (fs and SeaweedFS S3) and their bookie copies
deleted; filters prune ledgers, bad options name the option, and a stream restarted from its
checkpoint reads every record once. One Spark session (local[2]) for the whole module."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")
confluent_kafka = pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

import pipeline  # noqa: E402
from compat_tests.support.spark import shared_session  # noqa: E402
from gateway.cluster.inspect import topics as list_topics  # noqa: E402
from pipeline.logs import LedgerSpan, Quire, Slice  # noqa: E402
from pipeline.options import meta_url, parse  # noqa: E402
from pipeline.pacing import DEFAULT_HEADROOM, Headroom, Pace  # noqa: E402
from pipeline.source import pacers_of  # noqa: E402
from store import layout  # noqa: E402
from store.ledger.errors import NoSuchLedgerError  # noqa: E402
from store.meta.factory import open_meta  # noqa: E402
from tests.gateway.test_offload_clients import admin  # noqa: E402
from tests.support.embedded_meta import db_file  # noqa: E402
from tests.support.gateway import StandaloneFactory, StandaloneGateway  # noqa: E402
from tests.support.wait import eventually  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
Row = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int, int]


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    s = shared_session()  # one per test process (see compat_tests.support.spark)
    pipeline.register(s)
    return s


def create_topic(bootstrap: str, name: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(30)


def produce(bootstrap: str, topic: str, partitions: int, per_codec: int, value_size: int) -> None:
    """Records with every codec, random values (so that ledgers roll), every 7th key and every
    11th value null, headers on some."""
    rnd = random.Random(7)
    for codec in CODECS:
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                      "enable.idempotence": True})
        for i in range(per_codec):
            key = None if i % 7 == 0 else f"{codec}-{i}".encode()
            value = None if i % 11 == 0 else rnd.randbytes(value_size)
            headers = [("h", f"{i}".encode()), ("n", None)] if i % 3 == 0 else None
            p.produce(topic, value=value, key=key, headers=headers, partition=i % partitions)
            p.poll(0)
        assert p.flush(30) == 0


def consume_all(bootstrap: str, topic: str, partitions: int) -> list[Row]:
    """Everything a (read_committed) Kafka consumer of Quire gets, up to each partition's end
    (offsets may have gaps: transaction markers)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Row] = []
        at_end: set[int] = set()
        while len(at_end) < partitions:
            m = c.poll(10)
            assert m is not None, "consumer got nothing"
            if m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(m.partition())
                continue
            assert m.error() is None, m.error()
            ts_type, ts = m.timestamp()
            out.append((m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()), ts, ts_type - 1))
        return sorted(out)
    finally:
        c.close()


def spark_rows(df: Any) -> list[Row]:
    rows = df.collect()
    return sorted(
        (r.partition, r.offset, r.key and bytes(r.key), r.value and bytes(r.value),
         tuple((h.key, h.value and bytes(h.value)) for h in (r.headers or ())),
         int(r.timestamp.timestamp() * 1000 + 0.5), r.timestampType)
        for r in rows
    )


async def _latest(url: str, topic: str) -> dict[int, int]:
    async with Quire(url) as q:
        by_name = {t.name: t for t in await list_topics(q.meta)}
        t = by_name[topic]
        return {p: (await q.state(t, p)).latest for p in range(t.partitions)}


def wait_confirmed(url: str, topic: str, expected: list[Row]) -> None:
    """Until the bookies confirm every produced batch to readers (the explicit LAC of an idle
    writer follows its last add)."""
    ends: dict[int, int] = {}
    for p, off, *_ in expected:
        ends[p] = max(ends.get(p, 0), off + 1)

    async def ok() -> bool:
        got = await _latest(url, topic)
        return all(got.get(p, 0) >= e for p, e in ends.items())

    asyncio.run(eventually(ok, what=f"{topic} confirmed"))


@pytest.fixture(scope="module")
def rolled(module_standalone: StandaloneGateway) -> tuple[str, list[Row]]:
    """Topic `rolled`: 2 partitions, 1 MiB ledgers, ~2.5 MiB per partition, every codec."""
    bs = module_standalone.bootstrap
    create_topic(bs, "rolled", 2, **{"segment.bytes": str(1 << 20)})
    produce(bs, "rolled", 2, per_codec=200, value_size=5000)
    expected = consume_all(bs, "rolled", 2)
    wait_confirmed(meta_url(str(module_standalone.data_dir)), "rolled", expected)
    return str(module_standalone.data_dir), expected


def sessions_opened(data_dir: str) -> int:
    """How many sessions the standalone's embedded metadata store has ever opened."""
    with contextlib.closing(sqlite3.connect(db_file(meta_url(data_dir)))) as c:
        return int(c.execute("SELECT seq FROM sqlite_sequence WHERE name = 'sessions'").fetchone()[0])


def reader(spark: SparkSession, data_dir: str, **opts: str) -> Any:
    r = spark.read.format("quire").option("quire.meta", data_dir)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def test_batch_read_equals_kafka_consumer(spark: SparkSession, rolled: tuple[str, list[Row]]) -> None:
    data_dir, expected = rolled
    assert len(expected) == 5 * 200
    state = asyncio.run(_spans(meta_url(data_dir), "rolled"))
    assert all(n >= 2 for n in state.values()), f"ledgers did not roll: {state}"
    sessions = sessions_opened(data_dir)
    # one Spark partition per ledger when slices are smaller than a ledger
    df = reader(spark, data_dir, subscribe="rolled", includeHeaders="true", **{"quire.sliceBytes": "1"})
    assert df.rdd.getNumPartitions() == sum(state.values())
    assert spark_rows(df) == expected
    # the driver and every task read the metadata store without a session: none of them ever
    # held its write lock (see store/meta/embedded.py)
    assert sessions_opened(data_dir) == sessions
    assert [f.name for f in df.schema] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                           "timestampType", "headers"]
    plain = reader(spark, data_dir, subscribePattern="roll.*")
    assert "headers" not in plain.columns and plain.count() == len(expected)


def test_paced_batch_read_returns_the_same_rows(spark: SparkSession, rolled: tuple[str, list[Row]]) -> None:
    """Bounded (quire.maxBytesPerSecond) and leaving CPU headroom (quire.cpuHeadroom, here 90%:
    cut whenever the suite's machine is busier than 10%): slower, never different."""
    data_dir, expected = rolled
    df = reader(spark, data_dir, subscribe="rolled", includeHeaders="true",
                **{"quire.maxBytesPerSecond": str(64 << 20), "quire.cpuHeadroom": "0.9"})
    assert spark_rows(df) == expected


def test_tasks_leave_cpu_headroom_by_default_only_beside_a_bookie(rolled: tuple[str, list[Row]],
                                                                  tmp_path: Path) -> None:
    """quire.cpuHeadroom unset: the default headroom where a task shares a machine with one of
    the cluster's bookies (here the standalone's, on loopback), none where all are elsewhere;
    0 turns it off, and a value is used wherever the task runs."""
    data_dir, _ = rolled
    far = tmp_path / "meta"  # a cluster whose one bookie is on another machine
    asyncio.run(_register_bookie(f"embedded://{far}", "203.0.113.7:3181"))  # TEST-NET-3: no one's

    def paced(meta: str, **opts: str) -> list[tuple[type, float | None]]:
        o = parse({"quire.meta": meta, "subscribe": "rolled", **opts}, streaming=False)

        async def go() -> list[Pace | Headroom]:
            async with Quire(o.meta_url) as q:
                return await pacers_of(o, q)
        return [(type(p), p.cap if isinstance(p, Headroom) else p.rate) for p in asyncio.run(go())]

    try:
        assert paced(data_dir) == [(Headroom, pytest.approx(1 - DEFAULT_HEADROOM))]
        assert paced(data_dir, **{"quire.cpuHeadroom": "0"}) == []
        assert paced(data_dir, **{"quire.cpuHeadroom": "0", "quire.maxBytesPerSecond": "1000"}) == [(Pace, 1000)]
        assert paced(f"embedded://{far}") == []
        assert paced(f"embedded://{far}", **{"quire.cpuHeadroom": "0.3"}) == [(Headroom, pytest.approx(0.7))]
    finally:
        Headroom._shared.clear()


async def _register_bookie(url: str, address: str) -> None:
    meta = open_meta(url)
    await meta.start()
    try:
        await meta.create(layout.bookie_available(address), b"{}", make_parents=True)
    finally:
        await meta.close()


@pytest.mark.parametrize("kind", ["fs", "s3"])
def test_batch_read_of_offloaded_ledgers(spark: SparkSession, standalone_factory: StandaloneFactory,
                                         request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> None:
    """Closed ledgers offloaded, their bookie copies deleted: Spark reads them from the tier, the
    fs tier found under the data dir as `quire admin` finds it, S3 from quire.config + options."""
    args, opts = ["--offload-deletion-lag-ms", "0"], {}
    if kind == "s3":
        sw = request.getfixturevalue("seaweed")
        bucket = sw.new_bucket()
        args += ["--offload-driver", "s3", "--offload-s3-endpoint", sw.endpoint, "--offload-s3-bucket", bucket,
                 "--offload-s3-access-key", sw.access_key, "--offload-s3-secret-key", sw.secret_key]
        conf = tmp_path / "server.properties"
        conf.write_text(f"quire.offload.driver=s3\nquire.offload.s3.endpoint={sw.endpoint}\n"
                        f"quire.offload.s3.bucket={bucket}\n")
        opts = {"quire.config": str(conf), "quire.offload.s3.access.key": sw.access_key,
                "quire.offload.s3.secret.key": sw.secret_key}
    gw = standalone_factory(extra_args=args)
    bs, data_dir, url = gw.bootstrap, str(gw.data_dir), meta_url(str(gw.data_dir))
    create_topic(bs, "tiered", 2, **{"remote.storage.enable": "true", "local.retention.bytes": "-1",
                                     "local.retention.ms": "-1", "segment.bytes": str(1 << 20)})
    produce(bs, "tiered", 2, per_codec=400, value_size=5000)  # ~5 MiB per partition
    expected = consume_all(bs, "tiered", 2)
    wait_confirmed(url, "tiered", expected)
    admin(data_dir, "offload", "trigger", "tiered")
    parts = admin(data_dir, "topics", "describe", "tiered")["partitions"]
    tiered = {p: [lg for lg in d["ledgers"] if "offload" in lg] for p, d in enumerate(parts)}
    assert all(len(lgs) >= 2 for lgs in tiered.values()), tiered
    assert all(lg["offload"]["bookie_deleted"] and lg["offload"]["driver"] == kind
               for lgs in tiered.values() for lg in lgs)
    assert all(lgs[0]["first_offset"] == 0 for lgs in tiered.values())
    ids = [lg["ledger_id"] for lgs in tiered.values() for lg in lgs]
    asyncio.run(_bookie_copies_gone(url, ids, tiered[0][0]["next_offset"]))

    df = reader(spark, data_dir, subscribe="tiered", includeHeaders="true", **{"quire.sliceBytes": "1"}, **opts)
    assert df.rdd.getNumPartitions() == sum(asyncio.run(_spans(url, "tiered")).values())
    assert spark_rows(df) == expected
    # a range inside an offloaded ledger only
    end = tiered[1][0]["next_offset"]
    part = reader(spark, data_dir, assign='{"tiered":[1]}', includeHeaders="true",
                  startingOffsets='{"tiered":{"1":1}}', endingOffsets=f'{{"tiered":{{"1":{end}}}}}', **opts)
    assert spark_rows(part) == [r for r in expected if r[0] == 1 and 1 <= r[1] < end]


async def _bookie_copies_gone(url: str, ledger_ids: list[int], end: int) -> None:
    """No ledger metadata left for the offloaded ledgers, and a reader without the tier fails."""
    async with Quire(url) as q:
        assert q.client is not None
        for lid in ledger_ids:
            with pytest.raises(NoSuchLedgerError):
                await q.client.metadata(lid)
        t = {t.name: t for t in await list_topics(q.meta)}["tiered"]
        st = await q.state(t, 0)
        with pytest.raises(RuntimeError, match="not configured here"):
            async for _ in q.read_range(Slice("tiered", 0, st.log, 0, end, ())):
                pass


async def _spans(url: str, topic: str) -> dict[int, int]:
    async with Quire(url) as q:
        t = {t.name: t for t in await list_topics(q.meta)}[topic]
        return {p: len((await q.state(t, p)).spans) for p in range(t.partitions)}


def test_offsets_and_filters_prune(spark: SparkSession, rolled: tuple[str, list[Row]]) -> None:
    data_dir, expected = rolled
    full = reader(spark, data_dir, subscribe="rolled", **{"quire.sliceBytes": "1"}).rdd.getNumPartitions()
    df = reader(spark, data_dir, subscribe="rolled", includeHeaders="true", **{"quire.sliceBytes": "1"})
    picked = df.where("partition = 1 AND offset >= 10 AND offset < 30")
    assert picked.rdd.getNumPartitions() == 1  # one ledger of one partition read
    assert spark_rows(picked) == [r for r in expected if r[0] == 1 and 10 <= r[1] < 30]
    assert full > 1
    ranged = reader(spark, data_dir, assign='{"rolled":[0]}', includeHeaders="true",
                    startingOffsets='{"rolled":{"0":5}}', endingOffsets='{"rolled":{"0":-1}}')
    assert spark_rows(ranged) == [r for r in expected if r[0] == 0 and r[1] >= 5]
    ts = expected[len(expected) // 2][5]
    since = reader(spark, data_dir, subscribe="rolled", startingTimestamp=str(ts))
    assert since.count() == sum(1 for r in expected if r[1] >= _first_at(expected, r[0], ts))


def test_timestamp_filter_prunes_ledgers(spark: SparkSession, rolled: tuple[str, list[Row]]) -> None:
    """A filter on timestamp, pushed down, skips the ledgers whose newest record is older (each
    partition's first one here) before any read; rows are still exactly the filter's."""
    from pyspark.sql import functions as F

    data_dir, expected = rolled
    spans = asyncio.run(_ledger_spans(meta_url(data_dir), "rolled"))
    firsts = [ss[0].max_ts for ss in spans.values()]
    assert all(ts is not None for ts in firsts), spans
    ts = max(t for t in firsts if t is not None) + 1
    kept = sum(1 for ss in spans.values() for sp in ss if sp.max_ts is None or sp.max_ts >= ts)
    assert kept < sum(len(ss) for ss in spans.values())
    df = reader(spark, data_dir, subscribe="rolled", includeHeaders="true", **{"quire.sliceBytes": "1"})
    picked = df.where(F.col("timestamp") >= F.lit(dt.datetime.fromtimestamp(ts / 1000, dt.UTC)))
    assert picked.rdd.getNumPartitions() == kept
    assert spark_rows(picked) == [r for r in expected if r[5] >= ts]


async def _ledger_spans(url: str, topic: str) -> dict[int, list[LedgerSpan]]:
    async with Quire(url) as q:
        t = {t.name: t for t in await list_topics(q.meta)}[topic]
        return {p: (await q.state(t, p)).spans for p in range(t.partitions)}


def _first_at(rows: list[Row], partition: int, ts: int) -> int:
    return min((r[1] for r in rows if r[0] == partition and r[5] >= ts), default=1 << 62)


def test_per_partition_timestamps_and_ending_timestamp(spark: SparkSession, rolled: tuple[str, list[Row]]) -> None:
    """startingOffsetsByTimestamp (per partition), endingTimestamp and endingOffsetsByTimestamp:
    Kafka's offset-for-time, the first offset whose timestamp is at or after the given one."""
    data_dir, expected = rolled
    of = {p: [r for r in expected if r[0] == p] for p in (0, 1)}
    ts = {0: of[0][len(of[0]) // 3][5], 1: of[1][2 * len(of[1]) // 3][5]}
    by_ts = f'{{"rolled":{{"0":{ts[0]},"1":{ts[1]}}}}}'
    since = reader(spark, data_dir, subscribe="rolled", includeHeaders="true", startingOffsetsByTimestamp=by_ts)
    assert spark_rows(since) == [r for r in expected if r[1] >= _first_at(expected, r[0], ts[r[0]])]
    before = reader(spark, data_dir, subscribe="rolled", includeHeaders="true", endingOffsetsByTimestamp=by_ts)
    assert spark_rows(before) == [r for r in expected if r[1] < _first_at(expected, r[0], ts[r[0]])]
    assert spark_rows(since) and spark_rows(before)  # the timestamps cut both partitions
    until = reader(spark, data_dir, subscribe="rolled", includeHeaders="true", endingTimestamp=str(ts[0]))
    assert spark_rows(until) == [r for r in expected if r[1] < _first_at(expected, r[0], ts[0])]
    with pytest.raises(Exception, match="startingOffsetsByTimestamp"):
        reader(spark, data_dir, subscribe="rolled", startingOffsetsByTimestamp=f'{{"rolled":{{"0":{ts[0]}}}}}').collect()


@pytest.mark.parametrize(("opts", "named"), [
    ({}, "subscribe, subscribePattern, assign"),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "subscribe, subscribePattern, assign"),
    ({"subscribe": " , "}, "option 'subscribe'"),
    ({"subscribePattern": "("}, "option 'subscribePattern'"),
    ({"assign": "rolled"}, "option 'assign'"),
    ({"assign": '{"rolled":5}'}, "option 'assign'"),
    ({"assign": '{"rolled":[7]}'}, "rolled-7 given in option 'assign'"),  # no such partition
    ({"subscribe": "rolled", "startingOffsets": "latest"}, "startingOffsets"),
    ({"subscribe": "rolled", "endingOffsets": "earliest"}, "endingOffsets"),
    ({"subscribe": "rolled", "startingOffsets": "{bad"}, "startingOffsets"),
    ({"subscribe": "rolled", "endingOffsets": '{"rolled":[1]}'}, "endingOffsets"),
    ({"subscribe": "rolled", "startingTimestamp": "yesterday"}, "startingTimestamp"),
    ({"subscribe": "rolled", "endingTimestamp": "1e3"}, "endingTimestamp"),
    ({"subscribe": "rolled", "startingOffsetsByTimestamp": "[1]"}, "startingOffsetsByTimestamp"),
    ({"subscribe": "rolled", "startingOffsetsByTimestampStrategy": "nearest"}, "startingOffsetsByTimestampStrategy"),
    ({"subscribe": "rolled", "includeHeaders": "maybe"}, "includeHeaders"),
    ({"subscribe": "rolled", "maxOffsetsPerTrigger": "-5"}, "maxOffsetsPerTrigger"),
    ({"subscribe": "rolled", "maxOffsetsPerTrigger": "many"}, "maxOffsetsPerTrigger"),
    ({"subscribe": "rolled", "quire.cpuHeadroom": "2"}, r"quire\.cpuHeadroom"),
    ({"subscribe": "rolled", "quire.meta": " "}, r"quire\.meta"),
    ({"subscribe": "rolled", "quire.meta": "/nonexistent/quire-data"}, r"'quire\.meta'.*/nonexistent/quire-data"),
])
def test_bad_options_name_the_option(spark: SparkSession, module_standalone: StandaloneGateway,
                                     opts: dict[str, str], named: str) -> None:
    """Each a Spark error naming the option (parsed on the driver; the data dir alone, no topic
    needed: `rolled` may not exist, a bad option fails before any topic is looked up)."""
    with pytest.raises(Exception, match=named):
        reader(spark, str(module_standalone.data_dir), **opts).collect()


def test_missing_meta_is_named(spark: SparkSession) -> None:
    with pytest.raises(Exception, match=r"quire\.meta"):
        spark.read.format("quire").option("subscribe", "x").load().collect()


def test_stream_restarts_from_checkpoint(spark: SparkSession, module_standalone: StandaloneGateway,
                                         tmp_path: Path) -> None:
    bs, data_dir = module_standalone.bootstrap, str(module_standalone.data_dir)
    url = meta_url(data_dir)
    create_topic(bs, "streamed", 2)
    produce(bs, "streamed", 2, per_codec=20, value_size=100)
    first = consume_all(bs, "streamed", 2)
    wait_confirmed(url, "streamed", first)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def run_once() -> None:
        df = (spark.readStream.format("quire").option("quire.meta", data_dir).option("subscribe", "streamed")
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "30")
              .option("includeHeaders", "true").load())
        q = (df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
             .trigger(availableNow=True).start())
        q.awaitTermination(120)
        assert q.exception() is None
        batches = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
        assert batches and max(batches) <= 30  # maxOffsetsPerTrigger held

    run_once()
    assert spark_rows(spark.read.parquet(str(out))) == first
    # more records and a new partition, then the same query restarted from its checkpoint
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_partitions([NewPartitions("streamed", 3)])["streamed"].result(30)
    produce(bs, "streamed", 3, per_codec=10, value_size=100)
    everything = consume_all(bs, "streamed", 3)
    assert len(everything) == len(first) + 50
    wait_confirmed(url, "streamed", everything)
    run_once()
    assert spark_rows(spark.read.parquet(str(out))) == everything  # no loss, no duplicates



def test_batch_write_through_gateway(spark: SparkSession, module_standalone: StandaloneGateway) -> None:
    bs = module_standalone.bootstrap
    create_topic(bs, "written", 2)
    rows = [(None if i % 5 == 0 else f"k{i}".encode(), None if i % 9 == 0 else f"v{i}".encode(),
             [("h", f"{i}".encode())] if i % 2 else [], i % 2) for i in range(40)]
    df = spark.createDataFrame(rows, "key binary, value binary, headers array<struct<key:string,value:binary>>, "
                                     "partition int").repartition(2)
    df.write.format("quire").option("kafka.bootstrap.servers", bs).option("topic", "written").mode("append").save()
    got = consume_all(bs, "written", 2)
    assert sorted(((r[0], r[2], r[3], r[4]) for r in got), key=repr) == sorted(
        ((p, k, v, tuple(h)) for k, v, h, p in rows), key=repr)
    # once each (each task's rows are one transaction: its commit marker takes an offset)
    assert sorted(r[0] for r in got) == [0] * 20 + [1] * 20
    with pytest.raises(Exception, match=r"kafka\.bootstrap\.servers"):
        df.write.format("quire").option("topic", "written").mode("append").save()


def test_stream_copies_a_topic_through_write_stream(spark: SparkSession, module_standalone: StandaloneGateway,
                                                    rolled: tuple[str, list[Row]], tmp_path: Path) -> None:
    bs = module_standalone.bootstrap
    create_topic(bs, "copied", 2)
    src = (spark.readStream.format("quire").option("quire.meta", rolled[0]).option("subscribe", "rolled")
           .option("startingOffsets", "earliest").option("includeHeaders", "true").load())
    q = (src.writeStream.format("quire").option("kafka.bootstrap.servers", bs).option("topic", "copied")
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None
    copied = consume_all(bs, "copied", 2)

    def content(rows: list[Row]) -> list[tuple[Any, ...]]:
        return sorted(((r[0], r[2], r[3], r[4]) for r in rows), key=repr)

    assert content(copied) == content(rolled[1])  # same partition, key, value, headers; once each
