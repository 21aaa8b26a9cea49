"""DescribeGroups (v0-6; a missing group is "Dead" before v6, GROUP_ID_NOT_FOUND from v6)."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.group_lookup import group_coordinator
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse

Group = DescribeGroupsResponse.DescribedGroup
Member = DescribeGroupsResponse.DescribedGroupMember
NO_OPERATIONS = -(2**31)  # authorized_operations not requested
# Without ACLs every group operation is allowed: READ(3), DELETE(6), DESCRIBE(8) and, since
# groups have configs, DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11) (Kafka 4.4 answers 3400).
GROUP_OPERATIONS = sum(1 << op for op in (3, 6, 8, 10, 11))


async def _describe(ctx: RequestContext, group_id: str, with_ops: bool) -> Group:
    v = ctx.api_version
    ops = GROUP_OPERATIONS if with_ops else NO_OPERATIONS  # Kafka fills it only in groups without an error
    try:
        d = (await group_coordinator(ctx, group_id)).describe(group_id)
    except KafkaApiError as e:
        return Group(error_code=e.error_code, group_id=group_id, group_state="")
    if d.error == ErrorCode.GROUP_ID_NOT_FOUND:
        if v >= 6:
            return Group(error_code=d.error, error_message=d.message, group_id=group_id, group_state="Dead")
        return Group(error_code=0, group_id=group_id, group_state="Dead", authorized_operations=ops)
    if d.error:
        return Group(error_code=d.error, group_id=group_id, group_state="")
    return Group(
        error_code=0,
        group_id=group_id,
        group_state=d.state,
        protocol_type=d.protocol_type,
        protocol_data=d.protocol_data,
        members=[
            Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id if v >= 4 else None,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata,
                member_assignment=m.assignment,
            )
            for m in d.members
        ],
        authorized_operations=ops,
    )


async def describe_groups(ctx: RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
    with_ops = ctx.api_version >= 3 and req.include_authorized_operations
    return DescribeGroupsResponse(groups=[await _describe(ctx, g, with_ops) for g in req.groups])
