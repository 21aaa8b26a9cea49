"""Kafka's per-partition checks of a Produce request's records (ProduceRequest.validateRecords
plus the batch validation of LogValidator), in one call for the gateway."""

from __future__ import annotations

import struct

from kafka_wire.errors import ErrorCode
from kafka_wire.records.batch import ATTR_COMPRESSION_MASK, LOG_OVERHEAD, OFF_LENGTH, Buffer, RecordBatch
from kafka_wire.records.compression import Compression
from kafka_wire.records.exceptions import InvalidBatch

_I32 = struct.Struct(">i")


def validate_produce_records(records: Buffer | None, api_version: int) -> RecordBatch:
    """The one validated batch of a partition's produce data, else InvalidBatch with Kafka's
    error code: no batch or more than one -> INVALID_RECORD, v0/v1 -> INVALID_RECORD, zstd
    before Produce v7 -> UNSUPPORTED_COMPRESSION_TYPE, damage -> CORRUPT_MESSAGE."""
    if records is None or len(records) < LOG_OVERHEAD:
        raise InvalidBatch(
            f"Produce requests with version {api_version} must have at least one record batch per partition",
            ErrorCode.INVALID_RECORD,
        )
    batch = RecordBatch(records, 0)
    if _I32.unpack_from(records, OFF_LENGTH)[0] + LOG_OVERHEAD > len(records):
        raise InvalidBatch(
            f"Produce requests with version {api_version} must have at least one record batch per partition",
            ErrorCode.INVALID_RECORD,
        )
    h = batch.validate(from_client=True)
    if len(records) - h[1] - LOG_OVERHEAD >= LOG_OVERHEAD:
        raise InvalidBatch(
            f"Produce requests with version {api_version} are only allowed to contain exactly one "
            "record batch per partition",
            ErrorCode.INVALID_RECORD,
        )
    if api_version < 7 and h[5] & ATTR_COMPRESSION_MASK == Compression.ZSTD:
        raise InvalidBatch(
            f"Produce requests with version {api_version} are not allowed to use ZStandard compression",
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        )
    return batch
