"""Share-group settings, with Kafka's broker config names and defaults (GroupCoordinatorConfig,
ShareGroupConfig in Kafka 4.4)."""

from __future__ import annotations

from dataclasses import dataclass

SHARE_PROTOCOL_TYPE = "share"  # ListGroups' protocol and group type of a share group
AUTO_OFFSET_RESET_LATEST, AUTO_OFFSET_RESET_EARLIEST = "latest", "earliest"


@dataclass
class ShareConfig:
    session_timeout_ms: int = 45000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size
    record_lock_duration_ms: int = 30000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    partition_max_record_locks: int = 2000  # group.share.partition.max.record.locks
    auto_offset_reset: str = AUTO_OFFSET_RESET_LATEST  # share.auto.offset.reset (a group config)
    read_committed: bool = False  # share.isolation.level=read_committed (a group config)
