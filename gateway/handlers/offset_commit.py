"""OffsetCommit (v2-10; v9+ carries a consumer-protocol member's epoch, v10 names topics by id)."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.group_lookup import errors_by_topic, group_coordinator, offsets_to_commit, topic_names
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse

RTopic = OffsetCommitResponse.OffsetCommitResponseTopic
RPartition = OffsetCommitResponse.OffsetCommitResponsePartition


async def offset_commit(ctx: RequestContext, req: OffsetCommitRequest) -> OffsetCommitResponse:
    v = ctx.api_version
    names = await topic_names(ctx, req.topics) if v >= 10 else {}
    wanted, errors = await offsets_to_commit(
        ctx, [(names.get(t.topic_id) if v >= 10 else t.name, t.partitions) for t in req.topics],
        leader_epochs=v >= 6, retention_ms=req.retention_time_ms if 2 <= v <= 4 else -1)
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
