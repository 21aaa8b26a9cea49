"""Fetch (v4-18): stored batches sent as they are (RawResponse, no copy), Kafka's byte limits,
long polling woken by appends, sessionless answers. read_committed (isolation_level 1) stops at
the last stable offset and lists the aborted transactions of the returned range; both levels
report the LSO as Kafka does.

Fetch sessions: we never create one. A full request (session id 0, epoch 0 or -1) gets a full
answer with session id 0, which Kafka clients read as "this broker keeps no session" and keep
sending full requests; an incremental request (any other id/epoch) gets
FETCH_SESSION_ID_NOT_FOUND, after which clients start over with a full one (FetchSession rules).
"""

from __future__ import annotations

import asyncio
import time
import uuid

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.spec import RawResponse
from gateway.metrics import fetch_answered
from gateway.partition.log import PartitionLog
from gateway.partition.lookup import TopicCache
from kafka_wire.errors import ErrorCode
from kafka_wire.hotpath import FetchPartition, FetchTopic, encode_fetch_response
from kafka_wire.messages.fetch import FetchRequest

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
READ_COMMITTED = 1

_Slot = tuple[int, "FetchRequest.FetchPartition", "PartitionLog | None", int]  # topic no, req, log, error


def _error_partition(index: int, code: int) -> FetchPartition:
    return FetchPartition(index, error_code=code, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1)


async def _read_all(
    slots: list[_Slot], topics: list[FetchTopic], max_bytes: int, committed: bool
) -> tuple[int, bool]:
    """One pass over every partition (Kafka's limits); fills `topics`. (bytes, any error)."""
    for t in topics:
        t.partitions = []
    remaining = max_bytes
    min_one = True
    total = 0
    errors = False
    for tno, p, plog, code in slots:
        if plog is None:
            topics[tno].partitions.append(_error_partition(p.partition, code))
            errors = True
            continue
        try:
            plog.check_leader_epoch(p.current_leader_epoch)
            limit = min(p.partition_max_bytes, max(remaining, 0))
            aborted: list[tuple[int, int]] | None = None
            if committed:
                recs, aborted = await plog.read_committed(p.fetch_offset, limit, min_one=min_one)
            else:
                recs = await plog.read(p.fetch_offset, limit, min_one=min_one)
        except KafkaApiError as e:
            topics[tno].partitions.append(_error_partition(p.partition, e.error_code))
            errors = True
            continue
        size = 0
        for r in recs:
            size += len(r)
        if size:
            min_one = False
            remaining -= size
            total += size
        topics[tno].partitions.append(
            FetchPartition(p.partition, high_watermark=plog.high_watermark, last_stable_offset=plog.last_stable_offset,
                           log_start_offset=plog.log_start_offset, aborted_transactions=aborted, records=recs)
        )
    return total, errors


async def handle_fetch(ctx: RequestContext, req: FetchRequest) -> RawResponse:
    version = ctx.api_version
    if req.session_id != 0 or req.session_epoch not in (INITIAL_EPOCH, FINAL_EPOCH):
        body = encode_fetch_response(version, [], error_code=int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND))
        return RawResponse(body)
    deadline = time.monotonic() + max(req.max_wait_ms, 0) / 1000
    cache = TopicCache(ctx.services)
    topics: list[FetchTopic] = []
    slots: list[_Slot] = []
    for t in req.topics:
        key: str | uuid.UUID = t.topic_id if version >= 13 else t.topic
        topics.append(FetchTopic(key))
        for p in t.partitions:
            try:
                _, plog = await cache.log(key, p.partition)
                slots.append((len(topics) - 1, p, plog, 0))
            except KafkaApiError as e:
                slots.append((len(topics) - 1, p, None, e.error_code))
    max_bytes = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
    committed = req.isolation_level == READ_COMMITTED
    total, errors = await _read_all(slots, topics, max_bytes, committed)
    logs = [s[2] for s in slots if s[2] is not None]
    while total < req.min_bytes and not errors and logs:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for plog in logs:
            plog.add_waiter(woken)
        try:
            await asyncio.wait_for(asyncio.shield(woken), remaining)
        except TimeoutError:
            break
        finally:
            for plog in logs:
                plog.remove_waiter(woken)
        total, errors = await _read_all(slots, topics, max_bytes, committed)
    fetch_answered(topics, {tno: plog.topic.name for tno, _, plog, _ in slots if plog is not None})
    return RawResponse(encode_fetch_response(version, topics, session_id=0))
