"""ListOffsets (by time, earliest, latest, max timestamp) and DeleteRecords through unchanged
clients against a standalone gateway, and a restart keeping offsets, indexes and epochs."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KpTP

from kafka_wire.messages.list_offsets import ListOffsetsRequest
from tests.gateway.test_produce_clients import confluent_consume
from tests.gateway.test_produce_raw import Raw, create_topic
from tests.support.gateway import StandaloneGateway

T0 = 1_700_000_000_000


def produce_timed(
    bs: str, topic: str, n: int, *, step: int = 1000, linger: int = 0, pause_every: int = 0
) -> None:
    """n records, timestamps T0 + step*i; with pause_every, a pause after every so many (so
    that a topic with a short segment.ms rolls ledgers in between)."""
    p = Producer({"bootstrap.servers": bs, "linger.ms": linger, "batch.num.messages": 3})
    for i in range(n):
        p.produce(topic, value=b"%d" % i, timestamp=T0 + step * i, partition=0)
        if pause_every and i % pause_every == pause_every - 1:
            assert p.flush(30) == 0
            time.sleep(0.3)
    assert p.flush(30) == 0


def test_offsets_for_times(module_standalone: StandaloneGateway) -> None:
    bs = module_standalone.bootstrap
    create_topic(bs, "times", **{"segment.ms": "100"})  # several ledgers
    produce_timed(bs, "times", 40, linger=50, pause_every=10)
    c = Consumer({"bootstrap.servers": bs, "group.id": "unused"})
    try:
        res = c.offsets_for_times([TopicPartition("times", 0, T0 + 17_500)], timeout=30)
        assert res[0].offset == 18
        res = c.offsets_for_times([TopicPartition("times", 0, T0)], timeout=30)
        assert res[0].offset == 0
        res = c.offsets_for_times([TopicPartition("times", 0, T0 + 10**9)], timeout=30)
        assert res[0].offset == -1  # after every record: OFFSET_END
        lo, hi = c.get_watermark_offsets(TopicPartition("times", 0), timeout=30)
        assert (lo, hi) == (0, 40)
    finally:
        c.close()
    kc = KafkaConsumer(bootstrap_servers=bs, group_id=None)
    try:
        tp = KpTP("times", 0)
        got = kc.offsets_for_times({tp: T0 + 25_000})[tp]
        assert (got.offset, got.timestamp) == (25, T0 + 25_000)
        assert kc.beginning_offsets([tp])[tp] == 0 and kc.end_offsets([tp])[tp] == 40
    finally:
        kc.close()
    admin = AdminClient({"bootstrap.servers": bs})
    res = admin.list_offsets({TopicPartition("times", 0): OffsetSpec.max_timestamp()})
    info = res[TopicPartition("times", 0)].result(30)
    assert (info.offset, info.timestamp) == (39, T0 + 39_000)
    # every ListOffsets version answers
    raw = Raw(bs)
    try:
        for v in range(1, 12):
            req = ListOffsetsRequest(
                replica_id=-1,
                topics=[
                    ListOffsetsRequest.ListOffsetsTopic(
                        name="times",
                        partitions=[
                            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=T0 + 3000)
                        ],
                    )
                ],
            )
            p = raw.call(req, v).topics[0].partitions[0]
            assert (p.error_code, p.offset) == (0, 3)
    finally:
        raw.close()


def _consume_from_zero(bs: str, topic: str, n: int) -> list[int]:
    got = confluent_consume(bs, topic, n, start=0, **{"auto.offset.reset": "earliest"})
    return [m.offset() for m in got]


def test_delete_records(module_standalone: StandaloneGateway) -> None:
    bs = module_standalone.bootstrap
    create_topic(bs, "delrec", **{"segment.ms": "100"})
    produce_timed(bs, "delrec", 30, pause_every=8)
    admin = AdminClient({"bootstrap.servers": bs})
    fut = admin.delete_records([TopicPartition("delrec", 0, 12)])[TopicPartition("delrec", 0)]
    assert fut.result(30).low_watermark == 12
    # a consumer starting below the log start is reset to it
    assert _consume_from_zero(bs, "delrec", 18) == list(range(12, 30))
    ka = KafkaAdminClient(bootstrap_servers=bs)
    try:
        res: Any = ka.delete_records({KpTP("delrec", 0): 20})
        assert res[KpTP("delrec", 0)]["low_watermark"] == 20
    finally:
        ka.close()
    kc = KafkaConsumer(bootstrap_servers=bs, group_id=None)
    try:
        assert kc.beginning_offsets([KpTP("delrec", 0)])[KpTP("delrec", 0)] == 20
    finally:
        kc.close()
    assert _consume_from_zero(bs, "delrec", 10) == list(range(20, 30))


def test_restart_keeps_offsets_indexes_and_epochs(standalone: StandaloneGateway) -> None:
    bs = standalone.bootstrap
    create_topic(bs, "restart", **{"segment.ms": "100"})
    produce_timed(bs, "restart", 50, linger=20, pause_every=20)
    standalone.stop()
    standalone.start()
    c = Consumer({"bootstrap.servers": bs, "group.id": "unused"})
    try:
        assert c.get_watermark_offsets(TopicPartition("restart", 0), timeout=30) == (0, 50)
        assert c.offsets_for_times([TopicPartition("restart", 0, T0 + 33_000)], timeout=30)[0].offset == 33
    finally:
        c.close()
    produce_timed(bs, "restart", 5)
    # kafka-python: librdkafka sends current leader epoch 0 while Metadata reports -1, and the
    # epoch is 1 after the restart (see the report: Metadata must carry leader epochs)
    kc = KafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False)
    try:
        tp = KpTP("restart", 0)
        kc.assign([tp])
        kc.seek(tp, 0)
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 55 and time.monotonic() < deadline:
            for recs in kc.poll(timeout_ms=500).values():
                got.extend(recs)
    finally:
        kc.close()
    assert [r.offset for r in got] == list(range(55))
    assert [r.value for r in got] == [b"%d" % i for i in range(50)] + [b"%d" % i for i in range(5)]
