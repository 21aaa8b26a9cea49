"""Transaction coordinator settings, with Kafka's broker config names and defaults."""

from __future__ import annotations

from dataclasses import dataclass

TRANSACTION_STATE_TOPIC = "__transaction_state"


@dataclass
class TxnConfig:
    state_log_num_partitions: int = 50  # transaction.state.log.num.partitions
    state_log_segment_bytes: int = 104857600  # transaction.state.log.segment.bytes
    max_timeout_ms: int = 900000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604800000  # transactional.id.expiration.ms (7 days)
    abort_timed_out_interval_ms: int = 10000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    remove_expired_interval_ms: int = 3600000  # transaction.remove.expired.transaction.cleanup.interval.ms
    load_wait_s: float = 10.0  # how long a request waits for a shard to load before LOAD_IN_PROGRESS
    marker_retry_backoff_ms: int = 100  # between marker attempts to a partition that failed
    # An add waits this long for the write or completion before it (then CONCURRENT_TRANSACTIONS).
    max_wait_ms: int = 5000
