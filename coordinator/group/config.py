"""Group coordinator settings, with Kafka's broker config names and defaults."""

from __future__ import annotations

from dataclasses import dataclass

OFFSETS_TOPIC = "__consumer_offsets"
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


@dataclass
class GroupConfig:
    offsets_topic_partitions: int = 16  # offsets.topic.num.partitions (Kafka: 50)
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1  # group.max.size
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes (7 days)
    offsets_retention_check_interval_ms: int = 600000  # offsets.retention.check.interval.ms
    new_member_join_timeout_ms: int = 300000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs
    # The consumer group protocol (KIP-848).
    consumer_session_timeout_ms: int = 45000  # group.consumer.session.timeout.ms
    consumer_min_session_timeout_ms: int = 45000  # group.consumer.min.session.timeout.ms
    consumer_max_session_timeout_ms: int = 60000  # group.consumer.max.session.timeout.ms
    consumer_heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    consumer_min_heartbeat_interval_ms: int = 5000  # group.consumer.min.heartbeat.interval.ms
    consumer_max_heartbeat_interval_ms: int = 15000  # group.consumer.max.heartbeat.interval.ms
    consumer_max_size: int = 2**31 - 1  # group.consumer.max.size
    consumer_assignment_interval_ms: int = 1000  # group.consumer.assignment.interval.ms (Kafka 4.3+)
    consumer_min_assignment_interval_ms: int = 0  # group.consumer.min.assignment.interval.ms
    consumer_max_assignment_interval_ms: int = 15000  # group.consumer.max.assignment.interval.ms
    consumer_assignor_offload_enable: bool = True  # group.consumer.assignor.offload.enable (no effect)
    consumer_assignors: str = "uniform,range"  # group.consumer.assignors (the first is the default)
    consumer_migration_policy: str = "bidirectional"  # group.consumer.migration.policy
    # Streams groups (KIP-1071): Quire serves no StreamsGroupHeartbeat; these settings are Kafka's
    # defaults of the streams.* group configs and their bounds, which are accepted and stored.
    streams_session_timeout_ms: int = 45000  # group.streams.session.timeout.ms
    streams_min_session_timeout_ms: int = 45000  # group.streams.min.session.timeout.ms
    streams_max_session_timeout_ms: int = 60000  # group.streams.max.session.timeout.ms
    streams_heartbeat_interval_ms: int = 5000  # group.streams.heartbeat.interval.ms
    streams_min_heartbeat_interval_ms: int = 5000  # group.streams.min.heartbeat.interval.ms
    streams_max_heartbeat_interval_ms: int = 15000  # group.streams.max.heartbeat.interval.ms
    streams_num_standby_replicas: int = 0  # group.streams.num.standby.replicas
    streams_max_standby_replicas: int = 2  # group.streams.max.standby.replicas
    streams_initial_rebalance_delay_ms: int = 3000  # group.streams.initial.rebalance.delay.ms
    streams_assignment_interval_ms: int = 1000  # group.streams.assignment.interval.ms
    streams_min_assignment_interval_ms: int = 0  # group.streams.min.assignment.interval.ms
    streams_max_assignment_interval_ms: int = 15000  # group.streams.max.assignment.interval.ms
    streams_assignors: str = "sticky"  # group.streams.assignors
    streams_rack_aware_assignment_tags: str = ""  # group.streams.rack.aware.assignment.tags
    streams_assignor_offload_enable: bool = True  # group.streams.assignor.offload.enable
    streams_task_offset_interval_ms: int = 60000  # group.streams.task.offset.interval.ms
    streams_min_task_offset_interval_ms: int = 15000  # group.streams.min.task.offset.interval.ms
    streams_num_warmup_replicas: int = 2  # group.streams.num.warmup.replicas
    streams_max_warmup_replicas: int = 20  # group.streams.max.warmup.replicas
    streams_acceptable_recovery_lag: int = 10000  # group.streams.acceptable.recovery.lag
    load_wait_s: float = 10.0  # how long a request waits for a shard to load before LOAD_IN_PROGRESS

    def migration_allows(self, direction: str) -> bool:
        """Kafka's ConsumerGroupMigrationPolicy: "upgrade" (classic -> consumer) or "downgrade"."""
        policy = self.consumer_migration_policy.lower()
        return policy == "bidirectional" or policy == direction

    def check(self) -> None:
        """Kafka's start-up checks of the consumer group protocol's settings (ValueError)."""
        pairs = (
            ("group.consumer.session.timeout.ms", self.consumer_session_timeout_ms,
             "group.consumer.min.session.timeout.ms", self.consumer_min_session_timeout_ms,
             "group.consumer.max.session.timeout.ms", self.consumer_max_session_timeout_ms),
            ("group.consumer.heartbeat.interval.ms", self.consumer_heartbeat_interval_ms,
             "group.consumer.min.heartbeat.interval.ms", self.consumer_min_heartbeat_interval_ms,
             "group.consumer.max.heartbeat.interval.ms", self.consumer_max_heartbeat_interval_ms),
        )
        for name, value, lo_name, lo, hi_name, hi in pairs:
            if value < lo:
                raise ValueError(f"{name} must be greater than or equal to {lo_name}")
            if value > hi:
                raise ValueError(f"{name} must be less than or equal to {hi_name}")
        if self.consumer_migration_policy.lower() not in MIGRATION_POLICIES:
            raise ValueError(f"group.consumer.migration.policy must be one of {', '.join(MIGRATION_POLICIES)}")
        if self.consumer_heartbeat_interval_ms >= self.consumer_session_timeout_ms:
            raise ValueError("group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")
