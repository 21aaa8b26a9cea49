"""Manual replica assignments (CreateTopics, CreatePartitions, AlterPartitionReassignments),
checked as Kafka's controller checks them (ReplicationControlManager
.validateManualPartitionAssignment), against the live gateways as the registered brokers.

Quire reports one replica per partition, its owner: an assignment names the gateways the client
would like to own the partition, and the first listed one is its preferred owner."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from gateway.errors import KafkaApiError
from kafka_wire.errors import ErrorCode


def check_assignment(replicas: Sequence[int], live: Collection[int], replication_factor: int | None = None) -> None:
    """Raise INVALID_REPLICA_ASSIGNMENT with Kafka's message when `replicas` is empty, names a
    gateway that is not live, names one twice, or (given `replication_factor`, the count the
    topic's other partitions have) has another length."""
    if not replicas:
        raise KafkaApiError(int(ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                            "The manual partition assignment includes an empty replica list.")
    prev: int | None = None
    for broker in sorted(replicas):  # Kafka checks in broker id order
        if broker not in live:
            raise KafkaApiError(int(ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                                f"The manual partition assignment includes broker {broker}, but no such broker "
                                "is registered.")
        if broker == prev:
            raise KafkaApiError(int(ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                                f"The manual partition assignment includes the broker {broker} more than once.")
        prev = broker
    if replication_factor is not None and len(replicas) != replication_factor:
        raise KafkaApiError(int(ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                            f"The manual partition assignment includes a partition with {len(replicas)} "
                            f"replica(s), but this is not consistent with previous partitions, which have "
                            f"{replication_factor} replica(s).")
