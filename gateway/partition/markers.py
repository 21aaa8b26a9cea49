"""Transaction markers on the partitions this gateway owns: the one code path behind the
WriteTxnMarkers API and the in-process calls of a transaction coordinator running here (which
gets `marker_writer(...)` injected: coordinator/ never imports gateway/)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.group.config import OFFSETS_TOPIC
from gateway.errors import KafkaApiError
from gateway.partition.lookup import TopicCache
from kafka_log.txn import MarkerWriter
from kafka_wire.errors import ErrorCode

if TYPE_CHECKING:
    from coordinator.group.coordinator import GroupCoordinator
    from gateway.cluster.partitions import PartitionManager
    from gateway.groups import GroupCoordinators
    from gateway.topics.registry import TopicInfo, TopicRegistry


async def write_marker(
    topics: TopicCache,
    groups: GroupCoordinators | None,
    topic: str,
    partition: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    transaction_version: int = 1,
) -> ErrorCode:
    """Append a COMMIT/ABORT marker to one partition; NONE once it is durable, else the
    partition's error as WriteTxnMarkers answers it."""
    try:
        info, plog = await topics.log(topic, partition)
        shard = await _loaded_group_shard(groups, info, partition) if topic == OFFSETS_TOPIC else None
        await plog.append_marker(producer_id, producer_epoch, commit, coordinator_epoch, transaction_version)
    except KafkaApiError as e:
        return ErrorCode(e.error_code)
    if shard is not None:
        # the group shard applies (COMMIT) or drops (ABORT) the transaction's pending offsets
        shard.complete_txn(producer_id, commit)
    return ErrorCode.NONE


async def _loaded_group_shard(groups: GroupCoordinators | None, info: TopicInfo, partition: int) -> GroupCoordinator | None:
    """The group shard of an offsets partition, loaded here, before its marker goes in. As
    Kafka's group coordinator completes a transaction: a marker appended while the shard
    replays its log would be in neither the replay (which ends where it began) nor the
    loaded state, and the transaction's offsets would stay pending until the producer's next
    marker dropped or applied them as its own. A shard not ready answers as Kafka translates
    it for the transaction coordinator, NOT_LEADER_OR_FOLLOWER, which retries."""
    if groups is None:
        return None
    try:
        return await groups.coordinator_of_shard(info, partition)
    except KafkaApiError as e:
        raise KafkaApiError(int(ErrorCode.NOT_LEADER_OR_FOLLOWER), f"{info.name}-{partition}: {e}") from e


def marker_writer(
    topics: TopicRegistry, partitions: PartitionManager, groups: GroupCoordinators | None
) -> MarkerWriter:
    """The MarkerWriter (kafka_log/txn.py) of this gateway's partitions."""

    async def write(
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        /,
        transaction_version: int = 1,
    ) -> ErrorCode:
        return await write_marker(TopicCache(topics, partitions), groups, topic, partition,
                                  producer_id, producer_epoch, commit, coordinator_epoch, transaction_version)

    return write
