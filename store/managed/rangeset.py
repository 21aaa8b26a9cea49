"""A set of log positions stored as sorted, disjoint, non-adjacent ranges within one ledger.

Cursors keep the individually acknowledged entries after their mark-delete position here; the
memory and the persisted size grow with the number of ranges, not of entries.
"""

from __future__ import annotations

from collections.abc import Iterator

from sortedcontainers import SortedDict

from store.managed.position import Position

Range = tuple[int, int, int]  # (ledger_id, first_entry, last_entry), inclusive


class RangeSet:
    def __init__(self, ranges: list[Range] | None = None) -> None:
        self._d: SortedDict = SortedDict()  # (ledger, first) -> last
        self._count = 0
        for lid, first, last in ranges or ():
            self.add(lid, first, last)

    def __len__(self) -> int:
        """Number of ranges."""
        return len(self._d)

    @property
    def count(self) -> int:
        """Number of positions covered."""
        return self._count

    def __iter__(self) -> Iterator[Range]:
        for (lid, first), last in self._d.items():
            yield lid, first, last

    def ranges(self) -> list[Range]:
        return list(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RangeSet) and self.ranges() == other.ranges()

    def __repr__(self) -> str:
        return f"RangeSet({self.ranges()!r})"

    def add(self, ledger_id: int, first: int, last: int) -> int:
        """Add [first, last] in one ledger; returns how many positions were newly covered."""
        if last < first:
            raise ValueError(f"empty range {first}..{last}")
        d = self._d
        lo, hi, merged = first, last, 0
        # Ranges overlapping or adjacent to [first, last] start at or before last + 1.
        idx = d.bisect_right((ledger_id, last + 1)) - 1
        while idx >= 0:
            (lid, f), l_ = d.peekitem(idx)
            if lid != ledger_id or l_ < first - 1:
                break
            lo, hi = min(lo, f), max(hi, l_)
            merged += l_ - f + 1
            del d[(lid, f)]
            idx -= 1
        d[(ledger_id, lo)] = hi
        added = (hi - lo + 1) - merged
        self._count += added
        return added

    def contains(self, pos: Position) -> bool:
        idx = self._d.bisect_right((pos.ledger_id, pos.entry_id)) - 1
        if idx < 0:
            return False
        (lid, _f), last = self._d.peekitem(idx)
        return lid == pos.ledger_id and pos.entry_id <= last

    def first(self) -> Range | None:
        if not self._d:
            return None
        (lid, f), last = self._d.peekitem(0)
        return lid, f, last

    def remove_upto(self, pos: Position) -> int:
        """Drop every position <= pos; returns how many were removed."""
        d = self._d
        removed = 0
        while d:
            (lid, f), last = d.peekitem(0)
            if (lid, f) > (pos.ledger_id, pos.entry_id):
                break
            del d[(lid, f)]
            if lid == pos.ledger_id and last > pos.entry_id:
                d[(lid, pos.entry_id + 1)] = last
                removed += pos.entry_id + 1 - f
                break
            removed += last - f + 1
        self._count -= removed
        return removed

    def count_in_ledger_range(self, ledger_lo: int, ledger_hi: int) -> int:
        """Positions covered in ledgers ledger_lo <= id <= ledger_hi."""
        n = 0
        for key in self._d.irange((ledger_lo, -2), (ledger_hi + 1, -2), inclusive=(True, False)):
            n += self._d[key] - key[1] + 1
        return n

    def clear(self) -> None:
        self._d.clear()
        self._count = 0

    def copy(self) -> RangeSet:
        out = RangeSet()
        out._d = self._d.copy()
        out._count = self._count
        return out
