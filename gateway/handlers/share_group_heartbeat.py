"""ShareGroupHeartbeat (v1): join, stay in and leave a share group; the coordinator of the
group's shard assigns partitions (coordinator/share/membership.py)."""

from __future__ import annotations

from collections.abc import Iterable

from coordinator.share.group import TopicsMetadata
from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.group_lookup import client_host, group_coordinator
from kafka_wire.messages.share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse

Resp = ShareGroupHeartbeatResponse


async def share_group_heartbeat(ctx: RequestContext, req: ShareGroupHeartbeatRequest) -> Resp:
    topics = ctx.services.topics

    async def resolve(names: Iterable[str]) -> TopicsMetadata:
        out: TopicsMetadata = {}
        for name in sorted(names):
            info = await topics.get(name)
            if info is not None:
                out[name] = (info.topic_id, info.partitions)
        return out

    try:
        coord = await group_coordinator(ctx, req.group_id)
    except KafkaApiError as e:
        return Resp(error_code=e.error_code, error_message=e.message)
    shares = ctx.services.share_partitions()
    group_config = await shares.group_share_config(req.group_id) if req.group_id else shares.config
    r = await coord.share_heartbeat(
        req.group_id,
        req.member_id,
        req.member_epoch,
        req.rack_id,
        list(req.subscribed_topic_names) if req.subscribed_topic_names is not None else None,
        ctx.client_id or "",
        client_host(ctx),
        resolve,
        session_timeout_ms=group_config.session_timeout_ms,
        heartbeat_interval_ms=group_config.heartbeat_interval_ms,
    )
    assignment = None
    if r.assignment is not None:
        assignment = Resp.Assignment(
            topic_partitions=[
                Resp.TopicPartitions(topic_id=tid, partitions=sorted(ps)) for tid, ps in sorted(r.assignment.items())
            ]
        )
    return Resp(
        error_code=r.error,
        error_message=r.message,
        member_id=r.member_id,
        member_epoch=r.member_epoch,
        heartbeat_interval_ms=r.heartbeat_interval_ms,
        assignment=assignment,
    )
