"""OffsetCommit (v2-10; v9+ carries a consumer-protocol member's epoch, v10 names topics by id)."""

from __future__ import annotations

import time

from coordinator.group.group import OffsetAndMetadata
from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.group_lookup import errors_by_topic, group_coordinator, partition_exists, topic_names
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse

RTopic = OffsetCommitResponse.OffsetCommitResponseTopic
RPartition = OffsetCommitResponse.OffsetCommitResponsePartition


async def offset_commit(ctx: RequestContext, req: OffsetCommitRequest) -> OffsetCommitResponse:
    v = ctx.api_version
    now = int(time.time() * 1000)
    retention = req.retention_time_ms if 2 <= v <= 4 else -1
    errors: dict[tuple[str, int], int] = {}
    wanted: dict[tuple[str, int], OffsetAndMetadata] = {}
    names = await topic_names(ctx, req.topics) if v >= 10 else {}
    for t in req.topics:
        name = names.get(t.topic_id) if v >= 10 else t.name
        for p in t.partitions:
            if name is None:
                continue  # v10: an unknown topic id
            tp = (name, p.partition_index)
            if not await partition_exists(ctx, name, p.partition_index):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            wanted[tp] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if v >= 6 else -1,
                metadata=p.committed_metadata or "",
                commit_timestamp=now,
                expire_timestamp=now + retention if retention >= 0 else -1,
            )
    if wanted:
        try:
            coord = await group_coordinator(ctx, req.group_id)
            errors.update(
                await coord.commit_offsets(
                    req.group_id, req.generation_id_or_member_epoch, req.member_id, req.group_instance_id, wanted,
                    api_version=v,
                )
            )
        except KafkaApiError as e:
            errors.update(dict.fromkeys(wanted, e.error_code))
    if v >= 10:
        return OffsetCommitResponse(topics=[
            RTopic(topic_id=t.topic_id, partitions=[
                RPartition(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_ID
                           if (name := names.get(t.topic_id)) is None else errors[(name, p.partition_index)])
                for p in t.partitions])
            for t in req.topics
        ])
    return OffsetCommitResponse(
        topics=errors_by_topic(
            req.topics, errors,
            lambda name, parts: RTopic(name=name, partitions=parts),
            lambda index, code: RPartition(partition_index=index, error_code=code),
        )
    )
