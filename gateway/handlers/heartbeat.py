"""Heartbeat (v0-4)."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.group_lookup import group_coordinator
from kafka_wire.messages.heartbeat import HeartbeatRequest, HeartbeatResponse


async def heartbeat(ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
    try:
        coord = await group_coordinator(ctx, req.group_id)
        err = coord.heartbeat(req.group_id, req.generation_id, req.member_id, req.group_instance_id)
    except KafkaApiError as e:
        err = e.error_code
    return HeartbeatResponse(error_code=err)
