"""Dead-letter topics of share groups (KIP-1191, with Kafka 4.4's config and header names).

A record REJECTed, or reaching the delivery-count limit, in a group whose
`errors.deadletterqueue.topic.name` is set goes ARCHIVING (not ARCHIVED) in its share-partition,
and that state is persisted with the acknowledgement. The owner then drains the ARCHIVING runs
here, in order: read the records, append one dead-letter record per source record to the
topic (headers naming group, topic, partition, offset, delivery count and reason; the key,
value and headers copied too with `errors.deadletterqueue.copy.record.enable`), and only once
that append is durable archive the run and persist. A crash between the two leaves the run
ARCHIVING in the stored state, so the next owner dead-letters it again: a record may reach the
dead-letter topic twice, never zero times.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NamedTuple

from coordinator.share.partition import SharePartition
from kafka_wire.records.builder import NewRecord, build_batch
from kafka_wire.records.record import Header

# Kafka 4.4's ShareGroupDLQManager header names.
H_GROUP = "__dlq.errors.group"
H_TOPIC = "__dlq.errors.topic"
H_PARTITION = "__dlq.errors.partition"
H_OFFSET = "__dlq.errors.offset"
H_DELIVERY_COUNT = "__dlq.errors.delivery.count"
H_MESSAGE = "__dlq.errors.message"

# Dead-letter records per append: bounds the memory one drain step decodes and holds.
MAX_RECORDS_PER_APPEND = 500


class SourceRecord(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


ReadRecords = Callable[[int, int], Awaitable[list[SourceRecord]]]
"""The records stored at offsets first..last (fewer where retention removed them)."""
AppendBatch = Callable[[bytes], Awaitable[None]]
"""Append one batch to the dead-letter topic; returns once it is durable, raises otherwise."""


def dead_letter_records(
    group_id: str, topic: str, partition: int, records: list[SourceRecord], count: int, reason: str, copy: bool,
) -> list[NewRecord]:
    out = []
    for r in records:
        context: list[Header] = [
            (H_GROUP, group_id.encode()), (H_TOPIC, topic.encode()), (H_PARTITION, str(partition).encode()),
            (H_OFFSET, str(r.offset).encode()), (H_DELIVERY_COUNT, str(count).encode()),
            (H_MESSAGE, reason.encode()),
        ]
        if copy:
            out.append(NewRecord(r.key, r.value, (*r.headers, *context), r.timestamp))
        else:
            out.append(NewRecord(None, None, tuple(context)))
    return out


async def drain(
    sp: SharePartition, group_id: str, topic: str, partition: int, read: ReadRecords, append: AppendBatch,
    *, alive: Callable[[], bool] = lambda: True,
) -> int:
    """Dead-letter every ARCHIVING run of `sp` (those that appear meanwhile too), each archived
    and persisted only after its dead-letter append is durable. Returns the records appended.
    Any failure propagates with the run still ARCHIVING (the caller retries later)."""
    appended = 0
    while alive():
        runs = sp.dead_letters()
        if not runs:
            break
        first, last, count, reason = runs[0]
        last = min(last, first + MAX_RECORDS_PER_APPEND - 1)
        records = [r for r in await read(first, last) if first <= r.offset <= last]
        if records:
            copy = sp.config.dlq_copy_record
            await append(build_batch(dead_letter_records(group_id, topic, partition, records, count, reason, copy)))
            appended += len(records)
        sp.archive_dead_letters(first, last)
        await sp.persist()
    return appended
