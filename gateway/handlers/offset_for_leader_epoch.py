"""OffsetForLeaderEpoch (v2-4): the end offset of a leader epoch from the partition's epoch
history (Kafka's LeaderEpochFileCache.endOffsetFor)."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.partition.lookup import TopicCache
from kafka_wire.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset


async def handle_offset_for_leader_epoch(
    ctx: RequestContext, req: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    cache = TopicCache(ctx.services)
    out = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                _, plog = await cache.log(t.topic, p.partition)
                plog.check_leader_epoch(p.current_leader_epoch)
                epoch, end = plog.end_offset_for_epoch(p.leader_epoch)
            except KafkaApiError as e:
                parts.append(EpochEndOffset(error_code=int(e.error_code), partition=p.partition,
                                            leader_epoch=-1, end_offset=-1))
                continue
            parts.append(EpochEndOffset(error_code=0, partition=p.partition, leader_epoch=epoch, end_offset=end))
        out.append(TopicResult(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(topics=out)
