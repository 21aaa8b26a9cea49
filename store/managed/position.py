"""Positions in a segmented log: (ledger id, entry id), totally ordered."""

from __future__ import annotations

from typing import NamedTuple


class Position(NamedTuple):
    ledger_id: int
    entry_id: int  # -1 means "before the ledger's first entry"

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"


class Entry(NamedTuple):
    """One stored entry as returned by reads: its position and payload."""

    position: Position
    data: bytes | memoryview  # a view when the entry cache holds one (store/managed/cache.py)


EARLIEST = Position(-1, -1)  # sorts before every real position
