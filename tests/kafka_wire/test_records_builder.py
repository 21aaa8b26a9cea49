"""build_batch round trips for every codec, cross-checked with kafka-python's own reader and
writer, and record parsing that never raises anything but DecodeError."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafka_wire.exceptions import DecodeError
from kafka_wire.records import (
    Compression,
    NewRecord,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    iter_records,
)
from kafka_wire.records.record import encode_record

RECS = [
    NewRecord(
        None if i == 3 else b"key%d" % i,
        None if i == 4 else b"value %d " % i * 50,
        [("a", b"1"), ("b", None)] if i % 2 else (),
        1_700_000_000_000 + 7 * i,
    )
    for i in range(40)
]


@pytest.mark.parametrize("codec", list(Compression))
def test_round_trip(codec: Compression) -> None:
    data = build_batch(
        RECS,
        base_offset=1000,
        compression=codec,
        producer_id=9,
        producer_epoch=1,
        base_sequence=100,
        transactional=True,
        partition_leader_epoch=4,
    )
    b = RecordBatch(data)
    b.validate()
    assert b.compression == codec and b.is_transactional and b.partition_leader_epoch == 4
    assert b.base_offset == 1000 and b.record_count == 40 and b.last_offset == 1039
    got = list(b.records())
    assert [r.offset_delta for r in got] == list(range(40))
    assert [b.base_timestamp + r.timestamp_delta for r in got] == [r.timestamp for r in RECS]
    assert [(r.key, r.value, list(r.headers)) for r in got] == [
        (r.key, r.value, list(r.headers)) for r in RECS
    ]
    assert b.max_timestamp == RECS[-1].timestamp
    assert b.check_records() == 40
    if codec != Compression.NONE:
        assert len(data) < len(build_batch(RECS))

    # kafka-python reads what we build
    theirs = DefaultRecordBatch(data)
    assert theirs.validate_crc()
    assert [(r.offset, r.key, r.value, r.timestamp) for r in theirs] == [
        (1000 + i, r.key, r.value, r.timestamp) for i, r in enumerate(RECS)
    ]


@pytest.mark.parametrize("codec", list(Compression))
def test_reads_kafka_python_batches(codec: Compression) -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
        batch_size=1 << 20,
    )
    for i, r in enumerate(RECS):
        builder.append(
            i, timestamp=r.timestamp, key=r.key, value=r.value, headers=[(k, v or b"") for k, v in r.headers]
        )
    data = bytes(builder.build())
    b = RecordBatch(data)
    b.validate()
    assert [(r.key, r.value) for r in b.records()] == [(r.key, r.value) for r in RECS]


def test_log_append_time_flag() -> None:
    b = RecordBatch(build_batch(RECS[:1], timestamp_type=TimestampType.LOG_APPEND_TIME))
    b.validate()
    assert b.timestamp_type == TimestampType.LOG_APPEND_TIME


def test_empty_batch_refused() -> None:
    with pytest.raises(ValueError):
        build_batch([])


def test_record_encoding_round_trip() -> None:
    raw = encode_record(3, -5, b"k", None, [("h", b"v")]) + encode_record(4, 1 << 40, None, b"", [])
    assert list(iter_records(raw, 2)) == [
        Record(3, -5, b"k", None, (("h", b"v"),)),
        Record(4, 1 << 40, None, b"", ()),
    ]
    for n in (1, 3):  # wrong count: leftover bytes or missing records
        with pytest.raises(DecodeError):
            list(iter_records(raw, n))


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=120), count=st.integers(0, 5))
def test_record_parser_raises_only_decode_error(data: bytes, count: int) -> None:
    try:
        list(iter_records(data, count))
    except DecodeError:
        pass


@settings(max_examples=300, deadline=None)
@given(pos=st.integers(0, 200), value=st.integers(0, 255))
def test_mutated_records_raise_only_decode_error(pos: int, value: int) -> None:
    raw = bytearray(b"".join(encode_record(i, i, b"key", b"value" * 3, [("hk", b"hv")]) for i in range(4)))
    raw[pos % len(raw)] = value
    try:
        list(iter_records(bytes(raw), 4))
    except DecodeError:
        pass


def test_forged_lengths_do_not_allocate() -> None:
    # a header count of 2**30 and a key length of 2**30 inside a 20-byte record
    from kafka_wire.varint import write_varint

    body = b"\x00\x00\x00" + write_varint(1 << 30)
    with pytest.raises(DecodeError):
        list(iter_records(write_varint(len(body)) + body, 1))
    body = b"\x00\x00\x00\x00\x00" + write_varint(1 << 30)
    with pytest.raises(DecodeError):
        list(iter_records(write_varint(len(body)) + body, 1))
