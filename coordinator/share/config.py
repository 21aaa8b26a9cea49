"""Share-group settings, with Kafka's broker config names and defaults (GroupCoordinatorConfig,
ShareGroupConfig in Kafka 4.4)."""

from __future__ import annotations

from dataclasses import dataclass

SHARE_PROTOCOL_TYPE = "share"  # ListGroups' protocol and group type of a share group
AUTO_OFFSET_RESET_LATEST, AUTO_OFFSET_RESET_EARLIEST = "latest", "earliest"
MODE_SHARED, MODE_KEY_SHARED = "shared", "key_shared"  # quire.share.mode (a group config)


@dataclass
class ShareConfig:
    session_timeout_ms: int = 45000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size
    record_lock_duration_ms: int = 30000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    partition_max_record_locks: int = 2000  # group.share.partition.max.record.locks
    # The bounds of the group configs of the same names (share.record.lock.duration.ms, ...):
    # group.share.min.* / group.share.max.*, Kafka's names and defaults.
    min_record_lock_duration_ms: int = 15000
    max_record_lock_duration_ms: int = 60000
    min_session_timeout_ms: int = 45000
    max_session_timeout_ms: int = 60000
    min_heartbeat_interval_ms: int = 5000
    max_heartbeat_interval_ms: int = 15000
    min_delivery_count_limit: int = 2
    max_delivery_count_limit: int = 10
    min_partition_max_record_locks: int = 100
    max_partition_max_record_locks: int = 4000
    auto_offset_reset: str = AUTO_OFFSET_RESET_LATEST  # share.auto.offset.reset (a group config)
    read_committed: bool = False  # share.isolation.level=read_committed (a group config)
    renew_acknowledge_enable: bool = True  # share.renew.acknowledge.enable (a group config, KIP-1222)
    # Redelivery backoff (Pulsar's negative-ack backoff; quire.share.redelivery.backoff.*): a
    # RELEASEd or lock-expired record is acquirable again only after
    # min(max, min * multiplier ** (delivery count - 1)) ms; min 0 turns it off (Kafka's way).
    redelivery_backoff_min_ms: int = 0
    redelivery_backoff_max_ms: int = 60000
    redelivery_backoff_multiplier: float = 2.0
    # KIP-1191 (group configs errors.deadletterqueue.*): REJECTed records and those reaching the
    # delivery limit are copied to this topic before they are archived; "" for none.
    dlq_topic: str = ""
    dlq_copy_record: bool = False
    # Pulsar's Key_Shared (quire.share.mode=key_shared): records of one key go to one member at
    # a time and in offset order (see SharePartition.acquire).
    key_shared: bool = False

    def redelivery_delay_ms(self, count: int) -> float:
        """The wait before a record delivered `count` times may be acquired again."""
        if self.redelivery_backoff_min_ms <= 0:
            return 0.0
        exp = min(max(count - 1, 0), 64)  # bounded: the cap is reached long before
        delay = self.redelivery_backoff_min_ms * self.redelivery_backoff_multiplier**exp
        return float(min(delay, max(self.redelivery_backoff_max_ms, self.redelivery_backoff_min_ms)))
