"""Magic-v2 record batches: zero-copy views, validation, patching, codecs, a builder."""

from kafka_wire.records.batch import (
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    RecordBatch,
    TimestampType,
    iter_batches,
    last_complete_batch_end,
)
from kafka_wire.records.builder import NewRecord, build_batch
from kafka_wire.records.compression import DEFAULT_MAX_DECOMPRESSED, Compression, compress, decompress
from kafka_wire.records.control import EndTxnMarker, build_end_txn_marker, read_end_txn_marker
from kafka_wire.records.exceptions import InvalidBatch
from kafka_wire.records.produce import validate_produce_records
from kafka_wire.records.record import Header, Record, iter_records

__all__ = [
    "BATCH_OVERHEAD",
    "DEFAULT_MAX_DECOMPRESSED",
    "LOG_OVERHEAD",
    "Compression",
    "EndTxnMarker",
    "Header",
    "InvalidBatch",
    "NewRecord",
    "Record",
    "RecordBatch",
    "TimestampType",
    "build_batch",
    "build_end_txn_marker",
    "compress",
    "decompress",
    "iter_batches",
    "iter_records",
    "last_complete_batch_end",
    "read_end_txn_marker",
    "validate_produce_records",
]
