"""Ledger storage: write cache -> entry logs + per-ledger index, read cache, compaction.

Adds land in the active half of the write cache (readable at once). Once the active half
holds flush_bytes, a *flush* swaps the halves and, on the maintenance thread, appends the
flushed half sorted by (ledger, entry) to the current entry log, fdatasyncs it (an index
record never points at data that is not on disk), then writes the index records. A
*checkpoint* (every flush_interval, and whenever a journal file could be deleted) is a flush
that also fdatasyncs the index files written since the last one and persists the ledger
states with the journal mark up to which everything is now in storage; then the journal
files before the mark go. Entries are always either in a cache half or in the index, so
reads never miss during a flush. When both halves together reach write_cache_bytes, adds
are refused (has_room() is False) until a flush completes: BookKeeper's write-cache throttle.

The event loop owns the in-memory structures, with one exception that keeps the loop's cost
per flush independent of the number of entries: the maintenance thread writes the flushed
entries' locations into their LedgerIndex objects (each write is one atomic bytearray
operation, and the loop finds those entries in the cache half being flushed until then).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import random
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from store.bookie.entry_log import EntryLogs, Location, read_run
from store.bookie.errors import NoEntryError, NoLedgerError
from store.bookie.flush import Entry, FlushWriter
from store.bookie.index import (
    FLAG_DELETED,
    FLAG_FENCED,
    LedgerIndex,
    index_path,
    load_indexes,
    read_states,
    write_index,
)
from store.bookie.journal import JournalMark

log = logging.getLogger(__name__)


@dataclass
class LedgerInfo:
    fenced: bool = False
    lac: int = -1  # highest LAC carried by any entry of this ledger or sent by WRITE_LAC
    last_entry: int = -1
    waiters: list[tuple[int, asyncio.Future[int]]] = field(default_factory=list)


@dataclass
class StorageConfig:
    write_cache_bytes: int = 64 << 20  # both halves together: adds wait beyond this
    flush_bytes: int = 0  # flush once the active half holds this much (0: write_cache_bytes // 8)
    read_cache_bytes: int = 64 << 20
    entry_log_size: int = 256 << 20
    compaction_threshold: float = 0.5  # compact logs whose live fraction is below this
    flush_interval: float = 5.0  # checkpoint at least this often
    compaction_interval: float = 60.0
    readahead_entries: int = 64
    readahead_bytes: int = 1 << 20


def _log_failure(f: asyncio.Future[object]) -> None:
    if not f.cancelled() and f.exception() is not None:
        log.error("journal clean-up after a checkpoint failed: %s", f.exception())


class LedgerStorage:
    def __init__(self, data_dir: str | os.PathLike[str], config: StorageConfig | None = None) -> None:
        self.dir = Path(data_dir)
        self.config = config or StorageConfig()
        self.index_dir = self.dir / "ledgers"
        self.logs = EntryLogs(self.dir / "entrylogs", max_log_size=self.config.entry_log_size)
        self.ledgers: dict[int, LedgerInfo] = {}
        self.indexes: dict[int, LedgerIndex] = {}
        self._active: dict[int, dict[int, Entry]] = {}
        self._active_bytes = 0
        self._flushing: dict[int, dict[int, Entry]] = {}
        self._flushing_bytes = 0
        cap = self.config.write_cache_bytes
        # Below half the cache, so a flush always starts before adds have to wait.
        self._flush_max = max(1, min(self.config.flush_bytes or cap // 8, cap // 2))
        self._flush_bytes = self._jittered_flush_bytes()
        self._room_cbs: list[Callable[[], object]] = []
        self._last_mark = JournalMark(0, 0)
        self._writer = FlushWriter(self.logs, self.dir, self.index_dir)  # the maintenance thread's part
        self._unknown_waiters: dict[int, list[tuple[int, asyncio.Future[int]]]] = {}
        self._read_cache: OrderedDict[tuple[int, int], Entry] = OrderedDict()
        self._read_cache_bytes = 0
        self._live: dict[int, int] = {}  # entry log id -> live bytes (records incl. length prefix)
        self._deleted: set[int] = set()  # ledgers whose index files go at the next checkpoint
        self.tombstones: set[int] = set()  # deleted ledgers: adds and fences to them are refused
        self._maint = asyncio.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="storage")
        # after_checkpoint (journal deletion) is slow on purpose: off the flush thread.
        self._gc_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="journal-gc")
        self._room = asyncio.Event()
        self._room.set()
        self._tasks: list[asyncio.Task[None]] = []
        self._flush_task: asyncio.Task[None] | None = None
        self.mark_fn: Callable[[], JournalMark] = lambda: JournalMark(0, 0)
        self.after_checkpoint: Callable[[JournalMark], object] = lambda mark: None
        self.checkpoints = 0
        self.flushes = 0
        self.compactions = 0

    # -- life cycle --

    def open(self) -> JournalMark:
        """Load durable state; returns the journal mark replay must start from."""
        self.index_dir.mkdir(parents=True, exist_ok=True)
        mark, states = read_states(self.dir)
        self.logs.open()
        self.indexes = load_indexes(self.index_dir)
        for lid, idx in self.indexes.items():
            for _, (log_id, _off, n) in idx.items():
                self._live[log_id] = self._live.get(log_id, 0) + n + 4
            self.ledgers[lid] = LedgerInfo(last_entry=idx.last_entry())
        for lid, (flags, lac, last) in states.items():
            if flags & FLAG_DELETED:
                self.tombstones.add(lid)
                self.ledgers.pop(lid, None)
                continue
            info = self.ledgers.setdefault(lid, LedgerInfo())
            info.fenced = bool(flags & FLAG_FENCED)
            info.lac = max(info.lac, lac)
            info.last_entry = max(info.last_entry, last)
        self._last_mark = mark
        return mark

    def start_background(self) -> None:
        self._tasks.append(asyncio.create_task(self._periodic(self.config.flush_interval, self.checkpoint)))
        self._tasks.append(asyncio.create_task(self._periodic(self.config.compaction_interval, self.compact)))

    def _jittered_flush_bytes(self) -> int:
        # The bookies of an ensemble get the same adds: without jitter they would all flush
        # (and hit the shared disk) at the same moment, stalling the same adds everywhere.
        return max(1, self._flush_max - random.randrange(self._flush_max // 4 + 1))

    async def _periodic(self, interval: float, fn: Callable[[], object]) -> None:
        await asyncio.sleep(random.uniform(0, interval))  # out of step with other bookies
        while True:
            await asyncio.sleep(interval)
            try:
                await fn()  # type: ignore[misc]
            except Exception:
                log.exception("background %s failed", getattr(fn, "__name__", fn))

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks.clear()
        if self._flush_task is not None:
            with contextlib.suppress(Exception):
                await self._flush_task
        await self.checkpoint()
        await asyncio.get_running_loop().run_in_executor(self._pool, self.logs.close)
        self._pool.shutdown(wait=True)
        self._gc_pool.shutdown(wait=True)

    # -- mutations (event loop) --

    def put(self, ledger_id: int, entry_id: int, lac: int, entry: Entry) -> LedgerInfo:
        info = self.put_replayed(ledger_id, entry_id, lac, entry)
        if self._active_bytes >= self._flush_bytes and self._flush_task is None:
            self._flush_task = asyncio.get_running_loop().create_task(self._flush_while_full())
        if self._active_bytes + self._flushing_bytes >= self.config.write_cache_bytes:
            self._room.clear()
        return info

    async def _flush_while_full(self) -> None:
        try:
            while self._active_bytes >= self._flush_bytes:
                await self._flush(checkpoint=False)
        except Exception:
            log.exception("write cache flush failed")
            await asyncio.sleep(1.0)  # no retry storm: the next put after this retries
        finally:
            self._flush_task = None

    def _new_ledger(self, ledger_id: int) -> LedgerInfo:
        info = self.ledgers[ledger_id] = LedgerInfo()
        parked = self._unknown_waiters.pop(ledger_id, None)
        if parked:
            info.waiters.extend(parked)
        return info

    def put_replayed(self, ledger_id: int, entry_id: int, lac: int, entry: Entry) -> LedgerInfo:
        """put() without triggering a flush (journal replay fills the cache, then checkpoints)."""
        info = self.ledgers.get(ledger_id)
        if info is None:
            info = self._new_ledger(ledger_id)
        cache = self._active.get(ledger_id)
        if cache is None:
            cache = self._active[ledger_id] = {}
        old = cache.get(entry_id)
        cache[entry_id] = entry
        self._active_bytes += len(entry) - (len(old) if old is not None else 0)
        if entry_id > info.last_entry:
            info.last_entry = entry_id
        if lac > info.lac:
            info.lac = lac
            if info.waiters:
                self._notify(info)
        return info

    def raise_lac(self, ledger_id: int, lac: int) -> LedgerInfo:
        """An explicit LAC (WRITE_LAC or its journal record): the known LAC becomes at least
        `lac`, waking long polls. A ledger not seen yet is created (it may hold no entry here
        when the ledger is striped)."""
        info = self.ledgers.get(ledger_id)
        if info is None:
            info = self._new_ledger(ledger_id)
        if lac > info.lac:
            info.lac = lac
            if info.waiters:
                self._notify(info)
        return info

    def has_room(self) -> bool:
        return self._room.is_set()

    async def wait_room(self) -> None:
        await self._room.wait()

    def on_room(self, cb: Callable[[], object]) -> None:
        """Call cb() (once) when the write cache has room again (soon if it has now)."""
        if self._room.is_set():
            asyncio.get_running_loop().call_soon(cb)
        else:
            self._room_cbs.append(cb)

    def _update_room(self) -> None:
        if self._active_bytes + self._flushing_bytes < self.config.write_cache_bytes and not self._room.is_set():
            self._room.set()
            cbs, self._room_cbs = self._room_cbs, []
            for cb in cbs:
                try:
                    cb()
                except Exception:
                    log.exception("write cache room callback failed")

    @property
    def cached_bytes(self) -> int:
        """Bytes in the write cache (both halves)."""
        return self._active_bytes + self._flushing_bytes

    def fence(self, ledger_id: int) -> tuple[LedgerInfo, bool]:
        """Mark fenced (creating the ledger if unknown); True if it was not fenced before."""
        info = self.ledgers.get(ledger_id)
        if info is None:
            info = self._new_ledger(ledger_id)
        first = not info.fenced
        info.fenced = True
        return info, first

    def delete(self, ledger_id: int) -> bool:
        self.tombstones.add(ledger_id)
        gone = NoLedgerError(f"ledger {ledger_id} was deleted")
        for _, fut in self._unknown_waiters.pop(ledger_id, []):
            if not fut.done():
                fut.set_exception(gone)
        info = self.ledgers.pop(ledger_id, None)
        if info is None:
            return False
        for _, fut in info.waiters:
            if not fut.done():
                fut.set_exception(gone)
        dropped = self._active.pop(ledger_id, None)
        if dropped:
            self._active_bytes -= sum(len(e) for e in dropped.values())
            self._update_room()
        idx = self.indexes.pop(ledger_id, None)
        if idx is not None:
            # A snapshot: the maintenance thread may be extending this index right now.
            for _, (log_id, _off, n) in LedgerIndex(bytes(idx.locs)).items():
                self._live[log_id] = self._live.get(log_id, 0) - n - 4
        for key in [k for k in self._read_cache if k[0] == ledger_id]:
            self._read_cache_bytes -= len(self._read_cache.pop(key))
        self._deleted.add(ledger_id)
        return True

    # -- LAC long poll --

    def _notify(self, info: LedgerInfo) -> None:
        keep = []
        for prev, fut in info.waiters:
            if fut.done():
                continue
            if info.lac > prev:
                fut.set_result(info.lac)
            else:
                keep.append((prev, fut))
        info.waiters = keep

    async def wait_lac(self, ledger_id: int, previous_lac: int, wait_s: float) -> int | None:
        """The known LAC once it exceeds previous_lac, or None after `wait_s` seconds.
        On a ledger this bookie does not know yet the poll parks until its first entry
        arrives (a reader may ask before the writer's first add lands here); a deleted
        ledger raises NoLedgerError."""
        if ledger_id in self.tombstones:
            raise NoLedgerError(f"ledger {ledger_id} was deleted")
        info = self.ledgers.get(ledger_id)
        if info is not None and info.lac > previous_lac:
            return info.lac
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        entry = (previous_lac, fut)
        if info is not None:
            info.waiters.append(entry)
        else:
            self._unknown_waiters.setdefault(ledger_id, []).append(entry)
        try:
            return await asyncio.wait_for(fut, wait_s)
        except TimeoutError:
            return None
        finally:
            self._forget_waiter(ledger_id, entry)

    def _forget_waiter(self, ledger_id: int, entry: tuple[int, asyncio.Future[int]]) -> None:
        info = self.ledgers.get(ledger_id)
        if info is not None and entry in info.waiters:
            info.waiters.remove(entry)
        parked = self._unknown_waiters.get(ledger_id)
        if parked is not None and entry in parked:
            parked.remove(entry)
            if not parked:
                del self._unknown_waiters[ledger_id]

    # -- reads --

    def _cached(self, ledger_id: int, entry_id: int) -> Entry | None:
        c = self._active.get(ledger_id)
        if c is not None:
            e = c.get(entry_id)
            if e is not None:
                return e
        c = self._flushing.get(ledger_id)
        if c is not None:
            e = c.get(entry_id)
            if e is not None:
                return e
        key = (ledger_id, entry_id)
        e = self._read_cache.get(key)
        if e is not None:
            self._read_cache.move_to_end(key)
        return e

    def _cache_read(self, ledger_id: int, entry_id: int, entry: Entry) -> None:
        key = (ledger_id, entry_id)
        if key in self._read_cache:
            return
        self._read_cache[key] = entry
        self._read_cache_bytes += len(entry)
        while self._read_cache_bytes > self.config.read_cache_bytes and self._read_cache:
            _, old = self._read_cache.popitem(last=False)
            self._read_cache_bytes -= len(old)

    def info(self, ledger_id: int) -> LedgerInfo:
        info = self.ledgers.get(ledger_id)
        if info is None:
            raise NoLedgerError(f"no ledger {ledger_id} on this bookie")
        return info

    async def read(self, ledger_id: int, entry_id: int) -> Entry:
        info = self.info(ledger_id)
        if entry_id == -1:
            entry_id = info.last_entry
            if entry_id < 0:
                raise NoEntryError(f"ledger {ledger_id} has no entries on this bookie")
        e = self._cached(ledger_id, entry_id)
        if e is not None:
            return e
        last = max(entry_id, min(info.last_entry, entry_id + self.config.readahead_entries - 1))
        return (await self.read_range(ledger_id, entry_id, last, self.config.readahead_bytes))[0]

    async def read_range(self, ledger_id: int, first: int, last: int, max_bytes: int) -> list[Entry]:
        """Entries first..last (stopping at the first missing one) in at most max_bytes,
        but always at least one entry; NoEntryError if `first` is absent."""
        self.info(ledger_id)
        idx = self.indexes.get(ledger_id)
        out: list[Entry | None] = []
        disk: list[tuple[int, Location]] = []  # (position in out, location)
        total = 0
        for eid in range(first, last + 1):
            e = self._cached(ledger_id, eid)
            loc = None
            if e is None:
                loc = idx.get(eid) if idx is not None else None
                if loc is None:
                    break
                n = loc[2]
            else:
                n = len(e)
            if out and total + n > max_bytes:
                break
            total += n
            if loc is not None:
                disk.append((len(out), loc))
            out.append(e)
        if not out:
            raise NoEntryError(f"ledger {ledger_id} has no entry {first} on this bookie")
        if disk:
            await self._read_disk(out, disk)
            for pos, _ in disk:
                entry = out[pos]
                assert entry is not None
                self._cache_read(ledger_id, first + pos, entry)
        return out  # type: ignore[return-value]

    async def _read_disk(self, out: list[Entry | None], disk: list[tuple[int, Location]]) -> None:
        # Group entries contiguous in one log into runs: one pread per run.
        runs: list[tuple[int, int, int, list[tuple[int, int, int]]]] = []  # log, start, end, parts
        for pos, (log_id, off, n) in disk:
            if runs and runs[-1][0] == log_id and runs[-1][2] + 4 == off:
                r = runs[-1]
                r[3].append((pos, off - r[1], n))
                runs[-1] = (log_id, r[1], off + n, r[3])
            else:
                runs.append((log_id, off, off + n, [(pos, 0, n)]))
        jobs = [(self.logs.acquire(r[0]), r[1], r[2] - r[1]) for r in runs]
        try:
            loop = asyncio.get_running_loop()
            datas = await loop.run_in_executor(None, lambda: [read_run(fd, off, n) for fd, off, n in jobs])
        finally:
            for r in runs:
                self.logs.release(r[0])
        for r, data in zip(runs, datas):
            if len(r[3]) == 1:
                out[r[3][0][0]] = data
            else:
                mv = memoryview(data)
                for pos, rel, n in r[3]:
                    out[pos] = bytes(mv[rel : rel + n])

    # -- flush and checkpoint --

    async def checkpoint(self) -> JournalMark:
        """Flush the write cache to entry logs + index, sync them and persist the ledger
        states and the journal mark; then the journal files before the mark are deleted."""
        return await self._flush(checkpoint=True, wait_gc=True)

    async def flush(self) -> JournalMark:
        """Move the active write cache half to the entry log (a checkpoint if one is due)."""
        return await self._flush(checkpoint=False)

    async def _flush(self, *, checkpoint: bool, wait_gc: bool = False) -> JournalMark:
        # Everything on the loop here is O(ledgers), never O(entries): the thread does the rest.
        loop = asyncio.get_running_loop()
        async with self._maint:
            mark = self.mark_fn()
            if mark.file_id > self._last_mark.file_id:
                checkpoint = True  # a whole journal file can go: keep replay and disk use short
            flushing = self._flushing = self._active
            self._flushing_bytes, self._active, self._active_bytes = self._active_bytes, {}, 0
            idxs: dict[int, LedgerIndex] = {}
            for lid in flushing:
                idx = self.indexes.get(lid)
                if idx is None:
                    idx = self.indexes[lid] = LedgerIndex()
                idxs[lid] = idx
            deleted: set[int] = set()
            states: dict[int, tuple[int, int, int]] | None = None
            if checkpoint:
                deleted, self._deleted = self._deleted, set()
                states = {lid: (FLAG_FENCED if i.fenced else 0, i.lac, i.last_entry) for lid, i in self.ledgers.items()}
                states.update((lid, (FLAG_FENCED | FLAG_DELETED, -1, -1)) for lid in self.tombstones)
            t0, nbytes = loop.time(), self._flushing_bytes
            try:
                live = await loop.run_in_executor(self._pool, self._flush_sync, flushing, idxs, deleted, states, mark)
            except BaseException:
                # Keep the entries readable and flush them next time.
                for lid, c in flushing.items():
                    if lid in self.ledgers:
                        merged = self._active.setdefault(lid, {})
                        for eid, e in c.items():
                            if eid not in merged:
                                merged[eid] = e
                                self._active_bytes += len(e)
                self._deleted |= deleted
                self._flushing, self._flushing_bytes = {}, 0
                raise
            for lid, deltas in live.items():
                if lid not in self.ledgers:
                    self._deleted.add(lid)  # deleted during the flush: its index file goes next time
                    continue
                for log_id, d in deltas.items():
                    self._live[log_id] = self._live.get(log_id, 0) + d
            self._flushing, self._flushing_bytes = {}, 0
            self._flush_bytes = self._jittered_flush_bytes()
            self._update_room()
            self.flushes += 1
            took = loop.time() - t0
            log.log(
                logging.WARNING if took > 1.0 else logging.DEBUG,
                "%s of %.1f MB took %.3f s (write cache now %.1f MB)",
                "checkpoint" if checkpoint else "flush",
                nbytes / 1e6,
                took,
                self.cached_bytes / 1e6,
            )
            if checkpoint:
                self._last_mark = mark
                self.checkpoints += 1
        if checkpoint:
            gc = loop.run_in_executor(self._gc_pool, self.after_checkpoint, mark)
            if wait_gc:
                await gc
            else:  # a flush that became a checkpoint: the next flush need not wait for this
                gc.add_done_callback(_log_failure)
        return mark

    def _flush_sync(
        self,
        flushing: dict[int, dict[int, Entry]],
        idxs: dict[int, LedgerIndex],
        deleted: set[int],
        states: dict[int, tuple[int, int, int]] | None,
        mark: JournalMark,
    ) -> dict[int, dict[int, int]]:
        return self._writer.write(flushing, idxs, deleted, states, mark)

    # -- compaction --

    def live_fraction(self, log_id: int) -> float:
        size = self.logs.sizes.get(log_id, 0)
        return self._live.get(log_id, 0) / size if size else 1.0

    async def compact(self) -> int:
        """Rewrite entry logs whose live fraction is below the threshold; returns how many."""
        async with self._maint:
            victims = {
                log_id
                for log_id, size in self.logs.sizes.items()
                if log_id != self.logs.current
                and (size == 0 or self.live_fraction(log_id) < self.config.compaction_threshold)
            }
            if not victims:
                return 0
            moves: list[tuple[int, int, Location]] = []
            for lid, idx in self.indexes.items():
                for eid, loc in idx.items():
                    if loc[0] in victims:
                        moves.append((lid, eid, loc))
            moves.sort(key=lambda m: (m[0], m[1]))
            fds = {v: self.logs.acquire(v) for v in victims}
            loop = asyncio.get_running_loop()
            try:
                new_locs = await loop.run_in_executor(self._pool, self._compact_sync, moves, fds)
            finally:
                for v in victims:
                    self.logs.release(v)
            for (lid, eid, old), new in zip(moves, new_locs):
                cur = self.indexes.get(lid)
                if cur is None or cur.get(eid) != old:
                    continue
                cur.set(eid, new)
                self._live[old[0]] = self._live.get(old[0], 0) - old[2] - 4
                self._live[new[0]] = self._live.get(new[0], 0) + new[2] + 4
            for v in victims:
                self.logs.delete(v)
                self._live.pop(v, None)
            self.compactions += len(victims)
            log.info("compacted %d entry logs, moved %d entries", len(victims), len(moves))
            return len(victims)

    def _compact_sync(self, moves: list[tuple[int, int, Location]], fds: dict[int, int]) -> list[Location]:
        datas = [read_run(fds[loc[0]], loc[1], loc[2]) for _, _, loc in moves]
        new_locs = self.logs.append_many(datas) if datas else []
        self.logs.sync()
        per_ledger: dict[int, list[tuple[int, Location]]] = {}
        for (lid, eid, _), loc in zip(moves, new_locs):
            per_ledger.setdefault(lid, []).append((eid, loc))
        for lid, updates in per_ledger.items():
            if index_path(self.index_dir, lid).exists():
                write_index(self.index_dir, lid, updates)
        return new_locs
