"""LeaveGroup (v0-5; batched members from v3)."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.group_lookup import group_coordinator
from kafka_wire.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse

MemberResponse = LeaveGroupResponse.MemberResponse


async def leave_group(ctx: RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
    v = ctx.api_version
    leaving: list[tuple[str, str | None]] = (
        [(m.member_id, m.group_instance_id) for m in req.members] if v >= 3 else [(req.member_id, None)]
    )
    try:
        coord = await group_coordinator(ctx, req.group_id)
        top, errors = await coord.leave_group(req.group_id, leaving)
    except KafkaApiError as e:
        top, errors = e.error_code, []
    if v < 3:
        # One member: its error is the response's error.
        return LeaveGroupResponse(error_code=top or (errors[0] if errors else 0))
    return LeaveGroupResponse(
        error_code=top,
        members=[
            MemberResponse(member_id=m, group_instance_id=inst, error_code=err)
            for (m, inst), err in zip(leaving, errors)
        ],
    )
