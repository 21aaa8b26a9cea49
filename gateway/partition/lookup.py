"""Finding the PartitionLog a partition-level request is about, with Kafka's errors."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from gateway.errors import KafkaApiError
from kafka_wire.errors import ErrorCode

if TYPE_CHECKING:
    from gateway.cluster.membership import ClusterView, GatewayNode
    from gateway.cluster.partitions import PartitionManager
    from gateway.partition.log import PartitionLog
    from gateway.topics.registry import TopicInfo, TopicRegistry

P = TypeVar("P")
R = TypeVar("R")
T = TypeVar("T")
TR = TypeVar("TR")


NO_LEADER = (-1, -1)


def current_leader(
    cluster: ClusterView, partitions: PartitionManager, node_id: int, topic_id: uuid.UUID, partition: int
) -> tuple[int, int]:
    """(leader id, leader epoch) of a partition as Metadata reports them: the owner, with its
    own epoch when that is this gateway, else the epoch in its lease; (-1, -1) while no
    gateway owns it (`node_id`: this gateway)."""
    leader = cluster.leader_of(topic_id, partition)
    if leader is None:
        return NO_LEADER
    if leader == node_id:
        # Another owner's epoch comes from its lease; ours from the open log (clients fetching
        # with a stale epoch would otherwise be fenced by us while asking us in a loop).
        log_of = getattr(partitions, "log_of", None)
        plog = log_of(topic_id, partition) if log_of is not None else None
        return leader, int(plog.leader_epoch) if plog is not None else -1
    return leader, cluster.leader_epoch_of(topic_id, partition)


def leader_hint(
    cluster: ClusterView, partitions: PartitionManager, node_id: int, topic_id: uuid.UUID, partition: int
) -> tuple[tuple[int, int], GatewayNode | None]:
    """KIP-951: what a NOT_LEADER_OR_FOLLOWER answer tells the client of the partition's current
    leader ((leader id, epoch) and that gateway's endpoint), so it can move without a Metadata
    round trip. ((-1, -1), None) when unknown, as Kafka's getCurrentLeader."""
    leader, epoch = current_leader(cluster, partitions, node_id, topic_id, partition)
    node = cluster.node(leader) if leader >= 0 else None
    return (leader, epoch), node


class TopicCache:
    """Topics looked up once per request (by name, or by id for v13+ Fetch/Produce)."""

    def __init__(self, topics: TopicRegistry, partitions: PartitionManager) -> None:
        self.topics = topics
        self.partitions = partitions
        self._by_name: dict[str, TopicInfo | None] = {}
        self._by_id: dict[uuid.UUID, TopicInfo | None] = {}

    async def by_name(self, name: str) -> TopicInfo | None:
        if name not in self._by_name:
            self._by_name[name] = await self.topics.get(name)
        return self._by_name[name]

    async def by_id(self, tid: uuid.UUID) -> TopicInfo | None:
        if tid not in self._by_id:
            self._by_id[tid] = await self.topics.get_by_id(tid)
        return self._by_id[tid]

    async def get(self, topic: str | uuid.UUID) -> TopicInfo:
        """The topic, else KafkaApiError UNKNOWN_TOPIC_ID (ids) / UNKNOWN_TOPIC_OR_PARTITION."""
        if isinstance(topic, uuid.UUID):
            info = await self.by_id(topic)
            if info is None:
                raise KafkaApiError(int(ErrorCode.UNKNOWN_TOPIC_ID), f"unknown topic id {topic}")
            return info
        info = await self.by_name(topic)
        if info is None:
            raise KafkaApiError(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"unknown topic {topic!r}")
        return info

    async def log(self, topic: str | uuid.UUID, partition: int) -> tuple[TopicInfo, PartitionLog]:
        info = await self.get(topic)
        if not 0 <= partition < info.partitions:
            raise KafkaApiError(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"{info.name}-{partition} does not exist")
        plog = await self.partitions.get(info, partition)
        if plog.lost:
            raise KafkaApiError(int(ErrorCode.NOT_LEADER_OR_FOLLOWER), f"{info.name}-{partition} is moving")
        return info, plog

    async def per_partition(
        self,
        topics: Iterable[T],
        partitions: Callable[[T], tuple[str | uuid.UUID, Iterable[P]]],
        index: Callable[[P], int],
        answer: Callable[[P, PartitionLog], Awaitable[R]],
        failed: Callable[[P, KafkaApiError], R],
        result: Callable[[T, list[R]], TR],
    ) -> list[TR]:
        """The per-topic results of a partition-level request: for each requested partition,
        `answer` with its log, or `failed` with the Kafka error that finding the log (or
        answering) raised, so that one partition's error never fails the others; `result`
        wraps a topic's partition results."""
        out: list[TR] = []
        for t in topics:
            topic, requested = partitions(t)
            parts: list[R] = []
            for p in requested:
                try:
                    _, plog = await self.log(topic, index(p))
                    parts.append(await answer(p, plog))
                except KafkaApiError as e:
                    parts.append(failed(p, e))
            out.append(result(t, parts))
        return out
