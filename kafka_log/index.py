"""Offset and timestamp indexes of a partition's ledgers.

Every stored entry is one record batch, so an entry is described by (base offset, next offset,
max timestamp). The open ledger keeps that triple for every entry in memory (dense arrays);
when a ledger is finished the arrays shrink to at most MAX_POINTS sparse points, persisted in
the ledger's properties, so a lookup is a binary search over ledgers then over points, and at
most one stride of entries is read to land on the exact batch.
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass, field

MAX_POINTS = 64
SPARSE_STRIDE = 64
NO_TIMESTAMP = -1

# Ledger property keys (short: they live in the log's metadata node).
P_FIRST = "k.first"  # base offset of entry 0
P_NEXT = "k.next"  # offset after the last covered entry
P_COUNT = "k.n"  # entries covered by this index
P_MAXTS = "k.maxts"  # max timestamp over the covered entries
P_MAXTS_OFF = "k.maxts.off"  # base offset of the (first) batch holding it
P_POINTS = "k.idx"  # sparse points "eid,offset,maxts;..." (deltas from the previous point)


@dataclass
class LedgerIndex:
    """Index of one ledger's entries. Points: (entry id, base offset, max timestamp of the
    entries from this point up to the next one). While `dense`, there is a point per entry."""

    ledger_id: int
    first_offset: int
    next_offset: int = 0
    count: int = 0
    max_ts: int = NO_TIMESTAMP
    max_ts_offset: int = -1
    eids: array = field(default_factory=lambda: array("q"))
    offsets: array = field(default_factory=lambda: array("q"))
    span_ts: array = field(default_factory=lambda: array("q"))
    dense: bool = True

    def add(self, entry_id: int, base: int, nxt: int, max_ts: int) -> None:
        """Record the next entry (entry ids arrive in order)."""
        if self.dense:
            self.eids.append(entry_id)
            self.offsets.append(base)
            self.span_ts.append(max_ts)
        elif not self.eids or entry_id - self.eids[-1] >= SPARSE_STRIDE:
            # sparse and still growing (a rebuild after failover): a point now and then
            self.eids.append(entry_id)
            self.offsets.append(base)
            self.span_ts.append(max_ts)
        else:
            self.span_ts[-1] = max(self.span_ts[-1], max_ts)
        self.count = entry_id + 1
        self.next_offset = nxt
        if max_ts > self.max_ts:
            self.max_ts, self.max_ts_offset = max_ts, base

    def compact(self) -> None:
        """Shrink to at most MAX_POINTS points (spans keep their max timestamps)."""
        n = len(self.eids)
        self.dense = False
        if n <= MAX_POINTS:
            return
        stride = -(-n // MAX_POINTS)
        eids, offs, ts = array("q"), array("q"), array("q")
        for i in range(0, n, stride):
            eids.append(self.eids[i])
            offs.append(self.offsets[i])
            ts.append(max(self.span_ts[i : i + stride]))
        self.eids, self.offsets, self.span_ts = eids, offs, ts

    def start_for_offset(self, offset: int) -> tuple[int, bool]:
        """(entry id to start reading at, exact): the entry holding `offset` when exact, else
        an index point at or before it (read forward from there)."""
        i = bisect.bisect_right(self.offsets, offset) - 1
        if i < 0:
            return 0, False
        return int(self.eids[i]), self.dense

    def start_for_timestamp(self, ts: int) -> int | None:
        """Entry id of the first span whose max timestamp is >= ts (None if no such span)."""
        for i, t in enumerate(self.span_ts):
            if t >= ts:
                return int(self.eids[i])
        return None

    # -- persistence -------------------------------------------------------------------------

    def to_props(self) -> dict[str, str | None]:
        snap = LedgerIndex(self.ledger_id, self.first_offset, eids=array("q", self.eids),
                           offsets=array("q", self.offsets), span_ts=array("q", self.span_ts))
        snap.compact()
        eids, offs, ts = snap.eids, snap.offsets, snap.span_ts
        pts: list[str] = []
        pe, po = 0, self.first_offset
        for e, o, t in zip(eids, offs, ts):
            pts.append(f"{e - pe},{o - po},{t}")
            pe, po = e, o
        return {
            P_FIRST: str(self.first_offset),
            P_NEXT: str(self.next_offset),
            P_COUNT: str(self.count),
            P_MAXTS: str(self.max_ts),
            P_MAXTS_OFF: str(self.max_ts_offset),
            P_POINTS: ";".join(pts),
        }

    @classmethod
    def from_props(cls, ledger_id: int, props: dict[str, str]) -> LedgerIndex | None:
        """The persisted index, or None if the ledger has none (never finished by its owner)."""
        if P_FIRST not in props or P_COUNT not in props:
            return None
        idx = cls(ledger_id, int(props[P_FIRST]), int(props[P_NEXT]), int(props[P_COUNT]),
                  int(props.get(P_MAXTS, NO_TIMESTAMP)), int(props.get(P_MAXTS_OFF, -1)), dense=False)
        pe, po = 0, idx.first_offset
        for pt in filter(None, props.get(P_POINTS, "").split(";")):
            de, do, t = (int(x) for x in pt.split(","))
            pe, po = pe + de, po + do
            idx.eids.append(pe)
            idx.offsets.append(po)
            idx.span_ts.append(t)
        return idx


class OffsetIndex:
    """The ledgers of one partition in offset order (only ledgers holding entries)."""

    def __init__(self) -> None:
        self.ledgers: list[LedgerIndex] = []
        self._firsts: list[int] = []

    def __len__(self) -> int:
        return len(self.ledgers)

    @property
    def last(self) -> LedgerIndex | None:
        return self.ledgers[-1] if self.ledgers else None

    def append_ledger(self, idx: LedgerIndex) -> None:
        self.ledgers.append(idx)
        self._firsts.append(idx.first_offset)

    def get(self, ledger_id: int) -> LedgerIndex | None:
        for li in reversed(self.ledgers):
            if li.ledger_id == ledger_id:
                return li
        return None

    def add(
        self, ledger_id: int, entry_id: int, base: int, nxt: int, max_ts: int, *, start: int | None = None
    ) -> LedgerIndex | None:
        """Record a confirmed entry; `start` (default `base`): the offset the log ended at before
        it, when the entry was imported past a gap (a new ledger then covers the gap, so the
        log's start stays where the imported log's was). Returns the previous ledger's index
        when this entry is the first seen in a new ledger (that ledger is finished: compacted
        here, to persist)."""
        cur = self.last
        finished = None
        if cur is None or cur.ledger_id != ledger_id:
            if cur is not None and cur.dense:
                cur.compact()
                finished = cur
            cur = LedgerIndex(ledger_id, base if start is None else min(start, base))
            self.append_ledger(cur)
        cur.add(entry_id, base, nxt, max_ts)
        return finished

    def drop_before(self, ledger_id: int) -> None:
        """Forget ledgers deleted from the log (retention, DeleteRecords)."""
        if self.ledgers and self.ledgers[0].ledger_id < ledger_id:
            keep = [li for li in self.ledgers if li.ledger_id >= ledger_id]
            self.ledgers = keep
            self._firsts = [li.first_offset for li in keep]

    def find(self, offset: int) -> tuple[int, int, bool] | None:
        """(ledger id, entry id, exact) to start reading `offset` from; None if below the log."""
        i = bisect.bisect_right(self._firsts, offset) - 1
        if i < 0:
            return None
        li = self.ledgers[i]
        if offset >= li.next_offset and i + 1 < len(self.ledgers):
            nxt = self.ledgers[i + 1]
            return nxt.ledger_id, 0, True
        eid, exact = li.start_for_offset(offset)
        return li.ledger_id, eid, exact

    def find_timestamp(self, ts: int) -> tuple[int, int] | None:
        """(ledger id, entry id) of the first span that may hold a timestamp >= ts."""
        for li in self.ledgers:
            if li.max_ts >= ts:
                eid = li.start_for_timestamp(ts)
                if eid is not None:
                    return li.ledger_id, eid
        return None

    def max_timestamp(self) -> tuple[int, int]:
        """(max timestamp, base offset of its batch) over all ledgers; (-1, -1) when empty."""
        best = (NO_TIMESTAMP, -1)
        for li in self.ledgers:
            if li.max_ts > best[0]:
                best = (li.max_ts, li.max_ts_offset)
        return best
