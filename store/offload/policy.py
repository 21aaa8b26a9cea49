"""Which ledgers of a segmented log to offload, and whose bookie copies may go (pure decisions)."""

from __future__ import annotations

from store.managed.config import LogConfig
from store.managed.metadata import LedgerInfo


def to_offload(ledgers: list[LedgerInfo], cfg: LogConfig, now_ms: int, *, force: bool = False) -> list[int]:
    """Closed, non-empty, not yet offloaded ledgers (never the current one) that the policy
    sends to the tier, oldest first. Walking newest to oldest, a ledger goes once the closed
    ledgers up to it hold more than offload_bytes, or once older than offload_ms
    (Pulsar's managedLedgerOffloadThresholdInBytes, plus an age). `force`: all of them."""
    closed = [li for li in ledgers[:-1] if li.closed and li.entries > 0]
    if not force and not cfg.offload:
        return []
    out: list[int] = []
    newer = 0
    for li in reversed(closed):
        due = force
        due = due or (cfg.offload_bytes >= 0 and newer + li.size > cfg.offload_bytes)
        due = due or (cfg.offload_ms >= 0 and now_ms - li.last_ms >= cfg.offload_ms)
        if due and li.offload is None:
            out.append(li.ledger_id)
        newer += li.size
    return sorted(out)


def bookie_copies_due(ledgers: list[LedgerInfo], lag_ms: int, now_ms: int) -> list[int]:
    """Offloaded ledgers whose bookie copy has outlived the deletion lag."""
    return [
        li.ledger_id
        for li in ledgers
        if li.offload is not None and not li.offload.bookie_deleted and now_ms - li.offload.at_ms >= lag_ms
    ]


def on_bookies(ledgers: list[LedgerInfo]) -> int:
    """Bytes still held by bookies (the current ledger's as last recorded)."""
    return sum(li.size for li in ledgers if li.offload is None or not li.offload.bookie_deleted)


def offloaded(ledgers: list[LedgerInfo]) -> int:
    return sum(li.offload.size for li in ledgers if li.offload is not None)
