"""Differential run: what survives log compaction, Apache Kafka vs Quire. The same raw produces
(repeated keys, a tombstone, a keyless record refused with RecordErrors) to a compacted topic
with small cleaning thresholds; sentinel records with fresh keys then keep closing segments
(Kafka rolls a segment only on an append past segment.ms) until the cleaned prefix holds one
record per key and no tombstone. Compared: the keyless produce's answer, the records left at
their offsets, where a fetch positioned inside a cleaned range resumes, the earliest offset."""

from __future__ import annotations

import time
from typing import Any

import pytest

from compat_tests.support.allowlist import Differences
from compat_tests.support.clients import unique
from compat_tests.support.differential import Observations, run_both
from compat_tests.support.targets import Target
from compat_tests.support.wire import Wire

pytestmark = pytest.mark.compat(suite="differential", client="raw protocol")

PRODUCE = (0, 9)
WRITES = [(b"k0", b"a"), (b"k1", b"a"), (b"k2", b"a"), (b"k3", b"a"), (b"k4", b"a"),
          (b"k0", b"b"), (b"k1", b"b"), (b"k2", b"b"), (b"k3", b"b"), (b"k4", b"b"),
          (b"k1", None), (b"k2", b"c")]
CONFIGS = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
           "delete.retention.ms": "0", "min.compaction.lag.ms": "0"}


def _one(key: bytes | None, value: bytes | None) -> bytes:
    from kafka_wire.records.builder import NewRecord, build_batch

    return build_batch([NewRecord(key, value)])


def _long_poll(w: Wire, topic: str, offset: int) -> None:
    """A fetch at the log end that waits up to 200 ms for data (none comes)."""
    from kafka_wire.messages.fetch import FetchRequest as F

    req = F(max_wait_ms=200, min_bytes=1, max_bytes=1 << 16, topics=[F.FetchTopic(topic=topic, partitions=[
        F.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 16)])])
    w.call((1, 12), req)


def _clean(recs: list[tuple[int, bytes | None, bytes | None]]) -> bool:
    keys = [k for _, k, _ in recs]
    return len(keys) == len(set(keys)) and all(v is not None for _, _, v in recs)


def compaction(bootstrap: str) -> Observations:
    from kafka_wire.messages.create_topics import CreateTopicsRequest as CT
    from kafka_wire.messages.produce import ProduceRequest as P

    topic = unique("d-compact")
    out: Observations = {}
    with Wire(bootstrap) as w:
        tiered = [CT.CreatableTopicConfig(name="cleanup.policy", value="compact"),
                  CT.CreatableTopicConfig(name="remote.storage.enable", value="true")]
        (t,) = w.call((19, 7), CT(timeout_ms=30000, topics=[
            CT.CreatableTopic(name=unique("d-tiered"), num_partitions=1, replication_factor=-1, configs=tiered)])).topics
        # the code only: the Kafka peer has tiered storage off, which it reports first
        out["create.compacted_tiered"] = int(t.error_code)
        w.create(topic, 1, CONFIGS)
        req = P(acks=-1, timeout_ms=30000, topic_data=[P.TopicProduceData(name=topic, partition_data=[
            P.PartitionProduceData(index=0, records=_one(None, b"no key"))])])
        part: Any = w.call(PRODUCE, req).responses[0].partition_responses[0]
        msg = part.error_message.replace(topic, "T") if part.error_message else part.error_message
        out["produce.no_key"] = (int(part.error_code), msg,
                                 [(e.batch_index, e.batch_index_error_message.replace(topic, "T"))
                                  for e in part.record_errors])
        for k, v in WRITES:
            assert w.produce(topic, 0, _one(k, v))[0] == 0
        last = len(WRITES) - 1
        deadline = time.monotonic() + 150
        i = 0
        recs = w.records(topic, 0, 0, last)
        while not _clean(recs):  # the event: both cleaner passes (the tombstone's too) are done
            assert time.monotonic() < deadline, recs
            err, end = w.produce(topic, 0, _one(f"sentinel-{i}".encode(), b"s"))
            assert err == 0
            i += 1
            _long_poll(w, topic, end + 1)  # paces the sentinels: at most one per segment.ms or so
            recs = w.records(topic, 0, 0, last)
        out["cleaned"] = recs
        out["fetch_from_1"] = w.records(topic, 0, 1, last)[:1]
        out["fetch_from_6"] = w.records(topic, 0, 6, last)[:1]
        out["fetch_from_10"] = w.records(topic, 0, 10, last)
        out["earliest"] = w.list_offset(topic, 0, -2)[:2]
    return out


def test_compaction(target: Target, apache_kafka: Target, differences: Differences) -> None:
    got, _ = run_both(differences, target, apache_kafka, compaction)
    assert got["cleaned"] == [(5, b"k0", b"b"), (8, b"k3", b"b"), (9, b"k4", b"b"), (11, b"k2", b"c")]
