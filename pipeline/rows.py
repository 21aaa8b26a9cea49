"""Spark's Kafka-source row schema, and stored record batches turned into Arrow record batches
(columns built per read of many batches, handed to Spark as Arrow, never as a row per tuple)."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafka_wire.records import RecordBatch
from kafka_wire.records.batch import (
    ATTR_COMPRESSION_MASK,
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    OFF_ATTRIBUTES,
    OFF_LENGTH,
)

if TYPE_CHECKING:
    from aiokafka.record.default_records import DefaultRecordBatch as _CBatch

_LENGTH = struct.Struct(">i")
HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's KafkaRecordToRowConverter schema (every column nullable, as there)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS))
    return StructType(fields)


def arrow_schema(schema: StructType) -> pa.Schema:
    """What Spark's Python data source worker expects a yielded RecordBatch to be."""
    return to_arrow_schema(schema, timezone="UTC")


def _decompressed(data: bytes | memoryview) -> _CBatch:
    """A compressed batch for aiokafka's compiled record decoder: its records decompressed here
    (kafka_wire's codecs and size bound) behind the same header, the compression bits cleared
    (the CRC is not checked again: bookies hold what was validated)."""
    from aiokafka.record.default_records import DefaultRecordBatch as _CBatch

    b = RecordBatch(data)
    body = b.records_bytes()
    head = bytearray(b.memoryview()[:BATCH_OVERHEAD])
    _LENGTH.pack_into(head, OFF_LENGTH, BATCH_OVERHEAD - LOG_OVERHEAD + len(body))
    head[OFF_ATTRIBUTES + 1] &= ~ATTR_COMPRESSION_MASK & 0xFF
    return _CBatch(bytes(head) + body)


def to_arrow(
    batches: Iterable[bytes | memoryview], topic: str, partition: int, start: int, end: int, schema: pa.Schema
) -> pa.RecordBatch:
    """The records with offsets in [start, end) of stored batches (control batches skipped,
    as a consumer does), decompressed, in `schema`'s columns. Records are decoded by aiokafka's
    compiled decoder (10x the pure-Python one), which also reads the batch headers (kafka_wire's
    RecordBatch only for compressed ones); timestampType, constant per batch, is kept as runs."""
    # Imported here: importing aiokafka loads its whole client (~0.07 s CPU), which Spark's
    # planning workers (schema, partitions) never use.
    from aiokafka.record.default_records import DefaultRecordBatch as _CBatch

    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    offsets: list[int] = []
    stamps: list[int] = []
    headers: list[list[tuple[str, bytes | None]]] | None = [] if "headers" in schema.names else None
    runs: list[tuple[int, int]] = []  # (records so far, timestampType) where the type changes
    add_key, add_value, add_offset, add_stamp = keys.append, values.append, offsets.append, stamps.append
    for data in batches:
        cb = _CBatch(data)
        if cb.is_control_batch:
            continue
        first = cb.base_offset
        last = first + cb.last_offset_delta
        if last < start or first >= end:
            continue
        if cb.compression_type:
            cb = _decompressed(data)
        kind = cb.timestamp_type  # timestamps are the batch's max for LogAppendTime, as Kafka's
        if not runs or runs[-1][1] != kind:
            runs.append((len(offsets), kind))
        recs = list(cb) if start <= first and last < end else [r for r in cb if start <= r.offset < end]
        for r in recs:  # one pass, appends bound to locals: fewer steps than a pass per column
            add_key(r.key)
            add_value(r.value)
            add_offset(r.offset)
            add_stamp(r.timestamp)
        if headers is not None:
            headers += [r.headers for r in recs]
    n = len(offsets)
    ts_field = schema.field("timestamp").type
    if len(runs) <= 1:
        types = pa.repeat(pa.scalar(runs[0][1] if runs else 0, pa.int32()), n)
    else:
        bounds = [at for at, _ in runs[1:]] + [n]
        types = pa.array([k for (at, k), stop in zip(runs, bounds) for _ in range(stop - at)], pa.int32())
    cols: dict[str, pa.Array] = {
        "key": pa.array(keys, pa.binary()),
        "value": pa.array(values, pa.binary()),
        "topic": pa.repeat(pa.scalar(topic, pa.string()), n),
        "partition": pa.repeat(pa.scalar(partition, pa.int32()), n),
        "offset": pa.array(offsets, pa.int64()),
        # Kafka's milliseconds as Spark's microseconds
        "timestamp": pc.multiply(pa.array(stamps, pa.int64()), 1000).cast(ts_field),
        "timestampType": types,
    }
    if headers is not None:
        cols["headers"] = pa.array(headers, schema.field("headers").type)
    return pa.RecordBatch.from_arrays([cols[f.name].cast(f.type) for f in schema], schema=schema)
