"""ListPartitionReassignments (v0) and AlterPartitionReassignments (v0-1).

Quire moves no replicas: a partition's data lives in quorum-replicated ledgers and its one
reported replica is its owning gateway, so no reassignment is ever in progress. An alteration
that names the current owner is the no-op Kafka accepts (NONE); cancelling answers
NO_REASSIGNMENT_IN_PROGRESS as Kafka does; unknown topics, partitions, and assignments Kafka
would refuse get Kafka's codes and messages. Any other assignment (moving the partition to other
gateways, or adding replicas) is refused with INVALID_REPLICA_ASSIGNMENT, the code Kafka gives
an assignment it cannot apply to the cluster: ownership follows leases, not assignments."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.topics.replicas import check_assignment
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from kafka_wire.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

TopicResponse = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
PartitionResponse = AlterPartitionReassignmentsResponse.ReassignablePartitionResponse


async def list_partition_reassignments(ctx: RequestContext, req: ListPartitionReassignmentsRequest
                                       ) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(error_message=None, topics=[])


async def _alter_one(ctx: RequestContext, topic: str, partition: int, replicas: list[int] | None,
                     allow_rf_change: bool) -> None:
    services = ctx.services
    info = await services.topics.get(topic)
    if info is None:
        raise KafkaApiError(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"Unable to find a topic named {topic}.")
    if not 0 <= partition < info.partitions:
        raise KafkaApiError(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                            f"Unable to find partition {topic}:{partition}.")
    if replicas is None:
        raise KafkaApiError(int(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS))
    check_assignment(replicas, services.cluster.live_ids())
    if not allow_rf_change and len(replicas) != 1:
        raise KafkaApiError(int(ErrorCode.INVALID_REPLICATION_FACTOR),
                            f"The replication factor is changed from 1 to {len(replicas)}")
    owner = services.cluster.leader_of(info.topic_id, partition)
    if replicas != [owner]:
        raise KafkaApiError(int(ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                            f"Partition {topic}-{partition} is owned by gateway {owner} through its ownership "
                            "lease; Quire does not move partitions by reassignment.")


async def alter_partition_reassignments(ctx: RequestContext, req: AlterPartitionReassignmentsRequest
                                        ) -> AlterPartitionReassignmentsResponse:
    allow_rf_change = req.allow_replication_factor_change if ctx.api_version >= 1 else True
    out = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                await _alter_one(ctx, t.name, p.partition_index, p.replicas, allow_rf_change)
                parts.append(PartitionResponse(partition_index=p.partition_index, error_message=None))
            except KafkaApiError as e:
                parts.append(PartitionResponse(partition_index=p.partition_index, error_code=e.error_code,
                                               error_message=e.message or None))
        out.append(TopicResponse(name=t.name, partitions=parts))
    return AlterPartitionReassignmentsResponse(allow_replication_factor_change=allow_rf_change,
                                               error_message=None, responses=out)
