"""ConsumerGroupHeartbeat (v0-1): the consumer group protocol's one request (KIP-848). The group's
configs come from the watched GroupConfigCache: no metadata read per heartbeat."""

from __future__ import annotations

from coordinator.group.consumer import ConsumerHeartbeat
from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.group_lookup import client_host, group_coordinator
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

R = ConsumerGroupHeartbeatResponse


async def consumer_group_heartbeat(
    ctx: RequestContext, req: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    configs = await ctx.services.group_config_cache().get(req.group_id) if req.group_id else {}
    session_ms, interval_ms = configs.get("consumer.session.timeout.ms"), configs.get("consumer.heartbeat.interval.ms")
    assign_ms = configs.get("consumer.assignment.interval.ms")
    hb = ConsumerHeartbeat(
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        instance_id=req.instance_id,
        rack_id=req.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed_topic_names=req.subscribed_topic_names,
        subscribed_topic_regex=req.subscribed_topic_regex,
        server_assignor=req.server_assignor,
        owned=None if req.topic_partitions is None else {
            t.topic_id: set(t.partitions) for t in req.topic_partitions},
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
        api_version=ctx.api_version,
        session_timeout_ms=None if session_ms is None else int(session_ms),
        heartbeat_interval_ms=None if interval_ms is None else int(interval_ms),
        assignment_interval_ms=None if assign_ms is None else int(assign_ms),
    )
    try:
        coord = await group_coordinator(ctx, req.group_id)
    except KafkaApiError as e:
        return R(error_code=e.error_code)
    a = await coord.consumer_heartbeat(hb)
    if a.error != ErrorCode.NONE:
        return R(error_code=a.error, error_message=a.message)
    assignment = None
    if a.assignment is not None:
        assignment = R.Assignment(topic_partitions=[
            R.TopicPartitions(topic_id=t, partitions=sorted(p)) for t, p in sorted(a.assignment.items())])
    return R(member_id=a.member_id, member_epoch=a.member_epoch, heartbeat_interval_ms=a.heartbeat_interval_ms,
             assignment=assignment)
