"""CreateTopics (v2-7), as Kafka's controller validates it."""

from __future__ import annotations

from collections import Counter

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.topics.describe import topic_entries
from gateway.topics.registry import TopicInfo
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse

Result = CreateTopicsResponse.CreatableTopicResult


def _error(name: str, code: ErrorCode | int, message: str) -> Result:
    return Result(name=name, error_code=int(code), error_message=message, configs=None)


def _check_shape(t: CreateTopicsRequest.CreatableTopic) -> None:
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            raise KafkaApiError(int(ErrorCode.INVALID_REQUEST), "Both numPartitions or replicationFactor and "
                                "replicasAssignments were set. Both cannot be used at the same time.")
        raise KafkaApiError(int(ErrorCode.INVALID_REPLICA_ASSIGNMENT), "Manual replica assignments are not "
                            "supported: Quire places each partition on a gateway by ownership leases.")
    if t.num_partitions == 0 or t.num_partitions < -1:
        raise KafkaApiError(int(ErrorCode.INVALID_PARTITIONS),
                            "Number of partitions was set to an invalid non-positive value.")
    if t.replication_factor == 0 or t.replication_factor < -1:
        raise KafkaApiError(int(ErrorCode.INVALID_REPLICATION_FACTOR),
                            "Replication factor must be larger than 0, or -1 to use the default value.")
    dup = [k for k, n in Counter(c.name for c in t.configs).items() if n > 1]
    if dup:
        raise KafkaApiError(int(ErrorCode.INVALID_REQUEST), f"Duplicate config keys: {', '.join(dup)}")


def _success(info: TopicInfo, replication_factor: int) -> Result:
    configs = [CreateTopicsResponse.CreatableTopicConfigs(
        name=e.name, value=e.value, read_only=e.read_only, config_source=int(e.source), is_sensitive=False)
        for e in topic_entries(info.configs)]
    return Result(name=info.name, topic_id=info.topic_id, error_message=None, num_partitions=info.partitions,
                  replication_factor=replication_factor, configs=configs)


async def create_topics(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
    services = ctx.services
    counts = Counter(t.name for t in req.topics)
    results: list[Result] = []
    for t in req.topics:
        if counts[t.name] > 1:
            results.append(_error(t.name, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
            continue
        try:
            _check_shape(t)
            partitions = services.config.num_partitions if t.num_partitions == -1 else t.num_partitions
            rf = services.config.default_replication_factor if t.replication_factor == -1 else t.replication_factor
            info = await services.topics.create(t.name, partitions, {c.name: c.value for c in t.configs},
                                                validate_only=req.validate_only)
        except KafkaApiError as e:
            results.append(_error(t.name, e.error_code, e.message))
            continue
        results.append(_success(info, rf))
    return CreateTopicsResponse(topics=results)
