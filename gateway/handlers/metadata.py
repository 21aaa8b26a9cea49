"""Metadata (v0-13): brokers = live gateways, leader = the partition's owner (replicas = isr =
[leader]), topic ids, auto-creation as Kafka's auto.create.topics.enable."""

from __future__ import annotations

import uuid

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.partition.lookup import current_leader
from gateway.topics.naming import is_internal, is_valid
from gateway.topics.registry import TopicInfo
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.metadata import MetadataRequest, MetadataResponse
from kafka_wire.primitives import ZERO_UUID

Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition


async def _auto_create(ctx: RequestContext, name: str) -> TopicInfo | None:
    topics = ctx.services.topics
    try:
        return await topics.create(name, ctx.services.config.num_partitions, {})
    except KafkaApiError as e:
        if e.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return await topics.get(name)
        raise


def partition_metadata(ctx: RequestContext, info: TopicInfo, p: int) -> Partition:
    """One partition as Metadata reports it: the owner as leader (replicas = isr = [owner]) and
    its leader epoch; LEADER_NOT_AVAILABLE while no gateway owns it. DescribeTopicPartitions
    reports the same."""
    leader, epoch = current_leader(ctx.services.cluster, ctx.services.partitions, ctx.services.node_id, info.topic_id, p)
    if leader < 0:
        return Partition(error_code=int(ErrorCode.LEADER_NOT_AVAILABLE), partition_index=p,
                         leader_id=-1, replica_nodes=[], isr_nodes=[])
    return Partition(partition_index=p, leader_id=leader, leader_epoch=epoch,
                     replica_nodes=[leader], isr_nodes=[leader])


def topic_metadata(ctx: RequestContext, info: TopicInfo) -> Topic:
    parts = [partition_metadata(ctx, info, p) for p in range(info.partitions)]
    return Topic(name=info.name, topic_id=info.topic_id, is_internal=is_internal(info.name), partitions=parts)


async def _one(ctx: RequestContext, name: str, allow_create: bool) -> Topic:
    topics = ctx.services.topics
    if not is_valid(name):
        # As Kafka: an invalid name is only reported as such when auto-creation would apply.
        code = ErrorCode.INVALID_TOPIC_EXCEPTION if allow_create else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return Topic(error_code=int(code), name=name)
    info = await topics.get(name)
    if info is None and allow_create and not is_internal(name) and not name.startswith("__"):
        try:
            info = await _auto_create(ctx, name)
        except KafkaApiError as e:
            return Topic(error_code=e.error_code, name=name)
    if info is None:
        return Topic(error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), name=name)
    return topic_metadata(ctx, info)


async def metadata(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    services = ctx.services
    v = ctx.api_version
    cluster = services.cluster
    brokers = [MetadataResponse.MetadataResponseBroker(node_id=g.node_id, host=g.host, port=g.port, rack=g.rack)
               for g in cluster.gateways()]
    allow_create = services.config.auto_create_topics and (req.allow_auto_topic_creation if v >= 4 else True)
    out: list[Topic] = []
    if req.topics is None or (v == 0 and not req.topics):
        out = [topic_metadata(ctx, t) for t in await services.topics.all()]
    else:
        seen: set[str | uuid.UUID] = set()
        for t in req.topics:
            if t.name is None:
                if t.topic_id in seen:
                    continue
                seen.add(t.topic_id)
                info = None if t.topic_id == ZERO_UUID else await services.topics.get_by_id(t.topic_id)
                if info is None:
                    out.append(Topic(error_code=int(ErrorCode.UNKNOWN_TOPIC_ID), name=None, topic_id=t.topic_id))
                else:
                    out.append(topic_metadata(ctx, info))
                continue
            if t.name in seen:
                continue
            seen.add(t.name)
            out.append(await _one(ctx, t.name, allow_create))
    return MetadataResponse(brokers=brokers, cluster_id=cluster.cluster_id, controller_id=cluster.controller_id,
                            topics=out)
