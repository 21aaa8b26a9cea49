"""One Spark task of `quire migrate`: copy one partition from Kafka into Quire at its original
offsets, from where the Quire partition ends up to `stop` (the source's last stable offset when
the round was planned).

Batches are copied as the broker stores them (codec, timestamps, timestamp type and record
offsets untouched, no record decoded), read_committed: aborted transactions' batches are left
out, so the offsets they held stay gaps, as compaction's do, and each transaction marker
becomes an empty batch over its offset (see `placeholder`).
Producer ids are cleared (with the transactional flag; the CRC recomputed): they mean nothing in
Quire and would collide with the ids its own producers get.

Imports are pipelined: up to IMPORT_WINDOW requests in flight on the owner's connection while the
task fetches on, so the owner's quorum writes overlap the task's fetching and sending. Each import
applies only where the one before it ended (gateway/imports.py): once one is refused, every later
one is too, so nothing lands beyond a hole. A task resumes from the partition's end, and
starts again from it if an import finds the log ended elsewhere (a failed attempt's imports still
landing), after its own imports in flight are answered."""

from __future__ import annotations

import collections
import contextlib
import itertools
import struct
import time
from dataclasses import dataclass

from kafka_log.txn import AbortedFilter
from kafka_wire.records import RecordBatch, iter_batches
from kafka_wire.records.batch import (
    ATTR_TIMESTAMP_TYPE,
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    OFF_ATTRIBUTES,
    OFF_CRC,
    OFF_LENGTH,
    OFF_PRODUCER_ID,
    last_complete_batch_end,
)
from pipeline.kafka_client import EARLIEST, LATEST, Connection, KafkaError

FETCH_BYTES = 8 << 20
IMPORT_BYTES = 4 << 20
IMPORT_WINDOW = 4  # imports in flight per partition
RESYNCS = 3  # times a task starts again from the log's end before it fails
OFFSET_OUT_OF_RANGE = 1
_LENGTH, _ATTRS, _CRC = struct.Struct(">i"), struct.Struct(">h"), struct.Struct(">I")
_PRODUCER_COUNT = struct.Struct(">qhii")  # producerId, producerEpoch, baseSequence, recordCount


@dataclass(frozen=True)
class PartitionTask:
    topic: str
    partition: int
    source: str  # host:port of the partition's leader on Kafka
    dest: str  # host:port of the partition's owner on Quire
    stop: int  # copy the batches below this offset (the source's LSO when planned)


@dataclass(frozen=True)
class PartitionResult:
    topic: str
    partition: int
    start: int  # where the Quire partition ended before (the copy resumed there)
    end: int  # where it ends now
    records: int
    bytes: int
    skipped: int  # batches left out: aborted transactions' and markers (these as empty batches)
    fetch_s: float
    import_s: float


def placeholder(b: RecordBatch) -> bytes:
    """An empty batch over a control batch's offsets (its timestamps kept): the copy is of
    committed data only, so a marker has no transaction to close on Quire, yet a log ending in
    one must still end where Kafka's does, or a committed offset just past it would be out of
    range. Consumers skip empty batches (compaction leaves them too)."""
    out = bytearray(b.memoryview()[:BATCH_OVERHEAD])
    _LENGTH.pack_into(out, OFF_LENGTH, BATCH_OVERHEAD - LOG_OVERHEAD)
    _ATTRS.pack_into(out, OFF_ATTRIBUTES, b.attributes & ATTR_TIMESTAMP_TYPE)
    _PRODUCER_COUNT.pack_into(out, OFF_PRODUCER_ID, -1, -1, -1, 0)
    _CRC.pack_into(out, OFF_CRC, RecordBatch(out).compute_crc())
    return bytes(out)


class _EndMoved(Exception):
    """An import was refused: the partition's log did not end where the task expected."""


class _Importer:
    """A partition's imports pipelined on one connection, each after the one before: at most
    IMPORT_WINDOW unanswered. Counts what the imports answered carried; `waited` is the time
    spent blocked on the owner."""

    def __init__(self, conn: Connection, topic: str, partition: int) -> None:
        self.conn, self.topic, self.partition = conn, topic, partition
        self.end = 0  # where the partition's log ends once every import sent has applied
        self.waited = 0.0
        self.records = self.bytes = self.skipped = 0
        self._counts: collections.deque[tuple[int, int, int]] = collections.deque()  # per import unanswered

    def send(self, records: bytearray, end: int, counts: tuple[int, int, int]) -> None:
        began = time.monotonic()
        conn = self.conn
        while conn.unanswered >= IMPORT_WINDOW:
            self._receive()
        conn.send_import(self.topic, self.partition, records, expected_end=self.end)
        self._counts.append(counts)
        self.end = end
        self.waited += time.monotonic() - began

    def drain(self) -> None:
        began = time.monotonic()
        while self.conn.unanswered:
            self._receive()
        self.waited += time.monotonic() - began

    def discard(self) -> None:
        """Wait for every import in flight, whatever its answer."""
        while self.conn.unanswered:
            with contextlib.suppress(KafkaError, _EndMoved):
                self._receive()

    def _receive(self) -> None:
        counts = self._counts.popleft()
        try:
            self.conn.receive_import(self.topic, self.partition)
        except KafkaError as e:
            if e.code == OFFSET_OUT_OF_RANGE:
                raise _EndMoved(str(e)) from e
            raise
        self.records += counts[0]
        self.bytes += counts[1]
        self.skipped += counts[2]


def copy_partition(task: PartitionTask) -> PartitionResult:
    """Copy from where the Quire partition ends. If an import finds that the log ended
    elsewhere (a failed attempt's imports still landing after this one read the end), start
    again from the end read anew once this task's own imports are answered, as a re-run would."""
    fetch_s = 0.0
    with Connection(task.source) as src, Connection(task.dest) as dst:
        importer = _Importer(dst, task.topic, task.partition)
        start = first = dst.list_offset(task.topic, task.partition, LATEST, committed=False)
        for resync in itertools.count():
            try:
                fetch_s += _copy_from(src, importer, task, start)
                break
            except _EndMoved:
                if resync == RESYNCS:
                    raise
                importer.discard()
                start = dst.list_offset(task.topic, task.partition, LATEST, committed=False)
        end = dst.list_offset(task.topic, task.partition, LATEST, committed=False)
    return PartitionResult(task.topic, task.partition, first, end, importer.records, importer.bytes,
                           importer.skipped, fetch_s, importer.waited)


def _copy_from(src: Connection, importer: _Importer, task: PartitionTask, start: int) -> float:
    """Import the source's batches from `start` (where the log ends) up to task.stop; the
    seconds spent fetching."""
    t, p = task.topic, task.partition
    fetch_s = 0.0
    importer.end = start
    pos = max(start, src.list_offset(t, p, EARLIEST, committed=False))
    out = bytearray()
    out_end = start  # the end of the last batch in `out`
    records = nbytes = skipped = 0  # in `out`

    def flush() -> None:
        nonlocal records, nbytes, skipped
        if out:
            importer.send(out, out_end, (records, nbytes, skipped))
            del out[:]
            records = nbytes = skipped = 0

    while pos < task.stop:
        began = time.monotonic()
        try:
            fetched = src.fetch(t, p, pos, FETCH_BYTES)
        except KafkaError as e:
            if e.code != OFFSET_OUT_OF_RANGE:
                raise
            pos = src.list_offset(t, p, EARLIEST, committed=False)  # retention moved the start
            continue
        fetch_s += time.monotonic() - began
        data = fetched.records[: last_complete_batch_end(fetched.records)]
        if not data:
            break  # nothing committed beyond pos (the LSO fell back below `stop`?)
        aborted = AbortedFilter(fetched.aborted)
        for b in iter_batches(data):
            h = b.validate(from_client=False)
            base, last = h[0], h[0] + h[6]
            if base >= task.stop:
                pos = task.stop  # the rest is the next round's
                break
            pos = last + 1
            if base < start:
                continue
            if aborted.skip(b):
                skipped += 1
                if b.is_control:
                    out += placeholder(b)
                    out_end = pos
                continue
            at = len(out)
            out += b.memoryview()
            out_end = pos
            RecordBatch(out, at).clear_producer()
            records += h[12]
            nbytes += h[1] + 12
            if len(out) >= IMPORT_BYTES:
                flush()
        flush()
    importer.drain()
    return fetch_s
