"""Per-record produce errors (Kafka's RecordErrors): the timestamp checks read records only when
the batch header or the topic's settings demand it; unchanged clients see Kafka's error."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from kafka import errors as Errors

from gateway.errors import KafkaApiError, RecordValidationError
from gateway.partition.record_checks import LONG_MAX, check_keys, check_timestamps
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.produce import ProduceRequest, ProduceResponse
from kafka_wire.records.batch import BATCH_OVERHEAD, RecordBatch
from kafka_wire.records.builder import NewRecord, build_batch
from kafka_wire.records.compression import Compression
from tests.support.gateway import RawKafka, StandaloneGateway

pytestmark = pytest.mark.timeout(120)
HOUR = 3_600_000


def _batch(now: int, *hours: float) -> RecordBatch:
    return RecordBatch(bytearray(build_batch([NewRecord(b"k", b"v", (), now + int(h * HOUR)) for h in hours])))


def test_records_read_only_when_needed() -> None:
    now = int(time.time() * 1000)
    garbled = _batch(now, 0, 0.1)
    mv = garbled.memoryview()
    mv[BATCH_OVERHEAD:] = b"\xff" * (len(mv) - BATCH_OVERHEAD)  # records no parser could read
    # Default before-limit and a header max timestamp in range: the records are not read.
    check_timestamps(garbled, now, LONG_MAX, HOUR)
    # A finite before-limit (or a header beyond the after-limit) makes them be read.
    with pytest.raises(KafkaApiError) as ei:
        check_timestamps(garbled, now, HOUR, HOUR)
    assert ei.value.error_code == ErrorCode.CORRUPT_MESSAGE


def test_each_bad_record_named() -> None:
    now = 1_700_000_000_000
    with pytest.raises(RecordValidationError) as ei:
        check_timestamps(_batch(now, 0, 2, -3, 0.5), now, HOUR, HOUR)
    e = ei.value
    assert (e.error_code, e.message) == (ErrorCode.INVALID_TIMESTAMP,
                                         "One or more records have been rejected due to invalid timestamp")
    low, high = now - HOUR, now + HOUR
    assert e.record_errors == [
        (1, f"Timestamp {now + 2 * HOUR} of message with offset 1 is out of range. The timestamp should be "
            f"within [{low}, {high}]"),
        (2, f"Timestamp {now - 3 * HOUR} of message with offset 2 is out of range. The timestamp should be "
            f"within [{low}, {high}]"),
    ]
    check_timestamps(_batch(now, 0, 0.5, -0.5), now, HOUR, HOUR)  # all in range


def test_produce_answers_record_errors(module_standalone: StandaloneGateway) -> None:
    admin = AdminClient({"bootstrap.servers": module_standalone.bootstrap})
    admin.create_topics([NewTopic("rec-err", 1, 1, config={"message.timestamp.after.max.ms": str(HOUR)})]
                        )["rec-err"].result(15)
    now = int(time.time() * 1000)
    records = bytearray(build_batch([NewRecord(b"k", b"v", (), now + h * HOUR) for h in (0, 5)]))
    req = ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[ProduceRequest.TopicProduceData(
        name="rec-err", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])])
    with RawKafka(module_standalone.bootstrap) as c:
        for _ in range(100):  # the first produce can meet the partition before its owner opened it
            resp = c.request(0, 9, req)
            assert isinstance(resp, ProduceResponse)
            (p,) = resp.responses[0].partition_responses
            if p.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                break
    assert (p.error_code, p.base_offset) == (ErrorCode.INVALID_TIMESTAMP, -1)
    assert p.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in p.record_errors] == [1]
    # An unchanged client gets the error for the record's delivery.
    producer = Producer({"bootstrap.servers": module_standalone.bootstrap, "retries": 0})
    errors: list[KafkaError | None] = []
    producer.produce("rec-err", b"late", timestamp=now + 5 * HOUR, on_delivery=lambda err, _m: errors.append(err))
    assert producer.flush(30) == 0  # its own batch: Kafka fails every record of a refused batch
    producer.produce("rec-err", b"fine", on_delivery=lambda err, _m: errors.append(err))
    assert producer.flush(30) == 0
    assert [e.code() if e else None for e in errors] == [KafkaError.INVALID_TIMESTAMP, None]


def test_kafka_python_producer_sees_invalid_timestamp(module_standalone: StandaloneGateway) -> None:
    admin = AdminClient({"bootstrap.servers": module_standalone.bootstrap})
    admin.create_topics([NewTopic("rec-err-kp", 1, 1, config={"message.timestamp.after.max.ms": str(HOUR)})]
                        )["rec-err-kp"].result(15)
    producer = KafkaProducer(bootstrap_servers=module_standalone.bootstrap, retries=0)
    try:
        now = int(time.time() * 1000)
        with pytest.raises(Errors.InvalidTimestampError):
            producer.send("rec-err-kp", b"late", timestamp_ms=now + 5 * HOUR).get(30)
        assert producer.send("rec-err-kp", b"fine", timestamp_ms=now).get(30).offset == 0
    finally:
        producer.close()


NO_KEY = "Compacted topic cannot accept message without key in topic partition t-0"


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.ZSTD])
def test_compacted_topic_names_each_keyless_record(codec: Compression) -> None:
    b = RecordBatch(bytearray(build_batch([NewRecord(None, b"a"), NewRecord(b"k", b"b"), NewRecord(None, None)],
                                          compression=codec)))
    with pytest.raises(RecordValidationError) as ei:
        check_keys(b, "t-0")
    e = ei.value
    assert e.error_code == ErrorCode.INVALID_RECORD
    assert e.record_errors == [(0, NO_KEY), (2, NO_KEY)]
    assert e.message == ("One or more records have been rejected due to 2 record errors in total, and only "
                         f"showing the first three errors at most: [RecordError(batchIndex=0, message='{NO_KEY}'), "
                         f"RecordError(batchIndex=2, message='{NO_KEY}')]")
    check_keys(RecordBatch(bytearray(build_batch([NewRecord(b"k", None)], compression=codec))), "t-0")  # tombstones

def test_compacted_topic_key_check_of_corrupt_records() -> None:
    b = RecordBatch(bytearray(build_batch([NewRecord(b"k", b"v"), NewRecord(None, b"w")])))
    b.memoryview()[BATCH_OVERHEAD:] = b"\xff" * (b.size - BATCH_OVERHEAD)  # records no parser could read
    with pytest.raises(KafkaApiError) as ei:
        check_keys(b, "t-0")
    assert ei.value.error_code == ErrorCode.CORRUPT_MESSAGE


def test_compacted_topic_refuses_keyless_records_to_clients(module_standalone: StandaloneGateway) -> None:
    admin = AdminClient({"bootstrap.servers": module_standalone.bootstrap})
    admin.create_topics([NewTopic("rec-err-compact", 1, 1, config={"cleanup.policy": "compact"})]
                        )["rec-err-compact"].result(15)
    producer = Producer({"bootstrap.servers": module_standalone.bootstrap, "retries": 0})
    errors: list[KafkaError | None] = []
    producer.produce("rec-err-compact", b"no key", on_delivery=lambda err, _m: errors.append(err))
    assert producer.flush(30) == 0
    producer.produce("rec-err-compact", b"keyed", key=b"k", on_delivery=lambda err, _m: errors.append(err))
    assert producer.flush(30) == 0
    assert [e.code() if e else None for e in errors] == [KafkaError.INVALID_RECORD, None]
    kp = KafkaProducer(bootstrap_servers=module_standalone.bootstrap, retries=0)
    try:
        with pytest.raises(Errors.InvalidRecordError):
            kp.send("rec-err-compact", b"no key").get(30)
    finally:
        kp.close()
    # A compressed batch: each keyless record named by its index, nothing appended.
    records = bytearray(build_batch([NewRecord(b"a", b"1"), NewRecord(None, b"2"), NewRecord(b"c", None),
                                     NewRecord(None, b"4")], compression=Compression.LZ4))
    req = ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[ProduceRequest.TopicProduceData(
        name="rec-err-compact", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])])
    with RawKafka(module_standalone.bootstrap) as c:
        resp = c.request(0, 9, req)
    assert isinstance(resp, ProduceResponse)
    (p,) = resp.responses[0].partition_responses
    assert (p.error_code, p.base_offset) == (ErrorCode.INVALID_RECORD, -1)
    no_key = "Compacted topic cannot accept message without key in topic partition rec-err-compact-0"
    assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [(1, no_key), (3, no_key)]
    assert p.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{no_key}'), "
        f"RecordError(batchIndex=3, message='{no_key}')]")
