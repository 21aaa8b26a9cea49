"""The aborted-transactions index feeding a read_committed reader's filter (AbortedFilter)."""

from __future__ import annotations

from kafka_log.txn import AbortedFilter, AbortedIndex, AbortedTxn
from kafka_wire.records import RecordBatch, build_end_txn_marker
from kafka_wire.records.builder import NewRecord, build_batch

A, B = 7, 9  # producer ids


def data(offset: int, pid: int = -1) -> bytes:
    return build_batch([NewRecord(b"k", f"{offset}".encode())], base_offset=offset, producer_id=pid,
                       producer_epoch=0, base_sequence=0 if pid >= 0 else -1, transactional=pid >= 0)


def marker(offset: int, pid: int, commit: bool) -> bytes:
    b = build_end_txn_marker(pid, 0, commit, 0)
    RecordBatch(b).set_base_offset(offset)
    return bytes(b)


# A aborts [0, 3] (marker 3), B commits [1, 4] (marker 4), A commits [5, 7] (marker 7)
LOG = [data(0, A), data(1, B), data(2, A), marker(3, A, False), marker(4, B, True), data(5, A), data(6),
       marker(7, A, True)]


def kept(start: int, end: int) -> list[int]:
    index = AbortedIndex()
    index.add(1, AbortedTxn(A, 0, 3, 1))
    got = AbortedFilter(index.collect(start, end)).keep(b for b in LOG if RecordBatch(b).base_offset >= start)
    return [RecordBatch(b).base_offset for b in got]


def test_aborted_batches_and_markers_are_dropped() -> None:
    assert kept(0, 8) == [1, 5, 6]


def test_a_read_starting_at_an_abort_marker_keeps_the_next_transaction() -> None:
    # the abort began before the read: its marker comes first, then A's committed transaction
    assert kept(3, 8) == [5, 6]
    assert kept(2, 8) == [5, 6]
