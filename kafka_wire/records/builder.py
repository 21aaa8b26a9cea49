"""Building magic-v2 record batches (tests, internal logs, control batches)."""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from typing import NamedTuple

from crc32c import crc32c

from kafka_wire.records.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    OFF_ATTRIBUTES,
    OFF_CRC,
    RecordBatch,
    TimestampType,
)
from kafka_wire.records.compression import Compression, compress
from kafka_wire.records.record import Header, Record, encode_record

_HEAD = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_REST = struct.Struct(">hiqqqhii")  # attributes .. recordCount


class NewRecord(NamedTuple):
    """A record to build: `timestamp` is absolute epoch ms (-1: the build time)."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[Header] = ()
    timestamp: int = -1


def build_batch(
    records: Sequence[NewRecord],
    *,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One v2 batch holding `records` at dense offset deltas 0..n-1. The base timestamp is the
    first record's, as Kafka's builder does."""
    if not records:
        raise ValueError("a batch needs at least one record")
    now = int(time.time() * 1000)
    stamps = [r.timestamp if r.timestamp >= 0 else now for r in records]
    base_ts = stamps[0]
    body = b"".join(
        encode_record(i, ts - base_ts, r.key, r.value, r.headers)
        for i, (r, ts) in enumerate(zip(records, stamps, strict=True))
    )
    if compression != Compression.NONE:
        body = compress(compression, body)
    attrs = int(compression)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attrs |= ATTR_TIMESTAMP_TYPE
    if transactional:
        attrs |= ATTR_TRANSACTIONAL
    if control:
        attrs |= ATTR_CONTROL
    out = bytearray(BATCH_OVERHEAD + len(body))
    _HEAD.pack_into(out, 0, base_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch, 2)
    _REST.pack_into(
        out,
        OFF_ATTRIBUTES,
        attrs,
        len(records) - 1,
        base_ts,
        max(stamps),
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    out[BATCH_OVERHEAD:] = body
    struct.pack_into(">I", out, OFF_CRC, crc32c(memoryview(out)[OFF_ATTRIBUTES:]))
    return bytes(out)


def rebuild_batch(batch: RecordBatch, keep: Sequence[Record], *, delete_horizon_ms: int | None = None) -> bytes:
    """`batch` holding only the records `keep` (a subset of its own, in order), as Kafka's log
    cleaner rewrites one: the header's base offset, lastOffsetDelta (so the next offset), base
    and max timestamps, producer fields, leader epoch and attributes stay; each record keeps its
    offset and timestamp deltas, so offsets stay where they were (gaps stay gaps). No record
    left: Kafka's empty batch header (zero records, uncompressed), which clients step over.
    With `delete_horizon_ms` (KIP-534): the batch's delete horizon, carried as Kafka does, in
    the base timestamp with the delete-horizon attribute; record timestamps stay what they were."""
    h = batch.header()
    attrs = h[5] & 0xFFFF
    base_ts = h[7]
    shift = 0
    if delete_horizon_ms is not None:
        attrs |= ATTR_DELETE_HORIZON
        base_ts, shift = delete_horizon_ms, h[7] - delete_horizon_ms
    body = b"".join(encode_record(r.offset_delta, r.timestamp_delta + shift, r.key, r.value, r.headers)
                    for r in keep)
    codec = Compression(attrs & ATTR_COMPRESSION_MASK)
    if not keep:
        attrs &= ~ATTR_COMPRESSION_MASK
    elif codec != Compression.NONE:
        body = compress(codec, body)
    out = bytearray(BATCH_OVERHEAD + len(body))
    _HEAD.pack_into(out, 0, h[0], len(out) - LOG_OVERHEAD, h[2], 2)
    _REST.pack_into(out, OFF_ATTRIBUTES, attrs, h[6], base_ts, h[8], h[9], h[10], h[11], len(keep))
    out[BATCH_OVERHEAD:] = body
    struct.pack_into(">I", out, OFF_CRC, crc32c(memoryview(out)[OFF_ATTRIBUTES:]))
    return bytes(out)
