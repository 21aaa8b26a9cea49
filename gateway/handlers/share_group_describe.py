"""ShareGroupDescribe (v1): members, epochs and assignments of share groups, each asked of its
coordinator shard."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.group_lookup import group_coordinator
from kafka_wire.messages.share_group_describe import ShareGroupDescribeRequest, ShareGroupDescribeResponse

Resp = ShareGroupDescribeResponse
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


async def _one(ctx: RequestContext, group_id: str) -> Resp.DescribedGroup:
    try:
        coord = await group_coordinator(ctx, group_id)
    except KafkaApiError as e:
        return Resp.DescribedGroup(error_code=e.error_code, error_message=e.message, group_id=group_id)
    d = coord.describe_share_group(group_id)
    if d.error:
        return Resp.DescribedGroup(error_code=d.error, error_message=d.message, group_id=group_id)
    names = {tid: name for name, (tid, _) in coord.share_groups[group_id].topics.items()}
    return Resp.DescribedGroup(
        group_id=group_id,
        group_state=d.state,
        group_epoch=d.group_epoch,
        assignment_epoch=d.assignment_epoch,
        assignor_name=d.assignor,
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        members=[
            Resp.Member(
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed),
                assignment=Resp.Assignment(
                    topic_partitions=[
                        Resp.TopicPartitions(topic_id=tid, topic_name=names.get(tid, ""), partitions=sorted(ps))
                        for tid, ps in sorted(m.assignment.items())
                    ]
                ),
            )
            for m in d.members
        ],
    )


async def share_group_describe(ctx: RequestContext, req: ShareGroupDescribeRequest) -> Resp:
    return Resp(groups=[await _one(ctx, gid) for gid in req.group_ids])
