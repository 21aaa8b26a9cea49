"""Stored batches to Arrow rows (pipeline/rows.py): the compiled decoder it uses gives exactly
what kafka_wire's reference decoder gives, for every codec, headers, null keys and values,
LogAppendTime, control batches and offset ranges cutting batches."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from kafka_wire.records import (
    Compression,
    NewRecord,
    RecordBatch,
    TimestampType,
    build_batch,
    build_end_txn_marker,
)
from pipeline.rows import arrow_schema, kafka_schema, to_arrow


def reference(batches: list[bytes], start: int, end: int) -> list[dict[str, object]]:
    """The rows a consumer sees, decoded record by record by kafka_wire."""
    rows: list[dict[str, object]] = []
    for data in batches:
        b = RecordBatch(data)
        if b.is_control:
            continue
        append = b.timestamp_type == TimestampType.LOG_APPEND_TIME
        for r in b.records():
            off = b.base_offset + r.offset_delta
            if start <= off < end:
                ts = b.max_timestamp if append else b.base_timestamp + r.timestamp_delta
                rows.append({"key": r.key, "value": r.value, "offset": off, "ts_ms": ts,
                             "timestampType": int(append),
                             "headers": [{"key": k, "value": v} for k, v in r.headers]})
    return rows


def stored() -> list[bytes]:
    out: list[bytes] = []
    base = 0
    for i, codec in enumerate(Compression):
        recs = [NewRecord(None if k == 1 else b"k%d" % k, None if k == 2 else b"v" * (k * 37 + i),
                          (("h", b"x"), ("n", None)) if k % 2 else (), 1_700_000_000_000 + 1000 * i + k)
                for k in range(5)]
        ts_type = TimestampType.LOG_APPEND_TIME if i == 2 else TimestampType.CREATE_TIME
        out.append(build_batch(recs, base_offset=base, compression=codec, timestamp_type=ts_type))
        base += len(recs)
        marker = bytearray(build_end_txn_marker(7, 0, True, 0))
        marker[0:8] = base.to_bytes(8, "big")
        out.append(bytes(marker))
        base += 1
    return out


@pytest.mark.parametrize("start,end", [(0, 1000), (3, 17), (7, 8)])
def test_rows_match_the_reference_decoder(start: int, end: int) -> None:
    batches = stored()
    schema = arrow_schema(kafka_schema(include_headers=True))
    rb = to_arrow([memoryview(b) for b in batches], "t", 3, start, end, schema)
    assert rb.schema == schema
    got = rb.to_pylist()
    want = reference(batches, start, end)
    assert len(got) == len(want) > 0
    for g, w in zip(got, want, strict=True):
        assert (g["key"], g["value"], g["offset"], g["headers"], g["timestampType"]) == (
            w["key"], w["value"], w["offset"], w["headers"], w["timestampType"])
        assert g["topic"] == "t" and g["partition"] == 3
        assert int(g["timestamp"].timestamp() * 1000) == w["ts_ms"]


def test_no_headers_column_unless_asked() -> None:
    rb = to_arrow(stored(), "t", 0, 0, 1000, arrow_schema(kafka_schema(include_headers=False)))
    assert "headers" not in rb.schema.names and rb.num_rows == 5 * len(Compression)
