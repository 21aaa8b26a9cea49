"""A partition's segmented-log configuration from its topic's Kafka configs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from store import layout
from store.managed.config import LogConfig
from store.meta.api import MetaStore, NoNodeError

if TYPE_CHECKING:
    from gateway.topics.registry import TopicInfo


def _max_segment_ms(topic: TopicInfo) -> int:
    """Kafka's LogConfig.maxSegmentMs: a compacted topic's ledger also closes by
    max.compaction.lag.ms, so the cleaner can clean its records in time."""
    seg = topic.config_int("segment.ms")
    return min(seg, topic.config_int("max.compaction.lag.ms")) if topic.compacted else seg


def log_config_for(
    topic: TopicInfo,
    *,
    replication: tuple[int, int, int] | None = None,
    stored: LogConfig | None = None,
) -> LogConfig:
    """segment.bytes/segment.ms -> rollover, retention.ms/bytes -> retention (Kafka consumers
    hold no cursors, so retention alone decides; not for cleanup.policy=compact), min.insync.replicas (when set on the topic)
    -> ack quorum, remote.storage.enable and local.retention.ms/bytes (KIP-405; -2: as
    retention.*) -> the offload policy. Replication is `replication` (E, WQ, AQ), else the
    stored one."""
    base = stored or LogConfig()
    e, wq, aq = replication or (base.ensemble_size, base.write_quorum, base.ack_quorum)
    if "min.insync.replicas" in topic.configs:
        aq = max(1, min(wq, topic.config_int("min.insync.replicas")))
    local_bytes = topic.config_int("local.retention.bytes")
    local_ms = topic.config_int("local.retention.ms")
    return LogConfig(
        offload=topic.config("remote.storage.enable").lower() == "true",
        offload_bytes=topic.config_int("retention.bytes") if local_bytes == -2 else local_bytes,
        offload_ms=topic.config_int("retention.ms") if local_ms == -2 else local_ms,
        ensemble_size=e,
        write_quorum=wq,
        ack_quorum=aq,
        max_entries=base.max_entries,
        max_bytes=max(1, topic.config_int("segment.bytes")),
        max_age_s=max(0.001, _max_segment_ms(topic) / 1000.0),
        min_age_s=base.min_age_s,
        # cleanup.policy=compact alone: the cleaner, not retention, bounds the log (as Kafka).
        retention_ms=topic.config_int("retention.ms") if topic.deletes else -1,
        retention_bytes=topic.config_int("retention.bytes") if topic.deletes else -1,
        cursor_ensemble_size=min(base.cursor_ensemble_size, e),
        cursor_write_quorum=min(base.cursor_write_quorum, wq),
        cursor_ack_quorum=min(base.cursor_ack_quorum, aq),
    )


async def fallback_replication(meta: MetaStore) -> tuple[int, int, int]:
    """LogConfig's default (E, WQ, AQ) capped by the bookies registered now, for callers that
    pass no replication (the gateway should pass GatewayConfig's)."""
    try:
        n = len(await meta.children(layout.BOOKIES_AVAILABLE))
    except NoNodeError:
        n = 0
    d = LogConfig()
    e = max(1, min(d.ensemble_size, n))
    wq = min(d.write_quorum, e)
    return e, wq, min(d.ack_quorum, wq)
