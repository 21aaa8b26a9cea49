"""`kafka.isolation.level` of the `quire` data source against a real standalone: a topic with
committed and aborted transactions of two interleaved transactional producers (ledgers rolling,
so some aborts come from ledger properties, others from the replayed tail) and an open
transaction at the end. A batch read read_committed returns exactly what a read_committed
confluent-kafka consumer of Quire returns, read_uncommitted what a read_uncommitted one does;
a read_committed stream stops at the LSO until the open transaction commits, then goes on.
One Spark session for the module."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")
confluent_kafka = pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, OffsetSpec  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

import pipeline  # noqa: E402
from compat_tests.support.spark import shared_session  # noqa: E402
from gateway.cluster.inspect import topics as list_topics  # noqa: E402
from kafka_log.txn import P_ABORTED  # noqa: E402
from pipeline.committed import Committed, committed  # noqa: E402
from pipeline.logs import Quire  # noqa: E402
from pipeline.options import meta_url  # noqa: E402
from tests.pipeline.test_source import Row, _latest, create_topic, reader, spark_rows  # noqa: E402
from tests.support.gateway import StandaloneGateway  # noqa: E402
from tests.support.wait import eventually  # noqa: E402

TOPIC = "txns"
PAD = b"x" * 20000  # 1 MiB ledgers roll a few times per partition


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    s = shared_session()
    pipeline.register(s)
    return s


@dataclass
class Txns:
    bootstrap: str
    data_dir: str
    url: str
    open_txn: Any  # the producer whose transaction is still open


def txn_producer(bootstrap: str, tid: str) -> Any:
    # the open transaction stays open for the whole module: no coordinator timeout may abort it
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5,
                  "transaction.timeout.ms": 600_000})
    p.init_transactions(30)
    return p


@pytest.fixture(scope="module")
def txns(module_standalone: StandaloneGateway) -> Iterator[Txns]:
    bs = module_standalone.bootstrap
    create_topic(bs, TOPIC, 2, **{"segment.bytes": str(1 << 20)})
    plain = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    a, b = txn_producer(bs, "txn-a"), txn_producer(bs, "txn-b")
    for i in range(4):
        plain.produce(TOPIC, value=f"plain-{i}".encode(), partition=i % 2)
    assert plain.flush(30) == 0
    for rnd in range(4):  # a commits and b aborts in even rounds, the other way round in odd ones
        a.begin_transaction()
        b.begin_transaction()
        for i in range(30):
            a.produce(TOPIC, key=f"a{rnd}-{i}".encode(), value=PAD, partition=i % 2)
            b.produce(TOPIC, key=f"b{rnd}-{i}".encode(), value=PAD, partition=i % 2)
        a.flush(30)
        b.flush(30)
        (a.commit_transaction if rnd % 2 == 0 else a.abort_transaction)(30)
        (b.abort_transaction if rnd % 2 == 0 else b.commit_transaction)(30)
        plain.produce(TOPIC, value=f"between-{rnd}".encode(), partition=rnd % 2)
        assert plain.flush(30) == 0
    c = txn_producer(bs, "txn-c")
    c.begin_transaction()
    for i in range(6):
        c.produce(TOPIC, key=f"open-{i}".encode(), value=b"open", partition=i % 2)
    c.flush(30)
    for i in range(4):  # past the LSO: read_uncommitted only, until c commits
        plain.produce(TOPIC, value=f"after-open-{i}".encode(), partition=i % 2)
    assert plain.flush(30) == 0
    data_dir = str(module_standalone.data_dir)
    t = Txns(bs, data_dir, meta_url(data_dir), c)
    yield t
    t.open_txn = None  # the producers go before the standalone does (no reconnect noise)
    del a, b, c, plain


def consume(bootstrap: str, isolation: str) -> list[Row]:
    """What a confluent-kafka consumer of Quire gets, from offset 0 to its partitions' ends."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{isolation}", "enable.auto.commit": False,
                  "isolation.level": isolation, "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(2)])
        out: list[Row] = []
        eof: set[int] = set()
        while len(eof) < 2:
            m = c.poll(15)
            assert m is not None, "no record or EOF in 15 s"
            if m.error() is not None:
                assert m.error().code() == m.error()._PARTITION_EOF, m.error()
                eof.add(m.partition() or 0)
                continue
            ts_type, ts = m.timestamp()
            out.append((m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()), ts, ts_type - 1))
        return sorted(out)
    finally:
        c.close()


def list_offsets(bootstrap: str, committed: bool) -> dict[int, int]:
    """The gateway's latest offsets: the LSO (read_committed) or the high watermark."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    got = admin.list_offsets({TopicPartition(TOPIC, p): OffsetSpec.latest() for p in range(2)}, isolation_level=level)
    return {tp.partition: f.result(30).offset for tp, f in got.items()}


def wait_confirmed(t: Txns) -> None:
    """Until the bookies confirm everything the gateway acknowledged (an idle writer's explicit
    LAC follows its last add), so the data source sees the same log as a consumer."""
    hw = list_offsets(t.bootstrap, committed=False)

    async def ok() -> bool:
        got = await _latest(t.url, TOPIC)
        return all(got[p] >= hw[p] for p in hw)

    asyncio.run(eventually(ok, what="confirmed"))


async def _aborts_in_props(url: str) -> int:
    """Ledgers whose properties hold aborted transactions (the persisted index)."""
    async with Quire(url) as q:
        t = {t.name: t for t in await list_topics(q.meta)}[TOPIC]
        n = 0
        for p in range(t.partitions):
            log = await q.open_log((await q.state(t, p)).log)
            assert log is not None
            n += sum(1 for li in log.metadata.ledgers if li.props.get(P_ABORTED))
            await log.close()
        return n


async def _replays(url: str, previous: list[Committed] | None = None) -> list[Committed]:
    async with Quire(url) as q:
        t = {t.name: t for t in await list_topics(q.meta)}[TOPIC]
        return [await committed(q, await q.state(t, p), previous[p] if previous else None)
                for p in range(t.partitions)]


async def _went_on(url: str, before: list[Committed]) -> None:
    """A stream's next trigger goes on with each partition's replay (only new entries read when
    the metadata is the same) to what a replay from scratch finds."""
    keys_before = [c.key for c in before]
    states = [c.replayed for c in before]
    went_on, fresh = await _replays(url, before), await _replays(url)
    for p, (c, f) in enumerate(zip(went_on, fresh)):
        assert c.replayed is not None
        assert c.lso == f.lso == c.replayed.next_offset  # no transaction open any more
        assert list(c.aborted.entries()) == list(f.aborted.entries())
        if c.key == keys_before[p]:
            assert c.replayed is states[p]


def keys(rows: list[Row]) -> set[str]:
    """Transactional records by key, the plain ones (no key) by value."""
    return {(r[2] or r[3] or b"").decode() for r in rows}


def test_batch_read_committed_equals_read_committed_consumer(spark: SparkSession, txns: Txns) -> None:
    wait_confirmed(txns)
    committed = consume(txns.bootstrap, "read_committed")
    got = keys(committed)
    assert {f"a{r}-0" for r in (0, 2)} | {f"b{r}-0" for r in (1, 3)} <= got
    assert not {k for k in got if k.startswith(("a1-", "a3-", "b0-", "b2-", "open-"))}  # aborted, open
    assert asyncio.run(_aborts_in_props(txns.url)) >= 1  # some aborts come from ledger properties
    df = reader(spark, txns.data_dir, subscribe=TOPIC, includeHeaders="true",
                **{"kafka.isolation.level": "read_committed", "quire.sliceBytes": "1"})
    assert df.rdd.getNumPartitions() > 2  # ledgers rolled: slices with and without aborts
    assert spark_rows(df) == committed
    # the bare name too; "latest" is the LSO the gateway lists for read_committed
    lso = list_offsets(txns.bootstrap, committed=True)
    bare = reader(spark, txns.data_dir, subscribe=TOPIC, **{"isolation.level": "READ_COMMITTED"})
    assert bare.count() == len(committed)
    asked = reader(spark, txns.data_dir, subscribe=TOPIC, startingOffsets=f'{{"{TOPIC}":{{"0":-2,"1":-2}}}}',
                   endingOffsets=f'{{"{TOPIC}":{{"0":{lso[0] + 2},"1":-1}}}}',
                   **{"kafka.isolation.level": "read_committed"})
    assert asked.count() == len(committed)  # never past the LSO, even when asked


def test_batch_read_uncommitted_equals_read_uncommitted_consumer(spark: SparkSession, txns: Txns) -> None:
    wait_confirmed(txns)
    everything = consume(txns.bootstrap, "read_uncommitted")
    assert {"a1-0", "b0-0", "open-0"} <= keys(everything)
    df = reader(spark, txns.data_dir, subscribe=TOPIC, includeHeaders="true", **{"quire.sliceBytes": "1"})
    assert spark_rows(df) == everything
    explicit = reader(spark, txns.data_dir, subscribe=TOPIC, includeHeaders="true",
                      **{"kafka.isolation.level": "read_uncommitted"})
    assert spark_rows(explicit) == everything


def test_stream_read_committed_waits_at_the_lso_for_the_open_transaction(
        spark: SparkSession, txns: Txns, tmp_path: Path) -> None:
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def run_once() -> dict[str, dict[str, int]]:
        df = (spark.readStream.format("quire").option("quire.meta", txns.data_dir).option("subscribe", TOPIC)
              .option("startingOffsets", "earliest").option("kafka.isolation.level", "read_committed")
              .option("includeHeaders", "true").load())
        q = (df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
             .trigger(availableNow=True).start())
        q.awaitTermination(120)
        assert q.exception() is None
        ends: dict[str, dict[str, int]] = json.loads(q.lastProgress["sources"][0]["endOffset"])
        return ends

    wait_confirmed(txns)
    before = consume(txns.bootstrap, "read_committed")
    ends = run_once()
    lso = list_offsets(txns.bootstrap, committed=True)
    assert ends == {TOPIC: {str(p): lso[p] for p in range(2)}}  # "latest" is the LSO
    assert lso != list_offsets(txns.bootstrap, committed=False)  # records past the open transaction
    assert spark_rows(spark.read.parquet(str(out))) == before

    replays = asyncio.run(_replays(txns.url))
    states = [c.replayed for c in replays]
    replays = asyncio.run(_replays(txns.url, replays))  # nothing new: the same replays, gone on with
    assert [c.replayed for c in replays] == states and all(s is not None for s in states)
    assert all(c.replayed is s for c, s in zip(replays, states))
    txns.open_txn.commit_transaction(30)
    # the coordinator writes the markers after answering EndTxn: until then the LSO stays
    asyncio.run(eventually(lambda: list_offsets(txns.bootstrap, True) == list_offsets(txns.bootstrap, False),
                           what="markers written"))
    wait_confirmed(txns)
    asyncio.run(_went_on(txns.url, replays))
    after = consume(txns.bootstrap, "read_committed")
    assert {"open-0", "after-open-0"} <= keys(after) and len(after) == len(before) + 10
    ends = run_once()
    assert ends == {TOPIC: {str(p): off for p, off in list_offsets(txns.bootstrap, committed=True).items()}}
    assert spark_rows(spark.read.parquet(str(out))) == after  # went on past it, nothing twice


@pytest.mark.parametrize(("opts", "named"), [
    ({"kafka.isolation.level": "serializable"}, r"kafka\.isolation\.level"),
    ({"isolation.level": "read-committed"}, r"'isolation\.level'"),
    ({"kafka.isolation.level": "read_committed", "isolation.level": "read_uncommitted"}, r"isolation\.level"),
])
def test_bad_isolation_level_names_the_option(spark: SparkSession, txns: Txns, opts: dict[str, str],
                                              named: str) -> None:
    with pytest.raises(Exception, match=named):
        reader(spark, txns.data_dir, subscribe=TOPIC, **opts).collect()
