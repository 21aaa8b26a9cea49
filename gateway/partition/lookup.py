"""Finding the PartitionLog a partition-level request is about, with Kafka's errors."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from gateway.errors import KafkaApiError
from kafka_wire.errors import ErrorCode

if TYPE_CHECKING:
    from gateway.partition.log import PartitionLog
    from gateway.services import GatewayServices
    from gateway.topics.registry import TopicInfo


class TopicCache:
    """Topics looked up once per request (by name, or by id for v13+ Fetch/Produce)."""

    def __init__(self, services: GatewayServices) -> None:
        self.services = services
        self._by_name: dict[str, TopicInfo | None] = {}
        self._by_id: dict[uuid.UUID, TopicInfo | None] = {}

    async def by_name(self, name: str) -> TopicInfo | None:
        if name not in self._by_name:
            self._by_name[name] = await self.services.topics.get(name)
        return self._by_name[name]

    async def by_id(self, tid: uuid.UUID) -> TopicInfo | None:
        if tid not in self._by_id:
            self._by_id[tid] = await self.services.topics.get_by_id(tid)
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
        plog = await self.services.partitions.get(info, partition)
        if plog.lost:
            raise KafkaApiError(int(ErrorCode.NOT_LEADER_OR_FOLLOWER), f"{info.name}-{partition} is moving")
        return info, plog
