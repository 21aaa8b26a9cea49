"""DescribeShareGroupOffsets (v0-1), AlterShareGroupOffsets (v0), DeleteShareGroupOffsets (v0),
answered by the group's coordinator from what the partitions' owners publish and, for changes,
by recording resets the owners apply (gateway/share_offsets.py). Alter and Delete need the group
empty (NON_EMPTY_GROUP otherwise), as in Kafka."""

from __future__ import annotations

import uuid

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.group_lookup import group_coordinator
from gateway.share_offsets import (
    DELETED,
    published_partitions,
    read_partition_states,
    read_resets,
    request_resets,
    reset_key,
)
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
)
from kafka_wire.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
)
from kafka_wire.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)

DResp = DescribeShareGroupOffsetsResponse


async def _empty_share_group(ctx: RequestContext, group_id: str) -> tuple[int, str | None]:
    """(error, message) unless the group may have its offsets changed (Alter/Delete)."""
    try:
        coord = await group_coordinator(ctx, group_id)
    except KafkaApiError as e:
        return e.error_code, e.message
    if group_id in coord.groups:
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
    sg = coord.share_groups.get(group_id)
    if sg is not None and sg.members:
        return ErrorCode.NON_EMPTY_GROUP, "The group is not empty."
    return ErrorCode.NONE, None


async def _describe_group(ctx: RequestContext, g: DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup) -> DResp.DescribeShareGroupOffsetsResponseGroup:
    services = ctx.services
    try:
        coord = await group_coordinator(ctx, g.group_id)
    except KafkaApiError as e:
        return DResp.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, error_code=e.error_code,
                                                            error_message=e.message)
    if g.group_id in coord.groups:
        return DResp.DescribeShareGroupOffsetsResponseGroup(
            group_id=g.group_id, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
            error_message=f"Group {g.group_id} is not a share group.")
    resets = await read_resets(services.meta, g.group_id)
    wanted: list[tuple[str, uuid.UUID | None, list[int]]] = []
    if g.topics is None:
        by_topic: dict[uuid.UUID, list[int]] = {}
        for tid, p in await published_partitions(services.meta):
            if resets.get(reset_key(tid, p)) == DELETED:
                continue
            if g.group_id in await read_partition_states(services.meta, tid, p):
                by_topic.setdefault(tid, []).append(p)
        for key, off in resets.items():
            tid_hex, p_text = key.split(":")
            if off != DELETED:
                by_topic.setdefault(uuid.UUID(hex=tid_hex), []).append(int(p_text))
        for tid, ps in by_topic.items():
            info = await services.topics.get_by_id(tid)
            if info is not None:
                wanted.append((info.name, tid, sorted(set(ps))))
        wanted.sort()
    else:
        for t in g.topics:
            info = await services.topics.get(t.topic_name)
            wanted.append((t.topic_name, info.topic_id if info is not None else None, list(t.partitions)))
    topics = []
    for name, topic_id, ps in wanted:
        parts = []
        for p in ps:
            part = DResp.DescribeShareGroupOffsetsResponsePartition(partition_index=p, start_offset=-1,
                                                                   leader_epoch=-1, lag=-1)
            if topic_id is None:
                part.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                part.error_message = "This server does not host this topic-partition."
            else:
                state = (await read_partition_states(services.meta, topic_id, p)).get(g.group_id)
                pending = resets.get(reset_key(topic_id, p))
                if pending is not None:
                    part.start_offset = -1 if pending == DELETED else pending
                elif state is not None:
                    part.start_offset, part.lag = state[0], state[1]
            parts.append(part)
        topics.append(DResp.DescribeShareGroupOffsetsResponseTopic(topic_name=name, topic_id=topic_id or uuid.UUID(int=0),
                                                                   partitions=parts))
    return DResp.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=topics)


async def describe_share_group_offsets(ctx: RequestContext, req: DescribeShareGroupOffsetsRequest) -> DResp:
    return DResp(groups=[await _describe_group(ctx, g) for g in req.groups])


async def alter_share_group_offsets(
    ctx: RequestContext, req: AlterShareGroupOffsetsRequest
) -> AlterShareGroupOffsetsResponse:
    R = AlterShareGroupOffsetsResponse
    err, msg = await _empty_share_group(ctx, req.group_id)
    if err:
        return R(error_code=err, error_message=msg)
    resets: dict[str, int] = {}
    out = []
    for t in req.topics:
        info = await ctx.services.topics.get(t.topic_name)
        parts = []
        for p in t.partitions:
            if info is None or not 0 <= p.partition_index < info.partitions:
                parts.append(R.AlterShareGroupOffsetsResponsePartition(
                    partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message="This server does not host this topic-partition."))
            elif p.start_offset < 0:
                parts.append(R.AlterShareGroupOffsetsResponsePartition(
                    partition_index=p.partition_index, error_code=ErrorCode.INVALID_REQUEST,
                    error_message="The start offset must not be negative."))
            else:
                resets[reset_key(info.topic_id, p.partition_index)] = p.start_offset
                parts.append(R.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index))
        out.append(R.AlterShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=info.topic_id if info is not None else uuid.UUID(int=0), partitions=parts))
    if resets:
        await request_resets(ctx.services.meta, req.group_id, resets)
    return R(responses=out)


async def delete_share_group_offsets(
    ctx: RequestContext, req: DeleteShareGroupOffsetsRequest
) -> DeleteShareGroupOffsetsResponse:
    R = DeleteShareGroupOffsetsResponse
    err, msg = await _empty_share_group(ctx, req.group_id)
    if err:
        return R(error_code=err, error_message=msg)
    resets: dict[str, int] = {}
    out = []
    for t in req.topics:
        info = await ctx.services.topics.get(t.topic_name)
        if info is None:
            out.append(R.DeleteShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                error_message="This server does not host this topic-partition."))
            continue
        for p in range(info.partitions):
            resets[reset_key(info.topic_id, p)] = DELETED
        out.append(R.DeleteShareGroupOffsetsResponseTopic(topic_name=t.topic_name, topic_id=info.topic_id))
    if resets:
        await request_resets(ctx.services.meta, req.group_id, resets)
    return R(responses=out)
