"""Share-group settings, with Kafka's broker config names and defaults (GroupCoordinatorConfig,
ShareGroupConfig in Kafka 4.4)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from coordinator.bounds import check_bounds

SHARE_PROTOCOL_TYPE = "share"  # ListGroups' protocol and group type of a share group
AUTO_OFFSET_RESET_LATEST, AUTO_OFFSET_RESET_EARLIEST = "latest", "earliest"
BY_DURATION = "by_duration:"  # share.auto.offset.reset=by_duration:<ISO 8601 duration> (KIP-1106)
# java.time.Duration.parse's grammar: PnDTnHnMn.nS, each part signed, optionally negated as a whole.
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                       r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)


def by_duration_ms(value: str) -> int | None:
    """The duration of a `by_duration:` reset strategy in ms, None for another strategy;
    ValueError (Kafka's AutoOffsetResetStrategy messages) when it is malformed or negative."""
    if not value.lower().startswith(BY_DURATION):
        return None
    text = value[len(BY_DURATION):].strip()
    if not text:
        raise ValueError("<:duration> part is missing in by_duration auto offset reset strategy.")
    m = _DURATION.fullmatch(text)
    if m is None or m.group(3) == "T" or not any(m.group(i) for i in (2, 4, 5, 6)):
        raise ValueError("Unable to parse duration string in by_duration offset reset strategy.")
    days, hours, minutes, secs = (int(m.group(i) or 0) for i in (2, 4, 5, 6))
    frac = int((m.group(7) or "").ljust(9, "0")) // 1_000_000  # ms of the fraction, signed as its seconds
    ms = ((days * 24 + hours) * 60 + minutes) * 60_000 + secs * 1000
    ms += -frac if (m.group(6) or "").startswith("-") else frac
    if m.group(1) == "-":
        ms = -ms
    if ms < 0:
        raise ValueError("Negative duration is not supported in by_duration offset reset strategy.")
    return ms
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
    # share.assignment.interval.ms / share.assignor.offload.enable (GroupCoordinatorConfig's
    # group.share.*): accepted and reported; Quire assigns on the heartbeat that changes the group.
    assignment_interval_ms: int = 1000
    min_assignment_interval_ms: int = 0
    max_assignment_interval_ms: int = 15000
    assignor_offload_enable: bool = True
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

    def check(self) -> None:
        """Kafka's start-up checks of the share-group settings GroupCoordinatorConfig holds (ValueError)."""
        p = "group.share."
        check_bounds((
            (p + "session.timeout.ms", self.session_timeout_ms, p + "min.session.timeout.ms",
             self.min_session_timeout_ms, p + "max.session.timeout.ms", self.max_session_timeout_ms),
            (p + "heartbeat.interval.ms", self.heartbeat_interval_ms, p + "min.heartbeat.interval.ms",
             self.min_heartbeat_interval_ms, p + "max.heartbeat.interval.ms", self.max_heartbeat_interval_ms),
            (p + "assignment.interval.ms", self.assignment_interval_ms, p + "min.assignment.interval.ms",
             self.min_assignment_interval_ms, p + "max.assignment.interval.ms", self.max_assignment_interval_ms),
        ))
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms")

    def redelivery_delay_ms(self, count: int) -> float:
        """The wait before a record delivered `count` times may be acquired again."""
        if self.redelivery_backoff_min_ms <= 0:
            return 0.0
        exp = min(max(count - 1, 0), 64)  # bounded: the cap is reached long before
        delay = self.redelivery_backoff_min_ms * self.redelivery_backoff_multiplier**exp
        return float(min(delay, max(self.redelivery_backoff_max_ms, self.redelivery_backoff_min_ms)))
