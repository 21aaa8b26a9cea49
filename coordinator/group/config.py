"""Group coordinator settings, with Kafka's broker config names and defaults."""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.bounds import check_bounds

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
        """Kafka's start-up checks of the consumer and streams group settings (ValueError)."""
        g = "group.consumer."
        s = "group.streams."
        check_bounds((
            (g + "session.timeout.ms", self.consumer_session_timeout_ms,
             g + "min.session.timeout.ms", self.consumer_min_session_timeout_ms,
             g + "max.session.timeout.ms", self.consumer_max_session_timeout_ms),
            (g + "heartbeat.interval.ms", self.consumer_heartbeat_interval_ms,
             g + "min.heartbeat.interval.ms", self.consumer_min_heartbeat_interval_ms,
             g + "max.heartbeat.interval.ms", self.consumer_max_heartbeat_interval_ms),
            (g + "assignment.interval.ms", self.consumer_assignment_interval_ms,
             g + "min.assignment.interval.ms", self.consumer_min_assignment_interval_ms,
             g + "max.assignment.interval.ms", self.consumer_max_assignment_interval_ms),
            (s + "session.timeout.ms", self.streams_session_timeout_ms,
             s + "min.session.timeout.ms", self.streams_min_session_timeout_ms,
             s + "max.session.timeout.ms", self.streams_max_session_timeout_ms),
            (s + "heartbeat.interval.ms", self.streams_heartbeat_interval_ms,
             s + "min.heartbeat.interval.ms", self.streams_min_heartbeat_interval_ms,
             s + "max.heartbeat.interval.ms", self.streams_max_heartbeat_interval_ms),
            (s + "num.standby.replicas", self.streams_num_standby_replicas,
             None, None, s + "max.standby.replicas", self.streams_max_standby_replicas),
            (s + "num.warmup.replicas", self.streams_num_warmup_replicas,
             None, None, s + "max.warmup.replicas", self.streams_max_warmup_replicas),
            (s + "assignment.interval.ms", self.streams_assignment_interval_ms,
             s + "min.assignment.interval.ms", self.streams_min_assignment_interval_ms,
             s + "max.assignment.interval.ms", self.streams_max_assignment_interval_ms),
            (s + "task.offset.interval.ms", self.streams_task_offset_interval_ms,
             s + "min.task.offset.interval.ms", self.streams_min_task_offset_interval_ms, None, None),
        ))
        if self.consumer_migration_policy.lower() not in MIGRATION_POLICIES:
            raise ValueError(f"group.consumer.migration.policy must be one of {', '.join(MIGRATION_POLICIES)}")
        for kind, interval, session in (("consumer", self.consumer_heartbeat_interval_ms, self.consumer_session_timeout_ms),
                                        ("streams", self.streams_heartbeat_interval_ms, self.streams_session_timeout_ms)):
            if interval >= session:
                raise ValueError(f"group.{kind}.heartbeat.interval.ms must be less than group.{kind}.session.timeout.ms")

