"""The `quire` sink's exactly-once guarantee per run for read_committed readers: a task attempt
that fails mid-write is aborted and its retry writes every row once; a retry of a task whose
earlier attempt committed writes nothing; through Spark, with real task retries (in a child
process, see sink_retry_job), the topic holds each row once for read_committed readers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import Row
from pyspark.sql.types import BinaryType, StructField, StructType

import pipeline.sink as sink
from tests.pipeline.sink_retry_job import PAD
from tests.pipeline.test_source import create_topic
from tests.support.gateway import StandaloneGateway

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])


def read(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[tuple[bytes, bytes]]:
    """Every (key, value) a consumer with `isolation` reads, up to each partition's end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}-{isolation}",
                  "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[tuple[bytes, bytes]] = []
        at_end: set[int] = set()
        while len(at_end) < partitions:
            m = c.poll(30)
            assert m is not None, "consumer got nothing"
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                at_end.add(m.partition())
                continue
            out.append((m.key(), m.value()))
        return out
    finally:
        c.close()


class FakeTask:
    def __init__(self, partition: int, attempt: int) -> None:
        self.partition, self.attempt = partition, attempt

    def partitionId(self) -> int:
        return self.partition

    def attemptNumber(self) -> int:
        return self.attempt


def attempt(monkeypatch: pytest.MonkeyPatch, writer: sink.QuireWriter, attempt_no: int, rows: Iterator[Row]) -> Any:
    import pyspark

    monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda: FakeTask(0, attempt_no)))
    return writer.write(rows)


def rows(n: int) -> list[Row]:
    return [Row(key=f"k{i}".encode(), value=f"v{i}".encode()) for i in range(n)]


def groups(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return {g.group_id for g in admin.list_consumer_groups(request_timeout=30).result().valid}


def test_a_retry_after_a_commit_writes_nothing(module_standalone: StandaloneGateway,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    bs = module_standalone.bootstrap
    create_topic(bs, "sink-twice", 2)
    writer = sink.QuireWriter({"kafka.bootstrap.servers": bs, "topic": "sink-twice"}, SCHEMA)
    data = rows(30)
    first = attempt(monkeypatch, writer, 0, iter(data))
    second = attempt(monkeypatch, writer, 1, iter(data))  # e.g. attempt 0 failed after its commit
    assert first.group == second.group == f"quire-sink-{writer.run}-0"
    expected = sorted((r.key, r.value) for r in data)
    assert sorted(read(bs, "sink-twice", 2, "read_committed")) == expected
    assert sorted(read(bs, "sink-twice", 2, "read_uncommitted")) == expected  # nothing was even produced
    assert first.group in groups(bs)
    writer.commit([first, None])  # the driver deletes the job's marker groups
    assert first.group not in groups(bs)


def test_an_attempt_that_dies_mid_write_is_aborted(module_standalone: StandaloneGateway,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    bs = module_standalone.bootstrap
    create_topic(bs, "sink-died", 2)
    writer = sink.QuireWriter({"kafka.bootstrap.servers": bs, "topic": "sink-died", "kafka.linger.ms": "1"}, SCHEMA)
    data = rows(40)

    def dies_after(n: int) -> Iterator[Row]:
        yield from data[:n]
        # Once the rows are in the log (uncommitted), as a task killed mid-write leaves them.
        while len(read(bs, "sink-died", 2, "read_uncommitted")) < n:
            pass
        raise RuntimeError("task killed")

    with pytest.raises(RuntimeError, match="task killed"):
        attempt(monkeypatch, writer, 0, dies_after(25))
    done = attempt(monkeypatch, writer, 1, iter(data))
    expected = sorted((r.key, r.value) for r in data)
    assert sorted(read(bs, "sink-died", 2, "read_committed")) == expected
    # the aborted attempt's rows are in the log: read_uncommitted readers see them too
    assert sorted(read(bs, "sink-died", 2, "read_uncommitted")) == sorted(expected + [(r.key, r.value) for r in data[:25]])
    writer.abort([done])
    assert not {g for g in groups(bs) if g.startswith(f"quire-sink-{writer.run}-")}


def test_a_retry_after_a_truncated_commit_writes_the_rest(module_standalone: StandaloneGateway,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark ends a writer's input cleanly when the task fails upstream of it (a UDF raising):
    that attempt commits a prefix; the retry writes only the rows after it, and refuses an input
    whose prefix differs from what was committed."""
    bs = module_standalone.bootstrap
    create_topic(bs, "sink-truncated", 2)
    writer = sink.QuireWriter({"kafka.bootstrap.servers": bs, "topic": "sink-truncated"}, SCHEMA)
    data = rows(40)
    attempt(monkeypatch, writer, 0, iter(data[:25]))
    with pytest.raises(RuntimeError, match="input differs"):
        attempt(monkeypatch, writer, 1, iter(data[1:]))
    attempt(monkeypatch, writer, 2, iter(data))
    expected = sorted((r.key, r.value) for r in data)
    assert sorted(read(bs, "sink-truncated", 2, "read_committed")) == expected
    assert sorted(read(bs, "sink-truncated", 2, "read_uncommitted")) == expected


def test_spark_task_retries_leave_no_duplicates(module_standalone: StandaloneGateway) -> None:
    bs, n = module_standalone.bootstrap, 4000
    create_topic(bs, "sink-retried", 2)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    job = subprocess.run([sys.executable, "-m", "tests.pipeline.sink_retry_job", bs, "sink-retried", str(n)],
                         env=env, capture_output=True, text=True, timeout=600)
    assert job.returncode == 0, job.stderr[-4000:]
    # both first attempts failed; their writers had committed the rows they got (Spark ends a
    # writer's input cleanly when the task fails upstream of it): an at-least-once sink duplicates
    # those rows, a sink that skips a task whose earlier attempt committed loses the rest
    assert set(re.findall(r"injected failure of the first attempt at row (\d+)", job.stderr)) == {"1500", "3500"}
    committed = read(bs, "sink-retried", 2, "read_committed")
    keys = [k for k, _ in committed]
    assert len(keys) == n and len(set(keys)) == n
    assert sorted(committed) == sorted((str(i).encode(), f"v{i}".encode().ljust(PAD, b".")) for i in range(n))
