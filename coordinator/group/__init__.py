"""Kafka's classic consumer-group coordinator, one GroupCoordinator per shard of
`__consumer_offsets`, persisted as Kafka's own offsets-topic records."""

from coordinator.group.config import GroupConfig
from coordinator.group.coordinator import GroupCoordinator
from coordinator.group.hashing import java_string_hashcode, shard_for
from coordinator.group.shard_log import ShardLog

__all__ = [
    "GroupConfig",
    "GroupCoordinator",
    "ShardLog",
    "java_string_hashcode",
    "shard_for",
]
