"""RecordBatch views: header fields, validation (CRC, sizes, magic, counts), iteration over
concatenated batches, fetch truncation, in-place patching, and the key-length walk."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafka_wire.errors import ErrorCode
from kafka_wire.exceptions import DecodeError
from kafka_wire.records import (
    Compression,
    InvalidBatch,
    NewRecord,
    RecordBatch,
    TimestampType,
    build_batch,
    iter_batches,
    iter_records,
    last_complete_batch_end,
    validate_produce_records,
)
from kafka_wire.records.batch import OFF_ATTRIBUTES, OFF_CRC
from kafka_wire.records.record import keyless_records

RECS = [NewRecord(b"k%d" % i, b"v" * i, [("h", b"%d" % i)], 1_700_000_000_000 + i) for i in range(10)]
BATCH = build_batch(
    RECS, base_offset=0, producer_id=77, producer_epoch=2, base_sequence=5, partition_leader_epoch=-1
)


def legacy(magic: int) -> bytes:
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    b.append(0, timestamp=1000 if magic else None, key=b"k", value=b"v")
    return bytes(b.build())


def test_header_fields() -> None:
    b = RecordBatch(BATCH)
    b.validate()
    assert (b.base_offset, b.magic, b.record_count, b.last_offset_delta) == (0, 2, 10, 9)
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence) == (77, 2, 5, 14)
    assert b.base_timestamp == 1_700_000_000_000 and b.max_timestamp == 1_700_000_000_009
    assert b.size == len(BATCH) and b.end == len(BATCH) and b.batch_length == len(BATCH) - 12
    assert b.compression == Compression.NONE and b.timestamp_type == TimestampType.CREATE_TIME
    assert not b.is_transactional and not b.is_control
    assert b.crc == b.compute_crc()
    assert b.header()[3] == 2


def test_view_at_offset_of_memoryview() -> None:
    buf = memoryview(b"\x00" * 7 + BATCH + b"junk")
    b = RecordBatch(buf, 7)
    b.validate()
    assert b.memoryview().tobytes() == BATCH
    assert [r.key for r in b.records()] == [r.key for r in RECS]


@settings(max_examples=300, deadline=None)
@given(pos=st.integers(OFF_CRC, len(BATCH) - 1), bit=st.integers(0, 7))
def test_any_flipped_bit_in_crc_and_crc_region_fails(pos: int, bit: int) -> None:
    buf = bytearray(BATCH)
    buf[pos] ^= 1 << bit
    with pytest.raises(InvalidBatch) as e:
        RecordBatch(buf).validate()
    assert e.value.error_code == ErrorCode.CORRUPT_MESSAGE


@settings(max_examples=100, deadline=None)
@given(cut=st.integers(0, len(BATCH) - 1))
def test_truncation_is_a_decode_error(cut: int) -> None:
    with pytest.raises(DecodeError):
        RecordBatch(BATCH[:cut]).validate()
    with pytest.raises(DecodeError):
        list(iter_batches(BATCH + BATCH[:cut] if cut else BATCH[:1]))


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200))
def test_garbage_only_raises_decode_error(data: bytes) -> None:
    try:
        for b in iter_batches(data):
            b.validate()
            list(b.records())
    except DecodeError:
        pass


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_refused_with_invalid_record(magic: int) -> None:
    data = legacy(magic)
    assert data[16] == magic
    with pytest.raises(InvalidBatch) as e:
        RecordBatch(data).validate()
    assert e.value.error_code == ErrorCode.INVALID_RECORD
    with pytest.raises(InvalidBatch) as e:
        validate_produce_records(data, 9)
    assert e.value.error_code == ErrorCode.INVALID_RECORD
    with pytest.raises(InvalidBatch) as e:
        list(iter_batches(BATCH + data))
    assert e.value.error_code == ErrorCode.INVALID_RECORD


def test_patching_outside_crc_keeps_it_valid() -> None:
    buf = bytearray(BATCH)
    b = RecordBatch(buf)
    b.set_base_offset(123_456_789_000)
    b.set_partition_leader_epoch(42)
    b.validate()
    assert b.base_offset == 123_456_789_000 and b.partition_leader_epoch == 42
    assert b.last_offset == 123_456_789_009
    assert buf[OFF_ATTRIBUTES:] == BATCH[OFF_ATTRIBUTES:]  # nothing inside the CRC touched


def test_patching_writable_memoryview_slice() -> None:
    region = bytearray(b"xx" + BATCH + BATCH)
    mv = memoryview(region)
    for i, b in enumerate(iter_batches(mv, 2)):
        b.set_base_offset(100 * i)
    assert [b.base_offset for b in iter_batches(region, 2)] == [0, 100]
    with pytest.raises(TypeError):
        RecordBatch(BATCH).set_base_offset(1)  # bytes are read-only


def test_log_append_time_recomputes_crc_and_is_minimal() -> None:
    buf = bytearray(BATCH)
    b = RecordBatch(buf)
    assert b.set_log_append_time(1_800_000_000_000)
    b.validate()
    assert b.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert b.max_timestamp == 1_800_000_000_000
    changed = [i for i in range(len(buf)) if buf[i] != BATCH[i]]
    # only the CRC, the attributes' low byte and the max timestamp may change
    assert all(OFF_CRC <= i < OFF_CRC + 4 or i == OFF_ATTRIBUTES + 1 or 35 <= i < 43 for i in changed)
    before = bytes(buf)
    assert not b.set_log_append_time(1_800_000_000_000)
    assert bytes(buf) == before


def test_count_and_offset_delta_consistency() -> None:
    for field_off, value in ((57, 11), (23, 3), (57, 0), (57, -1)):
        buf = bytearray(BATCH)
        struct.pack_into(">i", buf, field_off, value)
        struct.pack_into(">I", buf, OFF_CRC, RecordBatch(buf).compute_crc())
        with pytest.raises(InvalidBatch) as e:
            RecordBatch(buf).validate()
        assert e.value.error_code == ErrorCode.INVALID_RECORD


def test_client_rules() -> None:
    control = build_batch(
        [NewRecord(b"\x00\x00\x00\x00", b"\x00" * 6, (), 1)],
        control=True,
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    with pytest.raises(InvalidBatch) as e:
        RecordBatch(control).validate()
    assert e.value.error_code == ErrorCode.INVALID_RECORD
    RecordBatch(control).validate(from_client=False)
    no_seq = build_batch(RECS, producer_id=5, producer_epoch=0, base_sequence=-1)
    with pytest.raises(InvalidBatch):
        RecordBatch(no_seq).validate()


def test_unknown_codec_id() -> None:
    buf = bytearray(BATCH)
    buf[OFF_ATTRIBUTES + 1] |= 6
    struct.pack_into(">I", buf, OFF_CRC, RecordBatch(buf).compute_crc())
    with pytest.raises(InvalidBatch) as e:
        RecordBatch(buf).validate()
    assert e.value.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_produce_records_rules() -> None:
    assert validate_produce_records(BATCH, 3).record_count == 10
    for bad in (None, b"", BATCH[:-1], BATCH + BATCH):
        with pytest.raises(InvalidBatch) as e:
            validate_produce_records(bad, 9)
        assert e.value.error_code == ErrorCode.INVALID_RECORD
    z = build_batch(RECS, compression=Compression.ZSTD)
    validate_produce_records(z, 7)
    with pytest.raises(InvalidBatch) as e:
        validate_produce_records(z, 6)
    assert e.value.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_iter_batches_and_fetch_truncation() -> None:
    other = build_batch(RECS[:3], base_offset=10)
    buf = BATCH + other + BATCH
    sizes = [b.size for b in iter_batches(buf)]
    assert sizes == [len(BATCH), len(other), len(BATCH)]
    assert list(iter_batches(b"")) == []
    assert last_complete_batch_end(buf) == len(buf)
    assert last_complete_batch_end(buf[:-1]) == len(BATCH) + len(other)
    assert last_complete_batch_end(buf, len(BATCH) + 5) == len(BATCH)
    assert last_complete_batch_end(buf, 10) == len(BATCH)  # first batch always goes (KIP-74)
    assert last_complete_batch_end(buf, 10, min_one=False) == 0
    assert last_complete_batch_end(buf[:30]) == 0
    with pytest.raises(InvalidBatch):
        last_complete_batch_end(b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\x00" * 20)


_RECORD = st.builds(
    NewRecord,
    key=st.none() | st.binary(max_size=300),
    value=st.none() | st.binary(max_size=300),
    headers=st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3),
    timestamp=st.integers(0, 1 << 45),
)


@settings(max_examples=200, deadline=None)
@given(records=st.lists(_RECORD, min_size=1, max_size=20), codec=st.sampled_from(list(Compression)))
def test_keyless_records_walk_agrees_with_decoding(records: list[NewRecord], codec: Compression) -> None:
    batch = RecordBatch(bytearray(build_batch(records, compression=codec)))
    assert batch.keyless_records() == [i for i, r in enumerate(batch.records()) if r.key is None]
    assert batch.keyless_records() == [i for i, r in enumerate(records) if r.key is None]


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=120), count=st.integers(0, 6))
def test_keyless_records_walk_of_garbage(data: bytes, count: int) -> None:
    """Garbage gives InvalidBatch (CORRUPT_MESSAGE) or, where every record also decodes, the
    same answer as decoding."""
    try:
        keyless = keyless_records(memoryview(data), count)
    except InvalidBatch as e:
        assert e.error_code == ErrorCode.CORRUPT_MESSAGE
        return
    try:
        decoded = [i for i, r in enumerate(iter_records(data, count)) if r.key is None]
    except InvalidBatch:
        return  # the walk reads no further than the key length
    assert keyless == decoded
