"""Compacted topics with unchanged clients on a standalone: repeated keys and tombstones are
cleaned by the gateway's log cleaner (small topic thresholds, so the test waits for the
cleaned log to appear, not for a duration); consumers from the beginning see the latest value
per key at its original offset, and one positioned inside a cleaned range goes on at the next
offset at or after it."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from coordinator.group.records import OffsetCommitKey, decode_key
from tests.support.gateway import StandaloneFactory

pytestmark = pytest.mark.timeout(180)
TOPIC = "changelog"
# offset -> (key, value): the writes, in order
WRITES = [(b"k0", b"a"), (b"k1", b"a"), (b"k2", b"a"), (b"k3", b"a"), (b"k4", b"a"),
          (b"k0", b"b"), (b"k1", b"b"), (b"k2", b"b"), (b"k3", b"b"), (b"k4", b"b"),
          (b"k1", None), (b"k2", b"c")]
# latest per key; k1's tombstone is gone too (delete.retention.ms=0: kept by the first pass,
# dropped by the next)
CLEANED = [(5, b"k0", b"b"), (8, b"k3", b"b"), (9, b"k4", b"b"), (11, b"k2", b"c")]


def _read(bootstrap: str, start: int, upto: int) -> list[tuple[int, bytes | None, bytes | None]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g{time.monotonic_ns()}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    out: list[tuple[int, bytes | None, bytes | None]] = []
    try:
        c.assign([TopicPartition(TOPIC, 0, start)])
        while True:
            m = c.poll(10)
            assert m is not None, "no end of partition"
            if m.error():
                break  # partition EOF
            out.append((m.offset(), m.key(), m.value()))
            if m.offset() >= upto:
                break
    finally:
        c.close()
    return out


def test_changelog_cleaned_and_read_by_unchanged_clients(standalone_factory: StandaloneFactory) -> None:
    # the cleaner looks again soon after a pass: the tombstone goes once past delete.retention.ms
    bootstrap = standalone_factory(extra_args=["--log-cleaner-backoff-ms", "200"]).bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={
        "cleanup.policy": "compact", "segment.ms": "300", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "0"})])[TOPIC].result(15)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True})
    for k, v in WRITES:
        p.produce(TOPIC, v, key=k)
        p.flush(30)  # a batch per record: cleaned batches keep their offsets
    # ledgers close every segment.ms and are cleaned after each: a read sees some passes done
    deadline = time.monotonic() + 120
    got = _read(bootstrap, 0, len(WRITES) - 1)
    while got != CLEANED:  # the event: the cleaner switched the ledger to its rewrite
        assert time.monotonic() < deadline, got
        got = _read(bootstrap, 0, len(WRITES) - 1)
    # positioned inside cleaned ranges: the next offset at or after
    assert _read(bootstrap, 1, 11)[0] == (5, b"k0", b"b")
    assert _read(bootstrap, 6, 11)[0] == (8, b"k3", b"b")
    assert _read(bootstrap, 10, 11) == [(11, b"k2", b"c")]
    # kafka-python from the beginning
    kc = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000)
    try:
        kc.assign([KpTopicPartition(TOPIC, 0)])
        kc.seek_to_beginning()
        seen = []
        for m in kc:
            seen.append((m.offset, m.key, m.value))
            if m.offset >= 11:
                break
    finally:
        kc.close()
    assert seen == CLEANED
    # new writes after cleaning continue at the log end
    p.produce(TOPIC, b"d", key=b"k0")
    p.flush(30)
    assert _read(bootstrap, 11, 12) == [(11, b"k2", b"c"), (12, b"k0", b"d")]


def _commit_records(bootstrap: str, group: str, topic: str) -> int:
    """OffsetCommit records of (group, topic-0) in __consumer_offsets, from its start to its end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader{time.monotonic_ns()}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    n = 0
    try:
        parts = c.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"].partitions
        c.assign([TopicPartition("__consumer_offsets", p, 0) for p in parts])
        eof: set[int] = set()
        while len(eof) < len(parts):
            m = c.poll(10)
            assert m is not None, "no end of partition"
            if m.error():
                eof.add(m.partition())
                continue
            k = decode_key(m.key())
            if isinstance(k, OffsetCommitKey) and (k.group, k.topic, k.partition) == (group, topic, 0):
                n += 1
    finally:
        c.close()
    return n


def test_consumer_offsets_compacted_and_replayed_after_restart(standalone_factory: StandaloneFactory) -> None:
    # every topic's ledgers roll fast and are cleaned at once (broker defaults), the offsets topic too
    gw = standalone_factory(extra_args=["--log-roll-ms", "300", "--log-cleaner-min-cleanable-ratio", "0.01"])
    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(15)
    c = Consumer({"bootstrap.servers": gw.bootstrap, "group.id": "g", "enable.auto.commit": False})
    try:
        for i in range(1, 41):
            c.commit(offsets=[TopicPartition("orders", 0, i)], asynchronous=False)
    finally:
        c.close()
    assert _commit_records(gw.bootstrap, "g", "orders") >= 1
    deadline = time.monotonic() + 120
    while _commit_records(gw.bootstrap, "g", "orders") > 1:  # the event: the commits were cleaned
        assert time.monotonic() < deadline
    gw.stop()
    gw.start()  # the coordinator replays the compacted log
    c = Consumer({"bootstrap.servers": gw.bootstrap, "group.id": "g", "enable.auto.commit": False})
    try:
        assert c.committed([TopicPartition("orders", 0)], timeout=30)[0].offset == 40
    finally:
        c.close()
