"""FindCoordinator (v0-6, batched keys v4+): a group's coordinator is the gateway owning its
shard of __consumer_offsets, a transactional id's the one owning its shard of __transaction_state;
a share key's (group:topic id:partition) the partition's owner."""

from __future__ import annotations

import asyncio
import uuid

from gateway.cluster.membership import GatewayNode
from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

KEY_GROUP, KEY_TRANSACTION, KEY_SHARE = 0, 1, 2
Coordinator = FindCoordinatorResponse.Coordinator


async def _share_state_owner(ctx: RequestContext, key: str) -> GatewayNode:
    """A share key "group:topic id:partition" names share-partition state, which the partition's
    owner keeps (on its log's cursor): that gateway is its share coordinator."""
    try:
        _group, tid_text, p_text = key.rsplit(":", 2)
        tid, partition = uuid.UUID(tid_text), int(p_text)
    except ValueError:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Invalid coordinator key {key!r}") from None
    info = await ctx.services.topics.get_by_id(tid)
    if info is None or not 0 <= partition < info.partitions:
        raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"no such partition {tid}-{partition}")
    services = ctx.services
    owner = services.cluster.leader_of(tid, partition)
    if owner is None or owner == services.node_id:
        try:  # nobody serves it yet (or we do): take it now, as a fetch would
            await services.partitions.get(info, partition)
            owner = services.node_id
        except KafkaApiError:
            owner = services.cluster.leader_of(tid, partition)
    node = services.cluster.node(owner) if owner is not None else None
    if node is None:
        raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"no owner of {tid}-{partition} yet")
    return node


async def _one(ctx: RequestContext, key: str, key_type: int) -> Coordinator:
    def fail(code: int, msg: str) -> Coordinator:
        return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=msg)

    if key_type not in (KEY_GROUP, KEY_TRANSACTION, KEY_SHARE):
        return fail(ErrorCode.INVALID_REQUEST, f"unsupported coordinator key type {key_type}")
    try:
        if key_type == KEY_SHARE:
            node = await _share_state_owner(ctx, key)
        elif key_type == KEY_TRANSACTION:
            node = await ctx.services.txn_coordinators().find(key)
        else:
            node = await ctx.services.group_coordinators().find(key)
    except KafkaApiError as e:
        return fail(e.error_code, e.message or str(e))
    return Coordinator(key=key, node_id=node.node_id, host=node.host, port=node.port, error_code=0, error_message=None)


async def find_coordinator(ctx: RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    v = ctx.api_version
    key_type = req.key_type if v >= 1 else KEY_GROUP
    keys = list(req.coordinator_keys) if v >= 4 else [req.key]
    found = list(await asyncio.gather(*(_one(ctx, k, key_type) for k in keys)))
    if v >= 4:
        return FindCoordinatorResponse(coordinators=found)
    c = found[0]
    return FindCoordinatorResponse(
        error_code=c.error_code,
        error_message=c.error_message if v >= 1 else None,
        node_id=c.node_id,
        host=c.host,
        port=c.port,
    )
