"""ListGroups (v0-5; states filter v4+, types filter v5): the groups of every shard this gateway
coordinates (admin clients ask every gateway)."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.list_groups import ListGroupsRequest, ListGroupsResponse

Listed = ListGroupsResponse.ListedGroup


async def list_groups(ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
    v = ctx.api_version
    states = list(req.states_filter) if v >= 4 and req.states_filter else None
    types = list(req.types_filter) if v >= 5 and req.types_filter else None
    try:
        shards = await ctx.services.group_coordinators().owned_coordinators()
    except KafkaApiError as e:
        return ListGroupsResponse(error_code=e.error_code)
    if shards is None:
        return ListGroupsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    groups = [
        Listed(
            group_id=gid,
            protocol_type=ptype,
            group_state=state if v >= 4 else "",
            group_type=gtype if v >= 5 else "",
        )
        for c in shards
        for gid, ptype, state, gtype in c.list_groups(states, types)
    ]
    return ListGroupsResponse(groups=groups)
