"""Log compaction of a Kafka partition's segmented log (Kafka's LogCleaner over ledgers).

A pass picks the cleanable ledgers (closed, on bookies, older than min.compaction.lag.ms,
wholly below the last stable offset), and runs when the dirty ones (never cleaned) are at least
min.cleanable.dirty.ratio of them by size, or one of them is older than max.compaction.lag.ms.
It maps the latest offset of each key over the dirty ledgers (keys hashed, the map bounded as
Kafka's by log.cleaner.dedupe.buffer.size: 24 bytes an entry at a 0.9 load factor; a ledger
that does not fit ends the pass there), then rewrites every cleanable ledger up to the last
mapped one, entry for entry (the store switches them in one compare-and-set):

- a record whose key has a later offset in the map is dropped; the batch keeps its base offset
  and next offset, its records their offsets (gaps stay gaps), and a batch left with no record
  becomes Kafka's empty batch header, so the offset index and every position stay valid and a
  fetch inside a cleaned range returns the next offset at or after it;
- tombstones (null values) survive the ledger's first cleaning and are dropped by the first
  pass after delete.retention.ms from then (property c.at: Kafka's delete horizon, KIP-534); a
  ledger holding tombstones past their horizon makes the log cleanable by itself;
- records of aborted transactions are removed, as Kafka's cleaner does; a transaction marker
  goes as Kafka's LogCleaner (CleanedTransactionMetadata) lets it: once a pass reads no batch
  of its transaction holding records (a pass reads every cleanable ledger from the log's
  start), the marker gets a delete horizon (now + delete.retention.ms, in the batch, as Kafka
  does) and its aborted-transactions index entry goes; the first pass past the horizon makes it
  an empty control batch header (offsets kept, as for data). A ledger whose markers wait for a
  pass carries when (property c.mark), which makes the log cleanable by itself then.

Records are decoded here: the cleaner is off the append path, and runs one pass at a time.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from kafka_log.index import P_NEXT
from kafka_log.txn import P_ABORTED, AbortedTxn
from kafka_wire.records import RecordBatch, read_end_txn_marker
from kafka_wire.records.builder import rebuild_batch
from store.managed.ledgers import WriterLike
from store.managed.log_retention import Rewrite
from store.managed.metadata import LedgerInfo
from store.managed.position import Entry, Position

P_CLEANED_AT = "c.at"  # ledger property: when the ledger was first cleaned (ms)
P_TOMBSTONES = "c.tomb"  # ledger property: its rewrite kept tombstones
P_MARKERS = "c.mark"  # ledger property: when a pass may next drop (or start the horizon of) a marker
MAP_ENTRY_BYTES = 24  # Kafka's SkimpyOffsetMap: a 16-byte MD5 digest and an 8-byte offset
MAP_LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor


@dataclass(frozen=True)
class CleanerPolicy:
    """A topic's compaction configs (Kafka's names, in ms and as a ratio)."""

    min_dirty_ratio: float = 0.5
    min_lag_ms: int = 0
    max_lag_ms: int = (1 << 63) - 1
    delete_retention_ms: int = 86_400_000


class OffsetMap:
    """The latest offset per key over the dirty ledgers, keys hashed (MD5, as Kafka's)."""

    def __init__(self, buffer_bytes: int) -> None:
        self.capacity = max(1, int(buffer_bytes * MAP_LOAD_FACTOR) // MAP_ENTRY_BYTES)
        self._map: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._map)

    @staticmethod
    def digest(key: bytes) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    def put(self, key: bytes, offset: int) -> None:
        self._map[self.digest(key)] = offset

    def latest(self, key: bytes) -> int:
        """The key's latest mapped offset, -1 if not mapped."""
        return self._map.get(self.digest(key), -1)

    def merge(self, later: OffsetMap) -> bool:
        """Add a later ledger's map (its offsets win); False, adding nothing, if the union
        would hold more keys than the capacity (Kafka's map full: the pass ends before it)."""
        new = sum(1 for d in later._map if d not in self._map)
        if len(self._map) + new > self.capacity:
            return False
        self._map.update(later._map)
        return True


class Aborted:
    """Aborted transactions' offset ranges per producer (from kafka_log/txn.py's index)."""

    def __init__(self, txns: Iterable[AbortedTxn]) -> None:
        self._by_pid: dict[int, list[tuple[int, int]]] = {}
        for t in txns:
            self._by_pid.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))

    def contains(self, batch: RecordBatch) -> bool:
        """A transactional data batch of an aborted transaction."""
        if not batch.is_transactional or batch.is_control:
            return False
        h = batch.header()
        return any(first <= h[0] <= last for first, last in self._by_pid.get(h[9], ()))


def _batches(entries: Iterable[Entry]) -> Iterable[RecordBatch]:
    for e in entries:
        yield RecordBatch(e.data)


def map_keys(omap: OffsetMap, batches: Iterable[RecordBatch], aborted: Aborted) -> None:
    """Add the keys of these batches (not control batches, not aborted data) to the map."""
    for b in batches:
        if b.is_control or aborted.contains(b):
            continue
        base = b.base_offset
        for r in b.records():
            if r.key is not None:
                omap.put(r.key, base + r.offset_delta)


def clean_batch(batch: RecordBatch, omap: OffsetMap, aborted: Aborted, drop_tombstones: bool) -> tuple[bytes, bool]:
    """The batch as the cleaner leaves it (its own bytes when nothing goes), and whether it
    still holds a tombstone."""
    if batch.is_control:
        return bytes(batch.memoryview()), False
    drop_all = aborted.contains(batch)
    records = list(batch.records())
    base = batch.base_offset
    keep = [] if drop_all else [
        r for r in records
        if r.key is not None and base + r.offset_delta >= omap.latest(r.key)
        and not (drop_tombstones and r.value is None)
    ]
    tombstone = any(r.value is None for r in keep)
    if len(keep) == len(records):
        return bytes(batch.memoryview()), tombstone
    return rebuild_batch(batch, keep), tombstone


class CleanedTxns:
    """Kafka's CleanedTransactionMetadata over one pass: per producer, whether a batch of its
    transaction (since its previous marker) was read, and whether one keeps records after this
    pass; what becomes of each transaction marker (`marker`), for one ledger at a time."""

    def __init__(self, delete_retention_ms: int, now: int) -> None:
        self.retention_ms, self.now = delete_retention_ms, now
        self._read: dict[int, bool] = {}  # producer id -> a batch of its transaction keeps records
        self.due: int | None = None  # the ledger's earliest time a pass has a marker to act on
        self.gone_aborts: set[int] = set()  # offsets of ABORT markers whose transaction is empty

    def start_ledger(self) -> None:
        self.due, self.gone_aborts = None, set()

    def _due(self, at: int) -> None:
        self.due = at if self.due is None else min(self.due, at)

    def data(self, before: RecordBatch, after: bytes) -> None:
        """A data batch read (before cleaning) and as this pass leaves it. An emptied batch
        (a header left by an earlier pass) is no batch of its transaction any more."""
        if not before.is_transactional or before.record_count == 0:
            return
        pid = before.producer_id
        self._read[pid] = self._read.get(pid, False) or RecordBatch(after).record_count > 0

    def marker(self, batch: RecordBatch) -> bytes:
        """The control batch as this pass leaves it."""
        end = read_end_txn_marker(batch)
        if end is None:  # an emptied (already dropped) or unknown control batch
            return bytes(batch.memoryview())
        pid = batch.producer_id
        if pid in self._read:
            # records of its transaction were read: kept, as Kafka; if none is left after this
            # pass, the next one may start the marker's horizon
            if not self._read.pop(pid):
                self._due(self.now)
            return bytes(batch.memoryview())
        if not end.commit:
            self.gone_aborts.add(batch.base_offset)  # nothing of it left for readers to skip
        horizon = batch.delete_horizon_ms
        if horizon is None:
            horizon = self.now + self.retention_ms
            self._due(horizon)
            return rebuild_batch(batch, list(batch.records()), delete_horizon_ms=horizon)
        if horizon <= self.now:
            return rebuild_batch(batch, [])
        self._due(horizon)
        return bytes(batch.memoryview())


def _without_aborts(props: dict[str, str], gone: set[int]) -> str | None:
    """A ledger's P_ABORTED without the entries of these ABORT marker offsets."""
    items = [t for t in (props.get(P_ABORTED) or "").split(";") if t and int(t.split(",")[2]) not in gone]
    return ";".join(items) or None


class CompactedLog(Protocol):
    """What a pass needs of the owned segmented log (store/managed's ManagedLog)."""

    @property
    def ledgers(self) -> list[LedgerInfo]: ...

    async def read(self, start: Position, max_entries: int = ..., max_bytes: int = ...) -> list[Entry]: ...

    async def create_rewrite_ledger(self) -> WriterLike: ...

    async def replace_ledgers(self, rewrites: dict[int, Rewrite]) -> None: ...


def cleanable(ledgers: list[LedgerInfo], policy: CleanerPolicy, now: int, lso: int) -> list[LedgerInfo]:
    """The prefix of closed ledgers a pass may clean."""
    out: list[LedgerInfo] = []
    for li in ledgers[:-1]:  # the last one is the open ledger (Kafka's active segment)
        nxt = li.props.get(P_NEXT)
        if (not li.closed or li.offload is not None or nxt is None or int(nxt) > lso
                or li.last_ms > now - policy.min_lag_ms):
            break
        out.append(li)
    return out


def _tombstones_due(li: LedgerInfo, policy: CleanerPolicy, now: int) -> bool:
    at = li.props.get(P_CLEANED_AT)
    return at is not None and int(at) + policy.delete_retention_ms <= now


def needs_cleaning(ledgers: list[LedgerInfo], policy: CleanerPolicy, now: int) -> bool:
    if any(P_TOMBSTONES in li.props and _tombstones_due(li, policy, now) for li in ledgers):
        return True
    if any(int(li.props.get(P_MARKERS, now + 1)) <= now for li in ledgers):
        return True
    dirty = [li for li in ledgers if P_CLEANED_AT not in li.props]
    if not dirty:
        return False
    total = sum(li.size for li in ledgers)
    if total and sum(li.size for li in dirty) / total >= policy.min_dirty_ratio:
        return True
    return any(now - li.first_ms >= policy.max_lag_ms for li in dirty)


async def _chunks(log: CompactedLog, li: LedgerInfo) -> AsyncIterator[list[Entry]]:
    """A ledger's entries in reads of about a MiB: memory stays bounded whatever its size."""
    n = 0
    while n < li.entries:
        got = [e for e in await log.read(Position(li.ledger_id, n), max_entries=li.entries - n)
               if e.position.ledger_id == li.ledger_id]
        if not got:
            raise RuntimeError(f"ledger {li.ledger_id}: {li.entries} entries listed, {n} readable")
        n += len(got)
        yield got


async def clean(
    log: CompactedLog,
    policy: CleanerPolicy,
    *,
    now: int,
    lso: int,
    aborted: Iterable[AbortedTxn],
    map_bytes: int,
    throttle: Callable[[int], Awaitable[None]] | None = None,
    aborts_gone: Callable[[set[int]], None] | None = None,
) -> list[int]:
    """One cleaning pass; returns the ids of the ledgers rewritten (none if not due).
    `aborts_gone` is told, once the rewrites are in, the ABORT marker offsets whose
    aborted-transactions index entries went (the caller's in-memory index drops them too)."""
    todo = cleanable(log.ledgers, policy, now, lso)
    if not needs_cleaning(todo, policy, now):
        return []
    ab = Aborted(aborted)
    omap = OffsetMap(map_bytes)
    first_dirty = next((i for i, li in enumerate(todo) if P_CLEANED_AT not in li.props), len(todo))
    end = first_dirty
    for li in todo[first_dirty:]:
        ledger_map = OffsetMap(map_bytes)  # this ledger's keys, added only if they all fit
        async for chunk in _chunks(log, li):
            map_keys(ledger_map, _batches(chunk), ab)
            if len(ledger_map) > omap.capacity:
                break  # cannot fit: stop reading (memory stays bounded by the capacity)
        if not omap.merge(ledger_map):
            break
        end += 1
    if end == first_dirty and first_dirty < len(todo):
        return []  # not even one ledger's keys fit log.cleaner.dedupe.buffer.size
    rewrites: dict[int, Rewrite] = {}
    txns = CleanedTxns(policy.delete_retention_ms, now)
    gone_aborts: set[int] = set()
    for li in todo[:end]:
        drop_tombstones = _tombstones_due(li, policy, now)
        w = await log.create_rewrite_ledger()
        kept_tombstones = False
        txns.start_ledger()
        try:
            async for chunk in _chunks(log, li):
                acks = []
                for e in chunk:
                    batch = RecordBatch(e.data)
                    if batch.is_control:
                        out = txns.marker(batch)
                    else:
                        out, tombstone = clean_batch(batch, omap, ab, drop_tombstones)
                        kept_tombstones = kept_tombstones or tombstone
                        txns.data(batch, out)
                    acks.append(w.append(out))  # pipelined, a chunk at a time
                await asyncio.gather(*acks)
        finally:
            await w.close()
        props: dict[str, str | None] = {P_CLEANED_AT: li.props.get(P_CLEANED_AT, str(now)),
                                        P_TOMBSTONES: "1" if kept_tombstones else None,
                                        P_MARKERS: None if txns.due is None else str(txns.due)}
        if txns.gone_aborts:
            props[P_ABORTED] = _without_aborts(li.props, txns.gone_aborts)
            gone_aborts |= txns.gone_aborts
        rewrites[li.ledger_id] = Rewrite(w.ledger_id, li.entries, w.length, li.data, props)
        if throttle is not None:
            await throttle(li.size)
    await log.replace_ledgers(rewrites)
    if gone_aborts and aborts_gone is not None:
        aborts_gone(gone_aborts)
    return list(rewrites)
