"""ConsumerGroupDescribe (v0-1; v1 adds MemberType): a consumer-protocol group as Kafka's
ConsumerGroup.asDescribedGroup renders it."""

from __future__ import annotations

import uuid

from coordinator.group.consumer import Refusal
from coordinator.group.consumer_group import ConsumerGroup
from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.describe_groups import GROUP_OPERATIONS, NO_OPERATIONS
from gateway.handlers.group_lookup import assigned_topics, group_coordinator
from kafka_wire.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)

R = ConsumerGroupDescribeResponse
CONSUMER_MEMBER, CLASSIC_MEMBER = 1, 0  # MemberType: +1 consumer-protocol member, 0 classic member


def _assignment(a: dict[uuid.UUID, frozenset[int]], names: dict[uuid.UUID, str]) -> R.Assignment:
    return R.Assignment(topic_partitions=assigned_topics(
        a, names, lambda t, name, ps: R.TopicPartitions(topic_id=t, topic_name=name, partitions=ps)))


def _described(cg: ConsumerGroup, assignor: str, names: dict[uuid.UUID, str], ops: int) -> R.DescribedGroup:
    return R.DescribedGroup(
        group_id=cg.group_id,
        group_state=cg.state.value,
        group_epoch=cg.group_epoch,
        assignment_epoch=cg.assignment_epoch,
        assignor_name=assignor,
        members=[
            R.Member(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex or "",  # Kafka's member default
                # What the member holds: its assigned partitions and those it has still to revoke.
                assignment=_assignment(m.holds(), names),
                target_assignment=_assignment(cg.targets.get(m.member_id, {}), names),
                member_type=CLASSIC_MEMBER if m.classic is not None else CONSUMER_MEMBER,
            )
            for _, m in sorted(cg.members.items())
        ],
        authorized_operations=ops,
    )


async def consumer_group_describe(
    ctx: RequestContext, req: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    ops = GROUP_OPERATIONS if req.include_authorized_operations else NO_OPERATIONS
    names = {t.topic_id: t.name for t in ctx.services.topics.cached()}
    out = []
    for gid in req.group_ids:
        try:
            coord = await group_coordinator(ctx, gid)
            cg = coord.describe_consumer_group(gid)
        except KafkaApiError as e:  # Kafka fills authorized_operations of described groups only
            out.append(R.DescribedGroup(group_id=gid, error_code=e.error_code))
            continue
        except Refusal as r:
            out.append(R.DescribedGroup(group_id=gid, error_code=r.code, error_message=r.message))
            continue
        out.append(_described(cg, coord.assignor_name(cg), names, ops))
    return R(groups=out)
