"""OffsetForLeaderEpoch (v2-4): the end offset of a leader epoch from the partition's epoch
history (Kafka's LeaderEpochFileCache.endOffsetFor)."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.partition.log import PartitionLog
from gateway.partition.lookup import TopicCache
from kafka_wire.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset
OffsetForLeaderPartition = OffsetForLeaderEpochRequest.OffsetForLeaderPartition


async def _answer(p: OffsetForLeaderPartition, plog: PartitionLog) -> EpochEndOffset:
    plog.check_leader_epoch(p.current_leader_epoch)
    epoch, end = plog.end_offset_for_epoch(p.leader_epoch)
    return EpochEndOffset(error_code=0, partition=p.partition, leader_epoch=epoch, end_offset=end)


def _failed(p: OffsetForLeaderPartition, e: KafkaApiError) -> EpochEndOffset:
    return EpochEndOffset(error_code=int(e.error_code), partition=p.partition, leader_epoch=-1, end_offset=-1)


async def handle_offset_for_leader_epoch(
    ctx: RequestContext, req: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    return OffsetForLeaderEpochResponse(topics=await TopicCache(ctx.services.topics, ctx.services.partitions).per_partition(
        req.topics, lambda t: (t.topic, t.partitions), lambda p: p.partition, _answer, _failed,
        lambda t, parts: TopicResult(topic=t.topic, partitions=parts)))
