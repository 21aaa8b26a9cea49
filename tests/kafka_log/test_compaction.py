"""Log compaction over ledgers: the key map, the rewrite (offsets kept, gaps stay gaps) and a
whole pass over a managed log on the in-memory ledger client."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kafka_log.compaction import P_CLEANED_AT, P_MARKERS, P_TOMBSTONES, CleanerPolicy, OffsetMap, clean
from kafka_log.index import P_NEXT
from kafka_log.txn import P_ABORTED, AbortedIndex, AbortedTxn
from kafka_wire.records import RecordBatch, read_end_txn_marker
from kafka_wire.records.builder import NewRecord, build_batch
from kafka_wire.records.control import build_end_txn_marker
from store.managed.cache import EntryCache
from store.managed.config import LogConfig
from store.managed.log import ManagedLog
from store.managed.position import Position
from store.meta.api import MetaStore
from store.meta.factory import open_meta
from tests.store.managed.fakes import FakeLedgerClient

CFG = LogConfig(ensemble_size=1, write_quorum=1, ack_quorum=1, max_entries=3, retention_ms=-1)


@pytest.fixture
async def meta(tmp_path: Path) -> AsyncIterator[MetaStore]:
    m = open_meta(f"embedded://{tmp_path / 'meta'}")
    await m.start()
    try:
        yield m
    finally:
        await m.close()


def test_offset_map_is_bounded_and_hashes_keys() -> None:
    m = OffsetMap(3 * 24 / 0.9 + 1)
    assert m.capacity == 3
    m.put(b"k", 5)
    m.put(b"k", 9)
    assert m.latest(b"k") == 9 and m.latest(b"x") == -1 and len(m) == 1
    later = OffsetMap(1 << 20)
    for k, off in ((b"k", 12), (b"a", 10), (b"a", 11), (b"b", 13)):
        later.put(k, off)
    assert m.merge(later) and (len(m), m.latest(b"k"), m.latest(b"a")) == (3, 12, 11)
    one_more = OffsetMap(1 << 20)
    one_more.put(b"c", 14)
    assert not m.merge(one_more) and m.latest(b"c") == -1  # full: nothing added


def _at(batch: bytearray, base: int) -> bytes:
    RecordBatch(batch).set_base_offset(base)
    return bytes(batch)


async def _log(store: MetaStore, client: FakeLedgerClient, batches: list[bytes]) -> ManagedLog:
    """Each batch one entry, 3 to a ledger; the index's next offset recorded per ledger."""
    mlog = await ManagedLog.open(store, client, "t/c-0", config=CFG, cache=EntryCache())
    for b in batches:
        await mlog.append(b)
    await mlog.flush()
    for li in mlog.ledgers[:-1]:
        last = RecordBatch((await mlog.read(Position(li.ledger_id, li.entries - 1)))[0].data)
        await mlog.set_ledger_properties(li.ledger_id, {P_NEXT: str(last.last_offset + 1)})
    return mlog


async def _records(mlog: ManagedLog) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for e in await mlog.read(Position(0, 0), max_entries=1000):
        b = RecordBatch(e.data)
        out += [(b.base_offset + r.offset_delta, r.key, r.value) for r in b.records() if not b.is_control]
    return out


async def test_pass_keeps_latest_per_key_at_original_offsets(meta: MetaStore) -> None:
    client = FakeLedgerClient()
    kv = [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1"), (b"b", None), (b"a", b"3"), (b"d", b"1")]
    batches = [build_batch([NewRecord(k, v, timestamp=1000)], base_offset=i) for i, (k, v) in enumerate(kv)]
    # a two-record batch whose first record goes: the batch keeps its base offset (a gap inside)
    batches.insert(2, build_batch([NewRecord(b"c", b"0", timestamp=1000), NewRecord(b"e", b"1", timestamp=1000)],
                                  base_offset=2))
    for i in range(3, len(batches)):
        batches[i] = build_batch([NewRecord(*kv[i - 1], timestamp=1000)], base_offset=i + 1)
    # offsets: 0 a=1, 1 b=1, 2 c=0, 3 e=1, 4 a=2, 5 c=1, 6 b=null, 7 a=3, 8 d=1 (open ledger)
    mlog = await _log(meta, client, batches)
    before = [(li.ledger_id, li.entries) for li in mlog.ledgers]
    pol = CleanerPolicy(min_dirty_ratio=0.5, delete_retention_ms=10_000)
    done = await clean(mlog, pol, now=int(time.time() * 1000), lso=100, aborted=[], map_bytes=1 << 20)
    assert done == [li for li, _ in before[:2]]
    assert [(li.ledger_id, li.entries) for li in mlog.ledgers] == before  # entries and positions kept
    # the open ledger (7, 8) is not mapped, as Kafka's active segment: a=2 at 4 stays for now
    assert await _records(mlog) == [(3, b"e", b"1"), (4, b"a", b"2"), (5, b"c", b"1"), (6, b"b", None),
                                    (7, b"a", b"3"), (8, b"d", b"1")]
    # offsets inside a cleaned range: the batch holding offset 1 is now an empty header that
    # still ends at offset 1, so a reader positioned there moves on to the next offset
    emptied = RecordBatch((await mlog.read(Position(done[0], 1)))[0].data)
    assert (emptied.base_offset, emptied.last_offset, emptied.record_count) == (1, 1, 0)
    assert emptied.compute_crc() == emptied.crc
    gap = RecordBatch((await mlog.read(Position(done[0], 2)))[0].data)
    assert (gap.base_offset, gap.last_offset, gap.record_count) == (2, 3, 1)
    # the tombstone survives the first cleaning (Kafka's delete horizon starts then); nothing
    # dirty and the horizon not reached: no pass; past it, a pass drops the tombstone
    assert mlog.ledgers[1].props[P_TOMBSTONES] == "1" and P_TOMBSTONES not in mlog.ledgers[0].props
    at = int(mlog.ledgers[0].props[P_CLEANED_AT])
    assert await clean(mlog, pol, now=at + 9_999, lso=100, aborted=[], map_bytes=1 << 20) == []
    assert await clean(mlog, pol, now=at + 10_000, lso=100, aborted=[], map_bytes=1 << 20) == done
    assert (6, b"b", None) not in await _records(mlog)
    assert P_TOMBSTONES not in mlog.ledgers[1].props and mlog.ledgers[1].props[P_CLEANED_AT] == str(at)
    await mlog.close()


async def test_pass_removes_aborted_data_keeps_markers_and_respects_lso_and_lag(meta: MetaStore) -> None:
    client = FakeLedgerClient()
    batches = [
        build_batch([NewRecord(b"x", b"committed", timestamp=1000)], base_offset=0),
        build_batch([NewRecord(b"y", b"aborted", timestamp=1000)], base_offset=1, producer_id=7,
                    producer_epoch=0, base_sequence=0, transactional=True),
        _at(build_end_txn_marker(7, 0, commit=False, coordinator_epoch=0), 2),
        build_batch([NewRecord(b"z", b"1", timestamp=1000)], base_offset=3),
    ]
    mlog = await _log(meta, client, batches)
    pol = CleanerPolicy(min_dirty_ratio=0.0)
    # below the last stable offset only, and only ledgers older than min.compaction.lag.ms
    assert await clean(mlog, pol, now=10**15, lso=2, aborted=[], map_bytes=1 << 20) == []
    lag = CleanerPolicy(min_dirty_ratio=0.0, min_lag_ms=10**9)
    assert await clean(mlog, lag, now=mlog.ledgers[0].last_ms + 1, lso=10, aborted=[], map_bytes=1 << 20) == []
    done = await clean(mlog, pol, now=10**15, lso=10, aborted=[AbortedTxn(7, 1, 2, 3)], map_bytes=1 << 20)
    assert len(done) == 1
    assert await _records(mlog) == [(0, b"x", b"committed"), (3, b"z", b"1")]
    marker = RecordBatch((await mlog.read(Position(done[0], 2)))[0].data)
    assert marker.is_control and marker.record_count == 1
    await mlog.close()


@pytest.mark.parametrize("buffer", [24 / 0.9 + 1])
async def test_map_too_small_for_a_ledger_cleans_nothing(meta: MetaStore, buffer: float) -> None:
    client = FakeLedgerClient()
    batches = [build_batch([NewRecord(bytes([i]), b"v", timestamp=1000)], base_offset=i) for i in range(4)]
    mlog = await _log(meta, client, batches)
    assert await clean(mlog, CleanerPolicy(0.0), now=10**15, lso=10, aborted=[], map_bytes=int(buffer)) == []
    await mlog.close()


async def test_map_full_ends_the_pass_at_a_ledger_boundary(meta: MetaStore) -> None:
    client = FakeLedgerClient()
    keys = [b"a", b"b", b"a", b"c", b"d", b"e", b"f"]
    batches = [build_batch([NewRecord(k, b"v", timestamp=1000)], base_offset=i) for i, k in enumerate(keys)]
    mlog = await _log(meta, client, batches)
    first = mlog.ledgers[0].ledger_id
    # room for 3 keys: the first ledger's 2 fit, the second's 3 more do not
    done = await clean(mlog, CleanerPolicy(0.0), now=10**15, lso=10, aborted=[], map_bytes=int(3 * 24 / 0.9) + 1)
    assert done == [first]
    assert [o for o, _, _ in await _records(mlog)] == [1, 2, 3, 4, 5, 6]
    assert P_CLEANED_AT not in mlog.ledgers[1].props  # still dirty: the next pass starts there
    await mlog.close()


def _txn(key: bytes, value: bytes, pid: int, offset: int) -> bytes:
    return build_batch([NewRecord(key, value, timestamp=1000)], base_offset=offset, producer_id=pid,
                       producer_epoch=0, base_sequence=0, transactional=True)


async def _batch_at(mlog: ManagedLog, ledger_id: int, entry: int) -> RecordBatch:
    return RecordBatch((await mlog.read(Position(ledger_id, entry)))[0].data)


async def test_markers_go_once_their_transaction_is_empty_and_past_the_delete_horizon(meta: MetaStore) -> None:
    """Kafka's LogCleaner: a marker stays while a batch of its transaction holds records; the
    first pass that finds none sets its delete horizon (and the abort's index entry goes); the
    first pass past the horizon leaves an empty control batch header at the same offsets."""
    client = FakeLedgerClient()
    batches = [
        build_batch([NewRecord(b"x", b"1", timestamp=1000)], base_offset=0),
        _txn(b"y", b"aborted", 7, 1),
        _at(build_end_txn_marker(7, 0, commit=False, coordinator_epoch=0), 2),
        _txn(b"k", b"1", 8, 3),  # committed, then superseded by k=2 at 7
        _at(build_end_txn_marker(8, 0, commit=True, coordinator_epoch=0), 4),
        _txn(b"q", b"1", 9, 5),  # committed and never superseded: its marker stays
        _at(build_end_txn_marker(9, 0, commit=True, coordinator_epoch=0), 6),
        build_batch([NewRecord(b"k", b"2", timestamp=1000)], base_offset=7),
        build_batch([NewRecord(b"z", b"1", timestamp=1000)], base_offset=8),
        build_batch([NewRecord(b"w", b"1", timestamp=1000)], base_offset=9),  # the open ledger
    ]
    mlog = await _log(meta, client, batches)
    l0, l1, l2 = (li.ledger_id for li in mlog.ledgers[:3])
    await mlog.set_ledger_properties(l0, {P_ABORTED: "7,1,2,3"})
    index = AbortedIndex()
    index.load_ledger(l0, mlog.ledgers[0].props)
    pol = CleanerPolicy(min_dirty_ratio=0.0, delete_retention_ms=10_000)

    async def clean_at(now: int) -> list[int]:
        return await clean(mlog, pol, now=now, lso=100, aborted=[t for _, t in index.entries()],
                           map_bytes=1 << 20, aborts_gone=index.remove)

    async def markers() -> list[tuple[int, int, int | None]]:
        """(offset, records, delete horizon) of the three markers."""
        out = []
        for lid, entry in ((l0, 2), (l1, 1), (l2, 0)):
            b = await _batch_at(mlog, lid, entry)
            assert b.is_control and b.base_offset == b.last_offset and b.compute_crc() == b.crc
            out.append((b.base_offset, b.record_count, b.delete_horizon_ms))
        return out

    t = int(time.time() * 1000) + 1000  # the ledgers are older than that (min.compaction.lag.ms 0)
    # pass 1: the aborted record and the superseded k=1 go; their markers were read with them
    assert await clean_at(t) == [l0, l1, l2]
    assert await _records(mlog) == [(0, b"x", b"1"), (5, b"q", b"1"), (7, b"k", b"2"), (8, b"z", b"1"),
                                    (9, b"w", b"1")]
    assert await markers() == [(2, 1, None), (4, 1, None), (6, 1, None)]
    assert [li.props.get(P_MARKERS) for li in mlog.ledgers[:3]] == [str(t), str(t), None]
    assert len(index) == 1 and mlog.ledgers[0].props[P_ABORTED] == "7,1,2,3"
    # pass 2 (due by c.mark alone: nothing dirty): no record of 7's and 8's transactions is
    # left: their markers get a horizon, the abort leaves the index (memory and ledger)
    assert await clean_at(t + 1) == [l0, l1, l2]
    horizon = t + 1 + 10_000
    assert await markers() == [(2, 1, horizon), (4, 1, horizon), (6, 1, None)]
    assert len(index) == 0 and P_ABORTED not in mlog.ledgers[0].props
    assert [li.props.get(P_MARKERS) for li in mlog.ledgers[:3]] == [str(horizon), str(horizon), None]
    # the markers still read as markers (their record timestamps kept)
    first = await _batch_at(mlog, l0, 2)
    assert read_end_txn_marker(first) is not None and [r.timestamp_delta + horizon for r in first.records()] == [
        RecordBatch(batches[2]).header()[7] + r.timestamp_delta for r in RecordBatch(batches[2]).records()]
    # before the horizon: no pass; past it: the markers become empty control batch headers
    assert await clean_at(horizon - 1) == []
    assert await clean_at(horizon) == [l0, l1, l2]
    assert await markers() == [(2, 0, horizon), (4, 0, horizon), (6, 1, None)]
    assert all(P_MARKERS not in li.props for li in mlog.ledgers[:3])
    assert await clean_at(horizon + 10**9) == []  # nothing left to do
    await mlog.close()
