"""The Kafka view of a segmented log, over an in-memory log of two ledgers: offset -> position
through the index and the remembered positions, batches from an offset, replay to an end, and
the log-end offset from metadata plus the unindexed tail."""

from __future__ import annotations

from kafka_log.index import P_NEXT, LedgerIndex, OffsetIndex
from kafka_log.keys import L_NEXT
from kafka_log.view import KafkaLogView, batch_offsets, log_end_offset, stored_end_offset
from kafka_wire.records import NewRecord, RecordBatch, build_batch
from store.managed.metadata import LedgerInfo, LogMetadata
from store.managed.position import Entry, Position


class MemoryLog:
    """Entries by position, read in order like a segmented log (skipping ledger ends)."""

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries
        self.reads = 0

    @property
    def start(self) -> Position:
        return self.entries[0].position

    async def read(self, start: Position, max_entries: int = 1000, max_bytes: int = 1 << 20) -> list[Entry]:
        self.reads += 1
        return [e for e in self.entries if e.position >= start][: min(max_entries, 2)]


def batch(base: int, n: int, ts: int) -> bytes:
    return build_batch([NewRecord(None, b"v", timestamp=ts + i) for i in range(n)], base_offset=base)


def make_log() -> tuple[MemoryLog, OffsetIndex]:
    # ledger 5: offsets 0-2, 3-4, 5; ledger 7: offsets 6-9, 10
    layout = [(5, 0, 0, 3), (5, 1, 3, 2), (5, 2, 5, 1), (7, 0, 6, 4), (7, 1, 10, 1)]
    log = MemoryLog([Entry(Position(lid, eid), batch(base, n, 1000 + base)) for lid, eid, base, n in layout])
    index = OffsetIndex()
    for lid, eid, base, n in layout:
        index.add(lid, eid, base, base + n, 1000 + base + n - 1)
    return log, index


async def test_position_of_finds_the_entry_holding_an_offset() -> None:
    log, index = make_log()
    view = KafkaLogView(log, index)
    assert await view.position_of(0) == Position(5, 0)
    assert await view.position_of(4) == Position(5, 1)
    assert await view.position_of(6) == Position(7, 0)
    assert await view.position_of(10) == Position(7, 1)
    assert await view.position_of(11) is None
    assert view.seek(8) == Position(7, 0)  # the dense index is exact
    # ... so position_of needs no read there (a share-partition save asks on every fetch).
    reads = log.reads
    assert await view.position_of(8) == Position(7, 0) and await view.position_of(10) == Position(7, 1)
    assert log.reads == reads


async def test_sparse_index_reads_forward_and_remembered_positions_win() -> None:
    log, _ = make_log()
    view = KafkaLogView(log)  # no index: from the log's start
    assert view.seek(10) == Position(5, 0)
    assert await view.position_of(10) == Position(7, 1)
    view.remember(10, Position(7, 1))
    assert view.seek(10) == Position(7, 1)
    view.forget_positions()
    assert view.seek(10) == Position(5, 0)


async def test_batches_start_at_the_batch_holding_the_offset() -> None:
    log, index = make_log()
    view = KafkaLogView(log, index)
    got = [e for entries in [x async for x in view.batches(4)] for e in entries]
    assert [batch_offsets(e.data) for e in got] == [(3, 4), (5, 5), (6, 9), (10, 10)]
    b = await view.find_batch(Position(5, 0), lambda b: b.max_timestamp >= 1007)
    assert b is not None and (b.base_offset, b.last_offset) == (6, 9)


async def test_replay_yields_whole_batches_up_to_the_end() -> None:
    log, index = make_log()
    view = KafkaLogView(log, index)
    chunks = [c async for c in view.replay(1, Position(7, 0))]
    data = b"".join(chunks)
    seen = []
    pos = 0
    while pos < len(data):
        rb = RecordBatch(data[pos:])
        seen.append((rb.base_offset, rb.last_offset))
        pos += rb.size
    assert seen == [(0, 2), (3, 4), (5, 5), (6, 9)]
    assert len(chunks) == 2  # one run of batches per read


async def test_log_end_offset_from_indexes_then_the_unindexed_tail() -> None:
    log, _ = make_log()
    md = LogMetadata()
    md.props[L_NEXT] = "4"
    md.ledgers = [LedgerInfo(5, entries=3, props={P_NEXT: "6"}), LedgerInfo(7), LedgerInfo(9)]
    assert stored_end_offset(md) == 6
    asked: list[int] = []

    async def last_entry(ledger_id: int) -> bytes | None:
        asked.append(ledger_id)
        return log.entries[-1].data if ledger_id == 7 else None

    assert await log_end_offset(md, last_entry) == 11
    assert asked == [9, 7]  # newest first, stopping at the first that has an entry
    md.ledgers = md.ledgers[:1]
    assert await log_end_offset(md, last_entry) == 6


def gapped_log() -> tuple[MemoryLog, OffsetIndex]:
    # imported batches keep their offsets: ledger 5: 0-2, 10-11 (gap 3-9); ledger 7: 20-22 (gap 12-19)
    layout = [(5, 0, 0, 3), (5, 1, 10, 2), (7, 0, 20, 3)]
    log = MemoryLog([Entry(Position(lid, eid), batch(base, n, 1000 + base)) for lid, eid, base, n in layout])
    index = OffsetIndex()
    for lid, eid, base, n in layout:
        index.add(lid, eid, base, base + n, 1000 + base + n - 1)
    return log, index


async def test_offsets_in_gaps_start_at_the_next_batch() -> None:
    log, index = gapped_log()
    view = KafkaLogView(log, index)
    for offset, base in ((0, 0), (2, 0), (3, 10), (9, 10), (11, 10), (12, 20), (19, 20), (22, 20)):
        async for entries in view.batches(offset):
            assert batch_offsets(entries[0].data)[0] == base, offset
            break
    assert await view.position_of(23) is None
    assert index.find(15) == (7, 0, True)  # a gap between ledgers: the next ledger's first entry


def test_gapped_index_survives_persistence() -> None:
    _, index = gapped_log()
    first = index.ledgers[0]
    first.compact()
    back = LedgerIndex.from_props(5, {k: v for k, v in first.to_props().items() if v is not None})
    assert back is not None
    assert (back.first_offset, back.next_offset, list(back.offsets)) == (0, 12, [0, 10])
    assert back.start_for_offset(5)[0] == 0 and back.start_for_offset(10)[0] == 1
