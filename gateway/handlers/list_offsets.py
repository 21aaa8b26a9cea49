"""ListOffsets (v1-11): earliest, latest, by timestamp (index, not scan), max timestamp, and
the tiered specials as Kafka 4.x answers them: EARLIEST_LOCAL is the first offset still on
bookies, LATEST_TIERED the last offset offloaded (-1 with epoch -1 unless the topic has
remote.storage.enable). read_committed (isolation_level 1) answers up to the last stable offset:
LATEST is the LSO, and other lookups find nothing at or past it, as Kafka's."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.partition.log import PartitionLog
from gateway.partition.lookup import TopicCache
from kafka_wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6

TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse
ListOffsetsPartition = ListOffsetsRequest.ListOffsetsPartition


READ_COMMITTED = 1


async def lookup(plog: PartitionLog, ts: int, committed: bool = False) -> tuple[int, int, int]:
    """(timestamp, offset, leader epoch) for one ListOffsets query."""
    if ts == LATEST:
        return -1, plog.last_stable_offset if committed else plog.high_watermark, plog.leader_epoch
    found = await _lookup(plog, ts)
    if committed and ts not in (EARLIEST, EARLIEST_LOCAL) and found[1] >= plog.last_stable_offset:
        return -1, -1, -1
    return found


async def _lookup(plog: PartitionLog, ts: int) -> tuple[int, int, int]:
    if ts == EARLIEST:
        start = plog.log_start_offset
        return -1, start, plog.epoch_for_offset(start)
    if ts == EARLIEST_LOCAL:
        start = plog.earliest_local_offset()
        return -1, start, plog.epoch_for_offset(start)
    if ts == LATEST_TIERED:
        if not plog.remote_storage:
            return -1, -1, -1
        off = plog.latest_tiered_offset()
        return -1, off, plog.epoch_for_offset(off) if off >= 0 else -1
    if ts == MAX_TIMESTAMP:
        mts, off = await plog.max_timestamp()
        return mts, off, plog.epoch_for_offset(off) if off >= 0 else -1
    if ts < 0:  # EARLIEST_PENDING_UPLOAD and unknown specials
        return -1, -1, -1
    found = await plog.offset_for_timestamp(ts)
    if found is None:
        return -1, -1, -1
    return found[0], found[1], plog.epoch_for_offset(found[1])


async def _answer(p: ListOffsetsPartition, plog: PartitionLog, committed: bool) -> PartitionResponse:
    plog.check_leader_epoch(p.current_leader_epoch)
    ts, off, epoch = await lookup(plog, p.timestamp, committed)
    return PartitionResponse(partition_index=p.partition_index, error_code=0, timestamp=ts, offset=off,
                             leader_epoch=epoch)


def _failed(p: ListOffsetsPartition, e: KafkaApiError) -> PartitionResponse:
    return PartitionResponse(partition_index=p.partition_index, error_code=int(e.error_code), timestamp=-1,
                             offset=-1, leader_epoch=-1)


async def handle_list_offsets(ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
    committed = req.isolation_level == READ_COMMITTED

    async def answer(p: ListOffsetsPartition, plog: PartitionLog) -> PartitionResponse:
        return await _answer(p, plog, committed)

    return ListOffsetsResponse(topics=await TopicCache(ctx.services.topics, ctx.services.partitions).per_partition(
        req.topics, lambda t: (t.name, t.partitions), lambda p: p.partition_index, answer, _failed,
        lambda t, parts: TopicResponse(name=t.name, partitions=parts)))
