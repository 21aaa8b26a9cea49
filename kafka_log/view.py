"""Offsets over a segmented log: where an offset is, what the log-end offset is, and the stored
batches from an offset on, read in large ranges (never a scan from a ledger's start: the offset
index narrows every search to one index stride)."""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Protocol

from kafka_log.index import P_NEXT, OffsetIndex
from kafka_log.keys import L_NEXT
from kafka_log.txn import AbortedIndex
from kafka_wire.records import RecordBatch
from store.managed.metadata import LogMetadata
from store.managed.position import Entry, Position

SCAN_ENTRIES = 1000
SCAN_BYTES = 8 << 20
_POSITIONS = 64  # remembered read positions (the next offset of recent fetches)

_q = struct.Struct(">q").unpack_from
_i = struct.Struct(">i").unpack_from


def batch_offsets(data: bytes | memoryview) -> tuple[int, int]:
    """(base offset, last offset) of a stored batch (read from its header, no decoding)."""
    base = _q(data, 0)[0]
    return base, base + _i(data, 23)[0]


class SegmentedLog(Protocol):
    """What this view reads: an owned ManagedLog or a non-owning ManagedLogReader."""

    @property
    def start(self) -> Position: ...

    async def read(self, start: Position, max_entries: int = ..., max_bytes: int = ...) -> list[Entry]: ...


async def scan(
    log: SegmentedLog, start: Position, *, end: Position | None = None, max_bytes: int = SCAN_BYTES
) -> AsyncGenerator[list[Entry], None]:
    """The stored batches from `start` on (up to `end`, inclusive, if given), one list per
    large read."""
    pos = start
    while True:
        got = await log.read(pos, SCAN_ENTRIES, max_bytes)
        if end is not None and got and got[-1].position > end:
            got = [e for e in got if e.position <= end]
        if not got:
            return
        yield got
        last = got[-1].position
        pos = Position(last.ledger_id, last.entry_id + 1)  # reads skip past a ledger's end


class KafkaLogView:
    """One Kafka log: its offset index, its aborted-transactions index, and the positions
    recent reads stopped at."""

    def __init__(self, log: SegmentedLog, index: OffsetIndex | None = None) -> None:
        self.log = log
        self.index = index if index is not None else OffsetIndex()
        self.aborted = AbortedIndex()
        self._positions: OrderedDict[int, Position] = OrderedDict()  # next offset -> position

    def seek(self, offset: int) -> Position:
        """Where to start reading for `offset`: the entry holding it, or one before it (read
        forward from there); the log's start if the index has nothing before it."""
        pos = self._positions.get(offset)
        if pos is not None:
            return pos
        found = self.index.find(offset)
        if found is None:
            return self.log.start
        return Position(found[0], found[1])

    def remember(self, offset: int, pos: Position) -> None:
        """A read ended before `offset`, whose batch starts at (or is found from) `pos`."""
        self._positions[offset] = pos
        self._positions.move_to_end(offset)
        while len(self._positions) > _POSITIONS:
            self._positions.popitem(last=False)

    def forget_positions(self) -> None:
        """The log's start moved (DeleteRecords): remembered positions may be gone."""
        self._positions.clear()

    async def batches(self, offset: int, *, end: Position | None = None) -> AsyncGenerator[list[Entry], None]:
        """Stored batches from the one holding `offset` on (up to `end`), one list per read."""
        async for entries in scan(self.log, self.seek(offset), end=end):
            if batch_offsets(entries[-1].data)[1] < offset:
                continue
            yield [e for e in entries if batch_offsets(e.data)[1] >= offset]

    async def position_of(self, offset: int) -> Position | None:
        """The position of the entry holding `offset`; None if the log ends before it."""
        found, last = self.index.find(offset), self.index.last
        if found is not None and found[2] and last is not None and offset < last.next_offset:
            return Position(found[0], found[1])  # a dense ledger index knows it: no read
        async with aclosing(self.batches(offset)) as it:
            async for entries in it:
                return entries[0].position
        return None

    async def find_batch(self, start: Position, pred: Callable[[RecordBatch], bool]) -> RecordBatch | None:
        """The first batch from `start` on satisfying pred (a bounded forward scan: `start`
        comes from the index)."""
        async with aclosing(scan(self.log, start)) as it:
            async for entries in it:
                for e in entries:
                    b = RecordBatch(e.data)
                    if pred(b):
                        return b
        return None

    async def replay(self, offset: int, end: Position) -> AsyncIterator[bytes]:
        """Every stored batch from the one holding `offset` to `end`, as runs of whole batches
        (one per read): for logs replayed into memory."""
        async for entries in self.batches(offset, end=end):
            yield b"".join(e.data for e in entries)


def stored_end_offset(md: LogMetadata) -> int:
    """The log-end offset as far as the metadata knows (the owner's checkpoint and the indexes
    of finished ledgers); an owner's open ledger may hold more."""
    indexed = [int(li.props[P_NEXT]) for li in md.ledgers if P_NEXT in li.props]
    return max([int(md.props.get(L_NEXT, "0")), *indexed])


async def log_end_offset(md: LogMetadata, last_entry: Callable[[int], Awaitable[bytes | None]]) -> int:
    """The offset after the log's last stored batch. Indexed ledgers give it from metadata;
    later ones (the open tail, a recovered one not indexed yet) by `last_entry(ledger id)`."""
    known = stored_end_offset(md)
    for li in reversed(md.ledgers):
        if P_NEXT in li.props:
            break
        data = await last_entry(li.ledger_id)
        if data is not None:
            return max(known, batch_offsets(data)[1] + 1)
    return known
