"""CreateTopics (v2-7), as Kafka's controller validates it. A manual replica assignment naming
live gateways is accepted and recorded: its first live gateway is the partition's preferred
owner (gateway/cluster/assignment.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.topics.describe import topic_entries
from gateway.topics.registry import TopicInfo
from gateway.topics.replicas import check_assignment
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse

Result = CreateTopicsResponse.CreatableTopicResult


def _error(name: str, code: ErrorCode | int, message: str) -> Result:
    return Result(name=name, error_code=int(code), error_message=message, configs=None)


def _assignment(t: CreateTopicsRequest.CreatableTopic, live: Collection[int]) -> tuple[tuple[int, ...], ...]:
    """The manual assignment, one replica list per partition from 0, checked as Kafka's
    controller does (ReplicationControlManager.createTopic)."""
    if t.replication_factor != -1:
        raise KafkaApiError(int(ErrorCode.INVALID_REQUEST), "A manual partition assignment was specified, but "
                            "replication factor was not set to -1.")
    if t.num_partitions != -1:
        raise KafkaApiError(int(ErrorCode.INVALID_REQUEST), "A manual partition assignment was specified, but "
                            "numPartitions was not set to -1.")
    by_partition: dict[int, tuple[int, ...]] = {}
    rf: int | None = None
    for a in t.assignments:
        if a.partition_index in by_partition:
            raise KafkaApiError(int(ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                                f"Found multiple manual partition assignments for partition {a.partition_index}")
        check_assignment(a.broker_ids, live, rf)
        rf = len(a.broker_ids)
        by_partition[a.partition_index] = tuple(a.broker_ids)
    if sorted(by_partition) != list(range(len(by_partition))):
        raise KafkaApiError(int(ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                            "partitions should be a consecutive 0-based integer sequence")
    return tuple(by_partition[p] for p in range(len(by_partition)))


def _check_shape(t: CreateTopicsRequest.CreatableTopic) -> None:
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
            preferred: tuple[tuple[int, ...], ...] = ()
            if t.assignments:
                # As Kafka: an existing topic is reported before its assignment is checked.
                if await services.topics.get(t.name) is not None:
                    raise KafkaApiError(int(ErrorCode.TOPIC_ALREADY_EXISTS), f"Topic '{t.name}' already exists.")
                preferred = _assignment(t, services.cluster.live_ids())
                partitions, rf = len(preferred), len(preferred[0])
            else:
                partitions = services.config.num_partitions if t.num_partitions == -1 else t.num_partitions
                rf = services.config.default_replication_factor if t.replication_factor == -1 else \
                    t.replication_factor
            info = await services.topics.create(t.name, partitions, {c.name: c.value for c in t.configs},
                                                validate_only=req.validate_only, preferred=preferred)
        except KafkaApiError as e:
            results.append(_error(t.name, e.error_code, e.message))
            continue
        results.append(_success(info, rf))
    return CreateTopicsResponse(topics=results)
