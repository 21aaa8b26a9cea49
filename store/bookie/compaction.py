"""Entry-log garbage collection: the live bytes of each entry log, and compaction, which
rewrites the entries still live in mostly dead logs into the current one and deletes them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from pathlib import Path

from store.bookie.entry_log import EntryLogs, Location, read_run
from store.bookie.index import LedgerIndex, index_path, write_index

log = logging.getLogger(__name__)


class Compactor:
    def __init__(self, logs: EntryLogs, index_dir: Path, threshold: float) -> None:
        self.logs = logs
        self.index_dir = index_dir
        self.threshold = threshold  # compact logs whose live fraction is below this
        self.live: dict[int, int] = {}  # entry log id -> live bytes (records incl. length prefix)
        self.compactions = 0

    def count(self, idx: LedgerIndex, sign: int) -> None:
        """Count a ledger's indexed entries as live (sign 1) or dead (sign -1)."""
        for _, (log_id, _off, n) in idx.items():
            self.live[log_id] = self.live.get(log_id, 0) + sign * (n + 4)

    def add(self, deltas: dict[int, int]) -> None:
        """Live-byte changes per entry log (from a flush)."""
        for log_id, d in deltas.items():
            self.live[log_id] = self.live.get(log_id, 0) + d

    def live_fraction(self, log_id: int) -> float:
        size = self.logs.sizes.get(log_id, 0)
        return self.live.get(log_id, 0) / size if size else 1.0

    async def compact(self, indexes: dict[int, LedgerIndex], pool: concurrent.futures.Executor) -> int:
        """Rewrite entry logs whose live fraction is below the threshold; returns how many.
        The caller holds the storage's maintenance lock; `pool` is its maintenance thread."""
        victims = {
            log_id
            for log_id, size in self.logs.sizes.items()
            if log_id != self.logs.current and (size == 0 or self.live_fraction(log_id) < self.threshold)
        }
        if not victims:
            return 0
        moves: list[tuple[int, int, Location]] = []
        for lid, idx in indexes.items():
            for eid, loc in idx.items():
                if loc[0] in victims:
                    moves.append((lid, eid, loc))
        moves.sort(key=lambda m: (m[0], m[1]))
        fds = {v: self.logs.acquire(v) for v in victims}
        loop = asyncio.get_running_loop()
        try:
            new_locs = await loop.run_in_executor(pool, self._compact_sync, moves, fds)
        finally:
            for v in victims:
                self.logs.release(v)
        for (lid, eid, old), new in zip(moves, new_locs):
            cur = indexes.get(lid)
            if cur is None or cur.get(eid) != old:
                continue
            cur.set(eid, new)
            self.live[old[0]] = self.live.get(old[0], 0) - old[2] - 4
            self.live[new[0]] = self.live.get(new[0], 0) + new[2] + 4
        for v in victims:
            self.logs.delete(v)
            self.live.pop(v, None)
        self.compactions += len(victims)
        log.info("compacted %d entry logs, moved %d entries", len(victims), len(moves))
        return len(victims)

    def _compact_sync(self, moves: list[tuple[int, int, Location]], fds: dict[int, int]) -> list[Location]:
        datas = [read_run(fds[loc[0]], loc[1], loc[2]) for _, _, loc in moves]
        new_locs = self.logs.append_many(datas) if datas else []
        self.logs.sync()
        per_ledger: dict[int, list[tuple[int, Location]]] = {}
        for (lid, eid, _), loc in zip(moves, new_locs):
            per_ledger.setdefault(lid, []).append((eid, loc))
        for lid, updates in per_ledger.items():
            if index_path(self.index_dir, lid).exists():
                write_index(self.index_dir, lid, updates)
        return new_locs
