"""SyncGroup (v0-5; protocol type and name checks from v5)."""

from __future__ import annotations

from coordinator.group.group import SyncResult
from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.group_lookup import group_coordinator
from kafka_wire.messages.sync_group import SyncGroupRequest, SyncGroupResponse


async def sync_group(ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
    v = ctx.api_version
    try:
        coord = await group_coordinator(ctx, req.group_id)
        result = await coord.sync(
            req.group_id,
            req.generation_id,
            req.member_id,
            req.group_instance_id,
            req.protocol_type if v >= 5 else None,
            req.protocol_name if v >= 5 else None,
            {a.member_id: bytes(a.assignment) for a in req.assignments},
        )
    except KafkaApiError as e:
        result = SyncResult(e.error_code)
    return SyncGroupResponse(
        error_code=result.error,
        protocol_type=result.protocol_type if v >= 5 else None,
        protocol_name=result.protocol_name if v >= 5 else None,
        assignment=result.assignment,
    )
