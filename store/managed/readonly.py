"""Reading a segmented log without owning it (the non-owning mode of store/managed/reader.py:
batch jobs, `quire admin`): nothing is fenced. Closed ledgers are read in full, the owner's
open ledger up to the LAC the bookies know; `read_unconfirmed` also reads past it."""

from __future__ import annotations

from store.ledger.errors import NoSuchLedgerError
from store.managed.errors import NoSuchLogError
from store.managed.ledgers import LedgerClientLike
from store.managed.metadata import LedgerInfo, LogMetadata
from store.managed.names import log_path
from store.managed.position import Entry, Position
from store.managed.reader import LogReader, OffloadedSource
from store.managed.reads import BookieReads
from store.meta.api import MetaStore, NoNodeError

MAX_UNCONFIRMED = 1000  # entries probed past an open ledger's LAC (a writer's in-flight window)


class ManagedLogReader(LogReader):
    def __init__(
        self, meta: MetaStore, client: LedgerClientLike, name: str, offloaded: OffloadedSource | None = None
    ) -> None:
        self.meta = meta
        self._offloaded = offloaded
        self.client = client
        self.name = name
        self._md = LogMetadata()
        self._ids: list[int] = []
        self._reads = BookieReads(client)

    @classmethod
    async def open(
        cls, meta: MetaStore, client: LedgerClientLike, name: str, offloaded: OffloadedSource | None = None
    ) -> ManagedLogReader:
        """NoSuchLogError if there is no such log. `offloaded` serves ledgers offloaded to it."""
        self = cls(meta, client, name, offloaded)
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
    def metadata(self) -> LogMetadata:
        """The log's metadata as of the last refresh (not to be modified)."""
        return self._md

    @property
    def ledgers(self) -> list[LedgerInfo]:
        return [li.copy() for li in self._md.ledgers]

    async def _readable_last(self, idx: int, want: int) -> int:
        """Asks the bookies for an open ledger's LAC when `want` is past the one known."""
        li = self._md.ledgers[idx]
        if li.closed:
            return li.entries - 1
        h = await self._reads.handle(li.ledger_id)
        lac: int = h.last_add_confirmed
        if want > lac:
            lac = await h.read_lac()
        return lac

    async def read_unconfirmed(self, after: Position | None, max_entries: int = MAX_UNCONFIRMED) -> list[Entry]:
        """The open tail ledger's entries after `after` (None: from its start) and past its LAC
        that some bookie holds, up to the first none has (BookKeeper's readUnconfirmed).
        Bookies learn an entry's LAC only from the writer's next add (or its explicit LAC),
        so an idle owner's last entries are never confirmed to other readers; an entry any
        bookie holds is one ledger recovery would keep. Read after the confirmed entries."""
        if not self._md.ledgers or self._md.ledgers[-1].closed:
            return []
        lid = self._ids[-1]
        try:
            h = await self._reads.handle(lid)
        except NoSuchLedgerError:
            return []
        first = after.entry_id + 1 if after is not None and after.ledger_id == lid else 0
        first = max(first, h.last_add_confirmed + 1)
        got: list[bytes] = await h.read_unconfirmed(first, max_entries)
        return [Entry(Position(lid, first + k), d) for k, d in enumerate(got)]

    async def last_entry(self, ledger_id: int, *, confirmed_only: bool = False) -> bytes | None:
        """A ledger's last entry, past the LAC if it is open (up to it with `confirmed_only`:
        what repeatable readers may read); None if it is empty or gone."""
        try:
            h = await self._reads.handle(ledger_id)
        except NoSuchLedgerError:
            return None
        last: int = h.last_add_confirmed
        if confirmed_only:
            last = await h.read_lac()
        elif not h.is_closed:
            beyond: list[bytes] = await h.read_unconfirmed(last + 1, MAX_UNCONFIRMED)
            if beyond:
                return beyond[-1]
        if last < 0:
            return None
        got: list[bytes] = await h.read(last, last)
        return got[-1] if got else None

    async def close(self) -> None:
        await self._reads.close()
