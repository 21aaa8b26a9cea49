"""JoinGroup (v0-9)."""

from __future__ import annotations

from coordinator.group.coordinator import JoinRequest
from coordinator.group.group import JoinResult
from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.group_lookup import client_host, group_coordinator
from kafka_wire.messages.join_group import JoinGroupRequest, JoinGroupResponse

Member = JoinGroupResponse.JoinGroupResponseMember


async def join_group(ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
    v = ctx.api_version
    try:
        coord = await group_coordinator(ctx, req.group_id)
        result = await coord.join(
            JoinRequest(
                req.group_id,
                req.member_id,
                req.group_instance_id,
                ctx.client_id or "",
                client_host(ctx),
                req.session_timeout_ms,
                req.rebalance_timeout_ms if v >= 1 else -1,
                req.protocol_type,
                [(p.name, bytes(p.metadata)) for p in req.protocols],
                require_known_member_id=v >= 4,
                supports_skip_assignment=v >= 9,
            )
        )
    except KafkaApiError as e:
        result = JoinResult(e.error_code, member_id="")
    return JoinGroupResponse(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type if v >= 7 else None,
        protocol_name=result.protocol_name if v >= 7 else (result.protocol_name or ""),
        leader=result.leader,
        skip_assignment=result.skip_assignment if v >= 9 else False,
        member_id=result.member_id,
        members=[
            Member(member_id=m, group_instance_id=inst if v >= 5 else None, metadata=meta)
            for m, inst, meta in result.members
        ],
    )
