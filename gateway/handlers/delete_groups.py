"""DeleteGroups (v0-2)."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.group_lookup import group_coordinator
from kafka_wire.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse

Result = DeleteGroupsResponse.DeletableGroupResult


async def delete_groups(ctx: RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    results = []
    for gid in req.groups_names:
        try:
            err = (await (await group_coordinator(ctx, gid)).delete_groups([gid]))[gid]
        except KafkaApiError as e:
            err = e.error_code
        results.append(Result(group_id=gid, error_code=err))
    return DeleteGroupsResponse(results=results)
