"""Transaction control batches (Kafka's EndTransactionMarker): a magic-v2 batch with the control
and transactional attributes and one record whose key is the ControlRecordType (version int16,
type int16: ABORT 0, COMMIT 1) and whose value is the EndTxnMarker (version int16 0, then the
coordinator epoch int32), as Kafka's MemoryRecords.withEndTransactionMarker writes it."""

from __future__ import annotations

import struct
from typing import NamedTuple

from kafka_wire.records.batch import RecordBatch
from kafka_wire.records.builder import NewRecord, build_batch
from kafka_wire.records.exceptions import InvalidBatch

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class EndTxnMarker(NamedTuple):
    commit: bool
    coordinator_epoch: int


def build_end_txn_marker(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, *, timestamp: int = -1
) -> bytearray:
    """A COMMIT/ABORT control batch at base offset 0 (writable: the log patches offsets in)."""
    key = _KEY.pack(0, COMMIT if commit else ABORT)
    value = _VALUE.pack(0, coordinator_epoch)
    return bytearray(
        build_batch(
            [NewRecord(key, value, (), timestamp)],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=-1,
            transactional=True,
            control=True,
        )
    )


def read_end_txn_marker(batch: RecordBatch) -> EndTxnMarker | None:
    """The marker a control batch holds; None for other control records (unknown types are
    skipped, as Kafka's readers do). Reads the batch's single record: control batches only."""
    for r in batch.records():
        if r.key is None or len(r.key) < _KEY.size:
            raise InvalidBatch("control record without a valid key")
        _, kind = _KEY.unpack_from(r.key)
        if kind not in (ABORT, COMMIT):
            return None
        epoch = -1
        if r.value is not None and len(r.value) >= _VALUE.size:
            epoch = _VALUE.unpack_from(r.value)[1]
        return EndTxnMarker(kind == COMMIT, epoch)
    return None
