"""One Spark task of `quire migrate`: copy one partition from Kafka into Quire at its original
offsets, from where the Quire partition ends up to `stop` (the source's last stable offset when
the round was planned).

Batches are copied as the broker stores them (codec, timestamps, timestamp type and record
offsets untouched, no record decoded), read_committed: aborted transactions' batches are left
out, so the offsets they held stay gaps, as compaction's do, and each transaction marker
becomes an empty batch over its offset (see `placeholder`).
Producer ids are cleared (with the transactional flag; the CRC recomputed): they mean nothing in
Quire and would collide with the ids its own producers get."""

from __future__ import annotations

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


def copy_partition(task: PartitionTask) -> PartitionResult:
    t, p = task.topic, task.partition
    fetch_s = import_s = 0.0
    records = nbytes = skipped = 0
    with Connection(task.source) as src, Connection(task.dest) as dst:
        start = pos = dst.list_offset(t, p, LATEST, committed=False)
        pos = max(pos, src.list_offset(t, p, EARLIEST, committed=False))
        out = bytearray()

        def flush() -> None:
            nonlocal import_s
            if out:
                began = time.monotonic()
                dst.import_batches(t, p, out)
                import_s += time.monotonic() - began
                del out[:]

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
                    continue
                at = len(out)
                out += b.memoryview()
                RecordBatch(out, at).clear_producer()
                records += h[12]
                nbytes += h[1] + 12
                if len(out) >= IMPORT_BYTES:
                    flush()
            flush()
        end = dst.list_offset(t, p, LATEST, committed=False)
    return PartitionResult(t, p, start, end, records, nbytes, skipped, fetch_s, import_s)
