"""Per-log configuration: replication, rollover and retention, and the rollover decision."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

MiB = 1 << 20


@dataclass(frozen=True)
class LogConfig:
    ensemble_size: int = 3
    write_quorum: int = 2
    ack_quorum: int = 2
    # Rollover: a ledger is full at max_entries or max_bytes, or once older than max_age_s;
    # it never rolls before min_age_s (0: no minimum).
    max_entries: int = 50_000
    max_bytes: int = 512 * MiB
    max_age_s: float = 4 * 3600.0
    min_age_s: float = 0.0
    # Retention of ledgers wholly behind every durable cursor: deleted once older than
    # retention_ms OR while the rest still holds retention_bytes. -1 disables that rule
    # (both -1: keep forever). Pulsar's default is 0/0: delete as soon as consumed.
    retention_ms: int = 0
    retention_bytes: int = -1
    # Offload (store/offload): closed ledgers go to the offload tier, oldest first, once the
    # closed ledgers newer than them hold more than offload_bytes (-1: no size rule), or once
    # older than offload_ms (-1: no age rule). Nothing is offloaded unless `offload`.
    offload: bool = False
    offload_bytes: int = -1
    offload_ms: int = -1
    # Empty ledgers recovered at takeover are deleted only this long after (see LogMetadata).
    deferred_delete_s: float = 300.0
    # Cursor ledgers (one per durable cursor).
    cursor_ensemble_size: int = 3
    cursor_write_quorum: int = 2
    cursor_ack_quorum: int = 2

    def __post_init__(self) -> None:
        for e, w, a in (
            (self.ensemble_size, self.write_quorum, self.ack_quorum),
            (self.cursor_ensemble_size, self.cursor_write_quorum, self.cursor_ack_quorum),
        ):
            if not e >= w >= a >= 1:
                raise ValueError(f"need E >= WQ >= AQ >= 1, got {e}/{w}/{a}")
        if self.max_entries < 1 or self.max_bytes < 1 or self.max_age_s <= 0:
            raise ValueError("rollover limits must be positive")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> LogConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in known})


def should_roll(cfg: LogConfig, entries: int, size: int, age_s: float) -> bool:
    """Whether the current ledger (entries appended so far, bytes, age) should be closed."""
    if entries == 0 or age_s < cfg.min_age_s:
        return False
    return entries >= cfg.max_entries or size >= cfg.max_bytes or age_s >= cfg.max_age_s
