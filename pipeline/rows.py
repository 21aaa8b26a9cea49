"""Spark's Kafka-source row schema, and stored record batches turned into Arrow record batches
(columns built per read of many batches, handed to Spark as Arrow, never as a row per tuple)."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
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
from kafka_wire.records import TimestampType as KafkaTimestampType

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


def to_arrow(
    batches: Iterable[bytes | memoryview], topic: str, partition: int, start: int, end: int, schema: pa.Schema
) -> pa.RecordBatch:
    """The records with offsets in [start, end) of stored batches (control batches skipped,
    as a consumer does), decompressed, in `schema`'s columns."""
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    offsets: list[int] = []
    stamps: list[int] = []
    types: list[int] = []
    headers: list[list[dict[str, object]]] | None = [] if "headers" in schema.names else None
    for data in batches:
        b = RecordBatch(data)
        if b.is_control:
            continue
        base = b.base_offset
        log_append = b.timestamp_type == KafkaTimestampType.LOG_APPEND_TIME
        base_ts, max_ts, ts_type = b.base_timestamp, b.max_timestamp, int(log_append)
        for r in b.records():
            off = base + r.offset_delta
            if off < start or off >= end:
                continue
            keys.append(r.key)
            values.append(r.value)
            offsets.append(off)
            stamps.append(max_ts if log_append else base_ts + r.timestamp_delta)
            types.append(ts_type)
            if headers is not None:
                headers.append([{"key": k, "value": v} for k, v in r.headers])
    n = len(offsets)
    ts_field = schema.field("timestamp").type
    cols: dict[str, pa.Array] = {
        "key": pa.array(keys, pa.binary()),
        "value": pa.array(values, pa.binary()),
        "topic": pa.array([topic] * n, pa.string()),
        "partition": pa.array([partition] * n, pa.int32()),
        "offset": pa.array(offsets, pa.int64()),
        # Kafka's milliseconds as Spark's microseconds
        "timestamp": pa.array([t * 1000 for t in stamps], pa.int64()).cast(ts_field),
        "timestampType": pa.array(types, pa.int32()),
    }
    if headers is not None:
        cols["headers"] = pa.array(headers, schema.field("headers").type)
    return pa.RecordBatch.from_arrays([cols[f.name].cast(f.type) for f in schema], schema=schema)
