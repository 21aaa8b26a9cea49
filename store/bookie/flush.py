"""The maintenance thread's part of a write-cache flush and of a checkpoint.

A flush appends the entries sorted by (ledger, entry) to the current entry log, fdatasyncs it
(so no index record ever points at bytes that are not on disk), then writes the index records,
both into the ledgers' in-memory LedgerIndex (one atomic bytearray operation per run of entry
ids, so the event loop may read them meanwhile) and into their files, unsynced. A checkpoint
also unlinks the index files of deleted ledgers, fdatasyncs every index file written since the
last checkpoint, and replaces the ledger state file with its journal mark.
"""

from __future__ import annotations

import os
from itertools import starmap
from pathlib import Path

from store.bookie.entry_log import EntryLogs, Location
from store.bookie.index import LOC, LOC_SIZE, LedgerIndex, index_path, write_states
from store.bookie.journal import JournalMark

Entry = bytes | memoryview  # a packed entry, as received (a view when that saved a copy)


class FlushWriter:
    """Used from the storage's single maintenance thread only."""

    def __init__(self, logs: EntryLogs, data_dir: Path, index_dir: Path) -> None:
        self.logs = logs
        self.data_dir = data_dir
        self.index_dir = index_dir
        self.dirty: set[int] = set()  # ledgers whose index files were written, not yet synced

    def write(
        self,
        flushing: dict[int, dict[int, Entry]],
        idxs: dict[int, LedgerIndex],
        deleted: set[int],
        states: dict[int, tuple[int, int, int]] | None,
        mark: JournalMark,
    ) -> dict[int, dict[int, int]]:
        """Flush these entries (and, with states, checkpoint). Returns, per ledger, the
        live-byte change of each entry log."""
        groups: list[tuple[int, list[int], int]] = []  # ledger, sorted entry ids, first position
        entries: list[Entry] = []
        for lid in sorted(flushing):
            c = flushing[lid]
            eids = sorted(c)
            groups.append((lid, eids, len(entries)))
            entries.extend(map(c.__getitem__, eids))
        live: dict[int, dict[int, int]] = {}
        if entries:
            locs = self.logs.append_many(entries)
            self.logs.sync()  # before any index record points at these bytes
            for lid, eids, start in groups:
                live[lid] = self._index_ledger(lid, idxs[lid], eids, locs[start : start + len(eids)])
                self.dirty.add(lid)
        if states is not None:
            for lid in deleted:
                index_path(self.index_dir, lid).unlink(missing_ok=True)
                self.dirty.discard(lid)
            for lid in self.dirty:
                try:
                    fd = os.open(index_path(self.index_dir, lid), os.O_WRONLY)
                except FileNotFoundError:
                    continue
                try:
                    os.fdatasync(fd)
                finally:
                    os.close(fd)
            self.dirty.clear()
            write_states(self.data_dir, mark, states)
        return live

    def _index_ledger(
        self, lid: int, idx: LedgerIndex, eids: list[int], locs: list[Location]
    ) -> dict[int, int]:
        """Write one ledger's new locations to its index (memory and file, not synced)."""
        deltas: dict[int, int] = {}
        n = len(eids)
        fd = os.open(index_path(self.index_dir, lid), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            i = 0
            while i < n:
                j = n
                if eids[-1] - eids[i] != n - 1 - i:  # not one dense run: find where this one ends
                    j = i + 1
                    while j < n and eids[j] == eids[j - 1] + 1:
                        j += 1
                buf = b"".join(starmap(LOC.pack, locs[i:j]))
                old = idx.put_run(eids[i], buf)
                if old.count(0) != len(old):  # rewritten entries (recovery): their old bytes die
                    for log_id, _off, size in LOC.iter_unpack(old):
                        if size:
                            deltas[log_id] = deltas.get(log_id, 0) - size - 4
                os.pwrite(fd, buf, eids[i] * LOC_SIZE)
                i = j
        finally:
            os.close(fd)
        if locs[0][0] == locs[-1][0]:
            deltas[locs[0][0]] = deltas.get(locs[0][0], 0) + sum(loc[2] for loc in locs) + 4 * n
        else:  # the entry log rolled in the middle of this ledger
            for log_id, _off, size in locs:
                deltas[log_id] = deltas.get(log_id, 0) + size + 4
        return deltas

