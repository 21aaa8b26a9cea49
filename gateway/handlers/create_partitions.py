"""CreatePartitions (v0-3): increase only; a manual replica assignment for the new partitions
naming live gateways is accepted and recorded (its first live gateway is the preferred owner)."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Collection

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.topics.registry import TopicInfo
from gateway.topics.replicas import check_assignment
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


def _assignment(t: CreatePartitionsRequest.CreatePartitionsTopic, live: Collection[int], info: TopicInfo
                ) -> tuple[tuple[int, ...], ...]:
    """The new partitions' manual assignment, checked as Kafka's controller does
    (ReplicationControlManager.createPartitions) once the count is known to grow: one list per
    new partition, each as long as the topic's replica lists (1, its owner, unless the topic was
    created with a manual assignment)."""
    assert t.assignments is not None
    additional = t.count - info.partitions
    if len(t.assignments) != additional:
        raise KafkaApiError(int(ErrorCode.INVALID_REPLICA_ASSIGNMENT), f"Attempted to add {additional} additional "
                            f"partition(s), but only {len(t.assignments)} assignment(s) were specified.")
    rf = len(info.preferred[0]) if info.preferred and info.preferred[0] else 1
    for a in t.assignments:
        check_assignment(a.broker_ids, live, rf)
    return tuple(tuple(a.broker_ids) for a in t.assignments)


async def create_partitions(ctx: RequestContext, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    counts = Counter(t.name for t in req.topics)
    out: list[Result] = []
    for t in req.topics:
        try:
            if counts[t.name] > 1:
                raise KafkaApiError(int(ErrorCode.INVALID_REQUEST), "Duplicate topic name.")
            if await ctx.services.topics.get(t.name) is None:
                raise KafkaApiError(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"Topic '{t.name}' does not exist.")
            check = None
            if t.assignments is not None:
                check = functools.partial(_assignment, t, ctx.services.cluster.live_ids())
            await ctx.services.topics.add_partitions(t.name, t.count, validate_only=req.validate_only, check=check)
            out.append(Result(name=t.name, error_message=None))
        except KafkaApiError as e:
            out.append(Result(name=t.name, error_code=e.error_code, error_message=e.message))
    return CreatePartitionsResponse(results=out)
