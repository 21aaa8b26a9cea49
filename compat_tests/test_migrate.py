"""`quire migrate` from a real Apache Kafka 4.4 into a Quire standalone (started with
--import-enable): topics with every codec, headers, null keys and values, a LogAppendTime topic,
a transactional topic with aborted transactions and a compacted one (offset gaps), consumer
groups with committed offsets. Migrate and verify; every record is at its Kafka offset with its
timestamp (type); a consumer of the migrated group continues at exactly the next record; a
re-run copies only what is new; --follow copies until stopped; configs Quire cannot carry are
named; the CLI runs on the --master given with JSON-lines progress. One Spark session per process
(the shared one; the CLI test's job has its own, in its own process)."""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

import pipeline
from compat_tests.support.clients import create_topic, unique
from compat_tests.support.spark import shared_session
from compat_tests.support.targets import Target
from pipeline.migrate import MigrateError, Options, run
from pipeline.options import meta_url
from tests.pipeline.test_source import wait_confirmed
from tests.support.gateway import StandaloneGateway

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def quire(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneGateway]:
    gw = StandaloneGateway(tmp_path_factory.mktemp("migrate") / "data", extra_args=["--import-enable"])
    gw.start()
    try:
        yield gw
    finally:
        gw.stop()


Row = tuple[Any, ...]


def produce(bootstrap: str, topic: str, n: int, *, codec: str = "none", partitions: int = 2, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                  "batch.num.messages": 7})
    ts = int(time.time() * 1000) - 60_000  # recent: Kafka's retention would delete older records meanwhile
    for i in range(start, start + n):
        key = None if i % 5 == 0 else f"k{i}".encode()
        value = None if i % 7 == 3 else f"value-{i}-".encode() * (1 + i % 4)
        headers = [("h", f"{i}".encode()), ("empty", None)] if i % 3 == 0 else None
        p.produce(topic, value=value, key=key, headers=headers, partition=i % partitions, timestamp=ts + i)
    assert p.flush(30) == 0


def produce_transactions(bootstrap: str, topic: str) -> None:
    """Committed, aborted, committed, aborted (per partition: markers and aborted records are gaps)."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("txn"), "linger.ms": 5})
    p.init_transactions(30)
    for txn in range(4):
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, value=f"txn{txn}-{i}".encode(), key=f"k{i}".encode(), partition=i % 2)
        p.flush(30)
        if txn % 2:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=b"after", partition=0)  # a non-transactional record after the markers
    assert plain.flush(30) == 0
    p.begin_transaction()
    p.produce(topic, value=b"last", partition=1)
    p.commit_transaction(30)


def compacted_with_gaps(bootstrap: str, topic: str) -> None:
    """A compacted topic (one partition) whose cleaner has removed superseded records: keep
    overwriting keys (each append after segment.ms rolls a segment the cleaner may take) until
    the offsets read back skip."""
    create_topic(bootstrap, topic, 1, {"cleanup.policy": "compact", "segment.ms": "100",
                                       "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"})
    p = Producer({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 120
    n = 0
    while True:
        for _ in range(20):
            p.produce(topic, key=f"k{n % 5}".encode(), value=f"v{n}".encode())
            n += 1
        assert p.flush(30) == 0
        offsets = [r[1] for r in read_all(bootstrap, topic, 1)]
        if any(b - a > 1 for a, b in itertools.pairwise(offsets)) or (offsets and offsets[0] > 0):
            break
        assert time.monotonic() < deadline, "Kafka's cleaner did not compact the topic"
    # no more cleaning (a day's compaction lag), so the copy and the verification see one state
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("min.compaction.lag.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    before = read_all(bootstrap, topic, 1)
    while (now := read_all(bootstrap, topic, 1)) != before:  # a pass that was under way ends
        before = now


def read_all(bootstrap: str, topic: str, partitions: int = 2) -> list[Row]:
    """Every record, read_committed, with offset, key, value, headers and (type, timestamp)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("read"), "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Row] = []
        eof: set[int] = set()
        while len(eof) < partitions:
            m = c.poll(15)
            assert m is not None, f"{topic}: no record or EOF in 15 s"
            if m.error() is not None:
                assert m.error().code() == m.error()._PARTITION_EOF, m.error()
                eof.add(m.partition() or 0)
                continue
            out.append((m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()))
        return sorted(out, key=lambda r: (r[0], r[1]))
    finally:
        c.close()


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def first_consumed(bootstrap: str, group: str, topic: str) -> dict[int, Row]:
    """What a consumer of `group` subscribed to `topic` gets first on each partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        got: dict[int, Row] = {}
        for _ in range(60):
            m = c.poll(2)
            if m is None or m.error() is not None:
                continue
            got.setdefault(m.partition() or 0, (m.offset(), m.key(), m.value()))
            if len(got) == 2:
                break
        return got
    finally:
        c.close()


@pytest.mark.compat(suite="migrate", client="quire migrate")
def test_migrate_kafka_topics_groups_then_resume_and_follow(apache_kafka: Target, quire: StandaloneGateway) -> None:
    kafka = apache_kafka.bootstrap
    spark = shared_session()
    prefix = unique("mig")
    topics = [f"{prefix}-{c}" for c in CODECS]
    for t, codec in zip(topics, CODECS):
        create_topic(kafka, t, 2, {"retention.ms": "604800000"} if codec == "zstd" else None)
        produce(kafka, t, 120, codec=codec)
    lat = f"{prefix}-lat"
    create_topic(kafka, lat, 2, {"message.timestamp.type": "LogAppendTime"})
    produce(kafka, lat, 40)
    txn = f"{prefix}-txn"
    create_topic(kafka, txn, 2)
    produce_transactions(kafka, txn)
    compacted = f"{prefix}-compacted"
    compacted_with_gaps(kafka, compacted)
    all_topics = [*topics, lat, txn, compacted]
    expected = {t: read_all(kafka, t, 1 if t == compacted else 2) for t in all_topics}
    gaps = [b[1] - a[1] for a, b in zip(expected[txn], expected[txn][1:]) if a[0] == b[0]]
    assert max(gaps) > 1  # aborted transactions and markers left holes
    group = unique("mig-group")
    commit(kafka, group, {(topics[4], 0): 37, (topics[4], 1): 12, (txn, 0): 23})

    out = io.StringIO()
    rc = run(Options(kafka, quire.bootstrap, pattern=f"{prefix}-.*", verify=True), spark=spark, out=out,
             err=io.StringIO())
    text = out.getvalue()
    assert rc == 0, text
    assert "verify: every partition matches" in text and "MISMATCH" not in text
    assert "not copied yet" not in text  # Quire ends where Kafka does, past the final markers too
    assert f"group {group}: committed offsets of 3 partitions copied" in text
    assert "not carried" not in text, text  # compaction's configs included
    res = ConfigResource(ConfigResource.Type.TOPIC, compacted)
    admin = AdminClient({"bootstrap.servers": quire.bootstrap})
    configs = admin.describe_configs([res])[res].result(timeout=30)
    assert configs["cleanup.policy"].value == "compact"
    for t in all_topics:  # offsets, keys, values, headers, timestamps (and their type)
        assert read_all(quire.bootstrap, t, 1 if t == compacted else 2) == expected[t], t
    assert {r[5][0] for r in expected[lat]} == {2}  # LogAppendTime, kept from Kafka's batches
    data_source_agrees(spark, quire, txn, expected[txn])

    # the migrated group continues at exactly the next record on Quire
    got = first_consumed(quire.bootstrap, group, topics[4])
    by_offset = {(r[0], r[1]): r for r in expected[topics[4]]}
    assert got[0] == (37, by_offset[(0, 37)][2], by_offset[(0, 37)][3])
    assert got[1] == (12, by_offset[(1, 12)][2], by_offset[(1, 12)][3])
    txn_next = min(r[1] for r in expected[txn] if r[0] == 0 and r[1] >= 23)
    assert first_consumed(quire.bootstrap, group, txn)[0][0] == txn_next

    # a re-run copies only what is new
    produce(kafka, topics[0], 30, start=120)
    out = io.StringIO()
    assert run(Options(kafka, quire.bootstrap, topics=[topics[0]], groups=[]), spark=spark, out=out,
               err=io.StringIO()) == 0
    assert "copied 30 records" in out.getvalue(), out.getvalue()
    assert read_all(quire.bootstrap, topics[0]) == read_all(kafka, topics[0])

    # --follow keeps copying until stopped
    stop = threading.Event()
    result: list[int] = []
    follow = threading.Thread(target=lambda: result.append(run(
        Options(kafka, quire.bootstrap, topics=[topics[1]], groups=[], follow=True, verify=True), spark=spark,
        out=io.StringIO(), err=io.StringIO(), stop=stop)))
    follow.start()
    try:
        produce(kafka, topics[1], 25, codec="gzip", start=120)
        want = read_all(kafka, topics[1])
        deadline = time.monotonic() + 120
        while read_all(quire.bootstrap, topics[1]) != want:  # each read is a consumer's round trip
            assert time.monotonic() < deadline, "--follow did not copy the new records"
            assert follow.is_alive(), result
    finally:
        stop.set()
        follow.join(180)
    assert result == [0]


def data_source_agrees(spark: Any, quire: StandaloneGateway, topic: str, expected: list[Row]) -> None:
    """The `quire` data source reads the migrated topic as --verify's consumers did, read_committed
    or not (the copy holds committed records only, aborted ones left as gaps)."""
    pipeline.register(spark)
    data_dir = str(quire.data_dir)
    wait_confirmed(meta_url(data_dir), topic, expected)
    for level in ("read_committed", "read_uncommitted"):
        df = (spark.read.format("quire").option("quire.meta", data_dir).option("subscribe", topic)
              .option("includeHeaders", "true").option("kafka.isolation.level", level).load())
        got = sorted((r.partition, r.offset, r.key and bytes(r.key), r.value and bytes(r.value),
                      tuple((h.key, h.value and bytes(h.value)) for h in r.headers or ()),
                      (r.timestampType + 1, int(r.timestamp.timestamp() * 1000 + 0.5))) for r in df.collect())
        assert got == expected, level


@pytest.mark.compat(suite="migrate", client="quire migrate")
def test_verify_prints_a_table_and_fails_on_a_mismatch(apache_kafka: Target, quire: StandaloneGateway) -> None:
    kafka, spark = apache_kafka.bootstrap, shared_session()
    topic = unique("mig-verify")
    create_topic(kafka, topic, 2)
    produce(kafka, topic, 20)
    out = io.StringIO()
    assert run(Options(kafka, quire.bootstrap, topics=[topic], groups=[], verify=True), spark=spark, out=out,
               err=io.StringIO()) == 0, out.getvalue()
    rows = {line.split()[0]: line.split()[1:] for line in out.getvalue().splitlines()
            if line.startswith(f"{topic}-")}
    assert rows == {f"{topic}-0": ["10", "10", "10", "10", "ok"], f"{topic}-1": ["10", "10", "10", "10", "ok"]}
    # a record written to Quire only: its partition differs (fewer on the source), the run exits 1
    p = Producer({"bootstrap.servers": quire.bootstrap})
    p.produce(topic, value=b"quire only", partition=1)
    assert p.flush(30) == 0
    out = io.StringIO()
    assert run(Options(kafka, quire.bootstrap, topics=[topic], groups=[], verify=True), spark=spark, out=out,
               err=io.StringIO()) == 1, out.getvalue()
    text = out.getvalue()
    assert text.splitlines()[-1] == "verify: mismatch", text
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.startswith(f"{topic}-")}
    assert rows == {f"{topic}-0": ["10", "10", "10", "10", "ok"],
                    f"{topic}-1": ["10", "11", "11", "10", "MISMATCH"]}, text


@pytest.mark.compat(suite="migrate", client="quire migrate")
def test_configs_quire_cannot_carry_are_named_and_the_rest_carried(
        apache_kafka: Target, quire: StandaloneGateway, monkeypatch: pytest.MonkeyPatch) -> None:
    """A config Quire refuses (an empty cleanup.policy, which Kafka 4.4 takes: no deletion nor
    compaction) and one it has no such config for (Quire has every Kafka 4.4 topic config, so one
    is taken out of the driver's table) are each named with why; the topic is created with the rest."""
    from gateway.topics.configs import TOPIC_CONFIGS

    kafka, spark = apache_kafka.bootstrap, shared_session()
    topic = unique("mig-configs")
    create_topic(kafka, topic, 2, {"cleanup.policy": "", "segment.jitter.ms": "7", "retention.ms": "123456789",
                                   "max.message.bytes": "65536"})
    produce(kafka, topic, 10)
    named, other = unique("mig-named"), unique("mig-other")
    commit(kafka, named, {(topic, 0): 2, (topic, 1): 3})
    commit(kafka, other, {(topic, 0): 4})
    monkeypatch.delitem(TOPIC_CONFIGS, "segment.jitter.ms")
    out = io.StringIO()
    assert run(Options(kafka, quire.bootstrap, topics=[topic], groups=[named], verify=True), spark=spark, out=out,
               err=io.StringIO()) == 0, out.getvalue()
    # --groups NAME: that group's offsets only
    assert f"group {named}: committed offsets of 2 partitions copied" in out.getvalue()
    assert other not in out.getvalue()
    notes = sorted(line.strip() for line in out.getvalue().splitlines() if "not carried" in line)
    assert len(notes) == 2, out.getvalue()
    assert notes[0].startswith("config cleanup.policy not carried: cleanup.policy= refused by Quire: "), notes
    assert "cleanup.policy" in notes[0].split("refused by Quire: ")[1]  # Quire's own reason
    assert notes[1] == "config segment.jitter.ms not carried: Quire has no such topic config", notes
    assert f"{topic} (created): 2 partitions, 10 records" in out.getvalue()
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = AdminClient({"bootstrap.servers": quire.bootstrap})  # kept: a handle dropped ends its requests
    got = admin.describe_configs([res])[res].result(timeout=30)
    overridden = {k: e.value for k, e in got.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    assert overridden == {"retention.ms": "123456789", "max.message.bytes": "65536"}, overridden
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(named)])[named].result(30)
    assert sorted((tp.partition, tp.offset) for tp in offsets.topic_partitions) == [(0, 2), (1, 3)]
    listed = admin.list_consumer_groups().result(30)
    assert other not in {g.group_id for g in listed.valid}
    with pytest.raises(MigrateError, match=f"no such consumer group on the source: {re.escape(topic)}-x"):
        run(Options(kafka, quire.bootstrap, topics=[topic], groups=[f"{topic}-x"]), spark=spark, out=io.StringIO(),
            err=io.StringIO())


@pytest.mark.compat(suite="migrate", client="quire migrate")
def test_a_topic_with_another_partition_count_on_quire_is_refused(apache_kafka: Target,
                                                                  quire: StandaloneGateway) -> None:
    """Offsets only mean the same records if partitions do: refused before anything is copied."""
    topic = unique("mig-parts")
    create_topic(apache_kafka.bootstrap, topic, 2)
    create_topic(quire.bootstrap, topic, 1)
    with pytest.raises(MigrateError, match=f"topic {topic} has 1 partitions on Quire, 2 on the source"):
        run(Options(apache_kafka.bootstrap, quire.bootstrap, topics=[topic]), spark=object())


def migrate_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`quire migrate` in its own process (this worktree's code: cwd and PYTHONPATH)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "quire", "migrate", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


@pytest.mark.compat(suite="migrate", client="quire migrate")
def test_cli_runs_on_the_master_given_with_json_progress(apache_kafka: Target, quire: StandaloneGateway) -> None:
    """`quire migrate --master local[1]` as a user runs it (its own process, so its own Spark on
    that master): stderr, not a terminal, is JSON lines only (Spark's own output goes to its
    log file): the master, then per topic the offsets copied growing to the round's total, with
    MB/s and ETA."""
    kafka = apache_kafka.bootstrap
    topic = unique("mig-cli")
    create_topic(kafka, topic, 2)
    p = Producer({"bootstrap.servers": kafka, "linger.ms": 5})
    for i in range(300):  # ~3 MB: a rate that shows in MB/s with two decimals
        p.produce(topic, key=f"k{i}".encode(), value=bytes([i % 256]) * 10_000, partition=i % 2)
    assert p.flush(30) == 0
    proc = migrate_cli("--from", kafka, "--to", quire.bootstrap, "--topics", topic, "--groups", "--master",
                       "local[1]", "--verify", timeout=600)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert proc.stdout.splitlines()[-1] == "verify: every partition matches", proc.stdout
    events = [json.loads(line) for line in proc.stderr.splitlines()]  # every line a JSON object
    spark, *progress = events
    assert spark["event"] == "spark" and spark["master"] == "local[1]", spark
    assert spark["app_id"].startswith("local-") and Path(spark["log"]).is_file(), spark
    assert "log4j" in Path(spark["log"]).read_text()  # Spark's output went there
    Path(spark["log"]).unlink()
    assert progress and {(e["event"], e["topic"], e["total"]) for e in progress} == {("progress", topic, 300)}
    counts = [e["offsets"] for e in progress]
    assert counts == sorted(counts) and counts[-1] == 300, counts  # growing to the total
    last = progress[-1]
    assert last["MBps"] > 0 and last["eta_s"] == 0, last


def test_bad_input_is_one_line(quire: StandaloneGateway, tmp_path: Path) -> None:
    for args, message in (
        (["--from", "nohost", "--to", quire.bootstrap], "--from 'nohost' is not host:port"),
        (["--from", "127.0.0.1:1", "--to", str(tmp_path)], "is neither host:port"),
        (["--from", "127.0.0.1:1", "--to", quire.bootstrap, "--pattern", "("], "is not a regular expression"),
        (["--from", "127.0.0.1:1", "--to", quire.bootstrap, "--master", "nope://x"],
         "--master 'nope://x': Spark did not start: "),
    ):
        proc = migrate_cli(*args)
        assert proc.returncode == 2, proc
        assert proc.stderr.strip().startswith("quire migrate: ") and message in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        if log := re.search(r"\(Spark's log: (\S+)\)$", proc.stderr.strip()):
            Path(log.group(1)).unlink()  # kept for the user, who is told where it is
    with pytest.raises(MigrateError, match="no such topic on the source"):
        run(Options(quire.bootstrap, quire.bootstrap, topics=["nope-" + unique("t")]), spark=object())


def test_to_takes_a_data_dir_or_metadata_store(quire: StandaloneGateway) -> None:
    from pipeline.migrate.job import dest_bootstrap

    assert dest_bootstrap(str(quire.data_dir)) == quire.bootstrap  # its live gateway, from the store
    assert dest_bootstrap(quire.bootstrap) == quire.bootstrap


@pytest.mark.compat(suite="migrate", client="quire migrate")
def test_pipelined_imports_and_a_retried_task_leave_every_record_once_at_its_offset(
        apache_kafka: Target, quire: StandaloneGateway, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch its own import (many in flight per partition, markers' placeholders among
    them); the first attempt of each task dies with imports in flight, and is retried at once
    (as Spark retries a failed task), while the dead attempt's imports may still be landing:
    every record lands once, at its Kafka offset."""
    from pipeline.migrate import copy
    from pipeline.migrate.job import _admin, create_topics, plan_round, source_topics

    kafka = apache_kafka.bootstrap
    topic = unique("mig-pipelined")
    create_topic(kafka, topic, 2)
    produce(kafka, topic, 150)
    produce_transactions(kafka, topic)
    produce(kafka, topic, 150, start=150)
    opts = Options(kafka, quire.bootstrap, topics=[topic], groups=[])
    plans = source_topics(_admin(kafka), opts)
    create_topics(_admin(quire.bootstrap), plans)
    rnd = plan_round(kafka, quire.bootstrap, plans)

    monkeypatch.setattr(copy, "IMPORT_BYTES", 1)
    send, sent = copy._Importer.send, [0]

    def dying_send(self: Any, records: bytearray, end: int, counts: tuple[int, int, int]) -> None:
        sent[0] += 1
        if sent[0] == 6:
            raise ConnectionError("task killed")  # the connection closes with imports in flight
        send(self, records, end, counts)

    monkeypatch.setattr(copy._Importer, "send", dying_send)
    results = []
    for task in rnd.tasks:
        sent[0] = 0
        with pytest.raises(ConnectionError):
            copy.copy_partition(task)
        results.append(copy.copy_partition(task))
    assert sorted(r.end for r in results) == sorted(t.stop for t in rnd.tasks)
    assert all(r.start > 0 for r in results)  # each retry resumed where the dead attempt's imports ended
    assert read_all(quire.bootstrap, topic) == read_all(kafka, topic)
