"""Which consumed ledgers the retention policy lets go (a pure decision, oldest first)."""

from __future__ import annotations

from store.managed.config import LogConfig
from store.managed.metadata import LedgerInfo
from store.managed.position import Position


def consumed_prefix(ledgers: list[LedgerInfo], slowest: Position | None) -> list[LedgerInfo]:
    """The closed ledgers (oldest first, never the last/current one) that lie wholly at or
    before `slowest` (the smallest durable cursor mark-delete; None: no cursors)."""
    out: list[LedgerInfo] = []
    for li in ledgers[:-1]:
        if not li.closed:
            break
        if slowest is not None and not (
            li.ledger_id < slowest.ledger_id
            or (li.ledger_id == slowest.ledger_id and slowest.entry_id >= li.entries - 1)
        ):
            break
        out.append(li)
    return out


def select_for_deletion(
    consumed: list[LedgerInfo], total_size: int, cfg: LogConfig, now_ms: int
) -> list[int]:
    """Ledger ids to delete: a prefix of `consumed` whose ledgers are older than retention_ms
    or whose removal still leaves at least retention_bytes in the log (-1 disables a rule)."""
    out: list[int] = []
    deleting = 0
    for li in consumed:
        expired = cfg.retention_ms >= 0 and now_ms - li.last_ms >= cfg.retention_ms
        over = cfg.retention_bytes >= 0 and total_size - (deleting + li.size) >= cfg.retention_bytes
        if not (expired or over):
            break
        out.append(li.ledger_id)
        deleting += li.size
    return out
