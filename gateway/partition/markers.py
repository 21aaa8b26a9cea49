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
    from gateway.cluster.partitions import PartitionManager
    from gateway.groups import GroupCoordinators
    from gateway.topics.registry import TopicRegistry


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
        _, plog = await topics.log(topic, partition)
        await plog.append_marker(producer_id, producer_epoch, commit, coordinator_epoch, transaction_version)
    except KafkaApiError as e:
        return ErrorCode(e.error_code)
    if topic == OFFSETS_TOPIC and groups is not None:
        # the group shard applies (COMMIT) or drops (ABORT) the transaction's pending offsets
        groups.complete_txn_offsets(partition, producer_id, commit)
    return ErrorCode.NONE


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
