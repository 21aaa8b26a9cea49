"""ShareGroupDescribe (v1): members, epochs and assignments of share groups, each asked of its
coordinator shard."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.describe_groups import GROUP_OPERATIONS, NO_OPERATIONS
from gateway.handlers.group_lookup import assigned_topics, group_coordinator
from kafka_wire.messages.share_group_describe import ShareGroupDescribeRequest, ShareGroupDescribeResponse

Resp = ShareGroupDescribeResponse


async def _one(ctx: RequestContext, group_id: str, ops: int) -> Resp.DescribedGroup:
    try:
        coord = await group_coordinator(ctx, group_id)
    except KafkaApiError as e:
        return Resp.DescribedGroup(error_code=e.error_code, error_message=e.message, group_id=group_id)
    d = coord.describe_share_group(group_id)
    if d.error:
        return Resp.DescribedGroup(error_code=d.error, error_message=d.message, group_id=group_id)
    names = {t.topic_id: t.name for t in ctx.services.topics.cached()}
    return Resp.DescribedGroup(
        group_id=group_id,
        group_state=d.state,
        group_epoch=d.group_epoch,
        assignment_epoch=d.assignment_epoch,
        assignor_name=d.assignor,
        authorized_operations=ops,
        members=[
            Resp.Member(
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed),
                assignment=Resp.Assignment(topic_partitions=assigned_topics(
                    m.assignment, names,
                    lambda t, name, ps: Resp.TopicPartitions(topic_id=t, topic_name=name, partitions=ps))),
            )
            for m in d.members
        ],
    )


async def share_group_describe(ctx: RequestContext, req: ShareGroupDescribeRequest) -> Resp:
    # Kafka fills authorized_operations of the groups it describes only when asked
    ops = GROUP_OPERATIONS if req.include_authorized_operations else NO_OPERATIONS
    return Resp(groups=[await _one(ctx, gid, ops) for gid in req.group_ids])
