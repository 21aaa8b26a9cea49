"""Reading a segmented log without owning it (e.g. a batch job): nothing is fenced. Closed
ledgers are read in full, the owner's open ledger up to the LAC the bookies know."""

from __future__ import annotations

import bisect

from store.managed.errors import NoSuchLogError
from store.managed.ledgers import LedgerClientLike
from store.managed.log import DEFAULT_MAX_READ_BYTES
from store.managed.metadata import LedgerInfo, LogMetadata
from store.managed.names import log_path
from store.managed.position import Entry, Position
from store.managed.reads import BookieReads
from store.meta.api import MetaStore, NoNodeError


class ManagedLogReader:
    def __init__(self, meta: MetaStore, client: LedgerClientLike, name: str) -> None:
        self.meta = meta
        self.client = client
        self.name = name
        self._md = LogMetadata()
        self._ids: list[int] = []
        self._reads = BookieReads(client)

    @classmethod
    async def open(cls, meta: MetaStore, client: LedgerClientLike, name: str) -> ManagedLogReader:
        self = cls(meta, client, name)
        await self.refresh()
        return self

    async def refresh(self) -> None:
        """Re-read the ledger list (new ledgers after the owner rolled, deleted ones)."""
        try:
            data, stat = await self.meta.get(log_path(self.name))
        except NoNodeError:
            raise NoSuchLogError(self.name) from None
        self._md = LogMetadata.from_bytes(data, stat.version)
        self._ids = [li.ledger_id for li in self._md.ledgers]

    @property
    def ledgers(self) -> list[LedgerInfo]:
        return [li.copy() for li in self._md.ledgers]

    @property
    def start(self) -> Position:
        first = Position(self._ids[0], 0) if self._ids else Position(0, 0)
        return max(first, self._md.start) if self._md.start is not None else first

    async def _last(self, idx: int, want: int) -> int:
        """Last readable entry of the idx-th ledger (asks the bookies for an open one)."""
        li = self._md.ledgers[idx]
        if li.closed:
            return li.entries - 1
        h = await self._reads.handle(li.ledger_id)
        lac: int = h.last_add_confirmed
        if want > lac:
            lac = await h.read_lac()
        return lac

    async def read(
        self, start: Position, max_entries: int = 1000, max_bytes: int = DEFAULT_MAX_READ_BYTES
    ) -> list[Entry]:
        """Entries from `start` on, as ManagedLog.read, up to what is confirmed on the bookies.
        Call refresh() when this returns nothing to see ledgers started since."""
        out: list[Entry] = []
        total = 0
        pos = max(start, self.start)
        i = bisect.bisect_left(self._ids, pos.ledger_id)
        entry = max(pos.entry_id, 0) if i < len(self._ids) and self._ids[i] == pos.ledger_id else 0
        while i < len(self._ids) and len(out) < max_entries and (not out or total < max_bytes):
            lid = self._ids[i]
            last = await self._last(i, entry)
            if entry > last:
                if not self._md.ledgers[i].closed:
                    break  # the open tail: nothing more confirmed yet
                i, entry = i + 1, 0
                continue
            li = self._md.ledgers[i]
            avg = li.size // li.entries if li.entries else 1024
            want = min(last, entry + max_entries - len(out) - 1)
            data = await self._reads.read(
                lid, entry, want, last, max(max_bytes - total, 1), avg, is_open=not li.closed
            )
            if not data:
                break
            for k, d in enumerate(data):
                out.append(Entry(Position(lid, entry + k), d))
                total += len(d)
            entry += len(data)
        return out

    async def close(self) -> None:
        await self._reads.close()
