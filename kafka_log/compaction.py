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
- records of aborted transactions are removed, as Kafka's cleaner does; transaction markers are
  kept (always safe: Kafka drops them only once nothing of their transaction is left).

Records are decoded here: the cleaner is off the append path, and runs one pass at a time.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from kafka_log.index import P_NEXT
from kafka_log.txn import AbortedTxn
from kafka_wire.records import RecordBatch
from kafka_wire.records.builder import rebuild_batch
from store.managed.ledgers import WriterLike
from store.managed.log_retention import Rewrite
from store.managed.metadata import LedgerInfo
from store.managed.position import Entry, Position

P_CLEANED_AT = "c.at"  # ledger property: when the ledger was first cleaned (ms)
P_TOMBSTONES = "c.tomb"  # ledger property: its rewrite kept tombstones
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
) -> list[int]:
    """One cleaning pass; returns the ids of the ledgers rewritten (none if not due)."""
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
    for li in todo[:end]:
        drop_tombstones = _tombstones_due(li, policy, now)
        w = await log.create_rewrite_ledger()
        kept_tombstones = False
        try:
            async for chunk in _chunks(log, li):
                acks = []
                for e in chunk:
                    out, tombstone = clean_batch(RecordBatch(e.data), omap, ab, drop_tombstones)
                    kept_tombstones = kept_tombstones or tombstone
                    acks.append(w.append(out))  # pipelined, a chunk at a time
                await asyncio.gather(*acks)
        finally:
            await w.close()
        props: dict[str, str | None] = {P_CLEANED_AT: li.props.get(P_CLEANED_AT, str(now)),
                                        P_TOMBSTONES: "1" if kept_tombstones else None}
        rewrites[li.ledger_id] = Rewrite(w.ledger_id, li.entries, w.length, li.data, props)
        if throttle is not None:
            await throttle(li.size)
    await log.replace_ledgers(rewrites)
    return list(rewrites)
