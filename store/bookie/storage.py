"""Ledger storage: write cache -> entry logs + per-ledger index, read cache, compaction.

Adds land in the write cache (write_cache.py), readable at once; flushes and checkpoints
(checkpoint.py, with flush.py on the maintenance thread) move them to the entry logs and the
index. Reads look in the write cache, then in the read cache (read_cache.py), then on disk,
reading ahead; range reads (READ_RANGE, what scans and catch-up reads send) go out in the
entry logs' own record format, a run of entries as the one buffer read from disk (or, for a
background read, the one span of the log sent with sendfile), and leave the read cache to
single reads. Also here: each ledger's state and the tombstones of deleted ones
(ledger_states.py), LAC long polls (lac_polls.py) and entry-log compaction (compaction.py).
As BookKeeper's own ledger storage, this class only ties them together.

The event loop owns the in-memory structures, with one exception: the maintenance thread
writes flushed entries' locations into their LedgerIndex objects (see checkpoint.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from store.bookie.checkpoint import Checkpointer
from store.bookie.compaction import Compactor
from store.bookie.entry_log import LEN, EntryLogs, FileSpan, Location, read_run
from store.bookie.errors import NoEntryError, NoLedgerError
from store.bookie.flush import Entry, FlushWriter
from store.bookie.index import LedgerIndex, load_indexes, read_states
from store.bookie.journal import JournalMark
from store.bookie.lac_polls import LacPolls
from store.bookie.ledger_states import LedgerInfo, LedgerStates
from store.bookie.read_cache import ReadCache
from store.bookie.write_cache import WriteCache
from store.framing import Buffer
from store.tasks import cancel_and_wait

log = logging.getLogger(__name__)


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


class LedgerStorage:
    def __init__(self, data_dir: str | os.PathLike[str], config: StorageConfig | None = None) -> None:
        self.dir = Path(data_dir)
        self.config = config or StorageConfig()
        self.index_dir = self.dir / "ledgers"
        self.logs = EntryLogs(self.dir / "entrylogs", max_log_size=self.config.entry_log_size)
        self.ledgers = LedgerStates()
        self.indexes: dict[int, LedgerIndex] = {}
        self.write_cache = WriteCache(self.config.write_cache_bytes, self.config.flush_bytes)
        self.read_cache = ReadCache(self.config.read_cache_bytes)
        self.lac_polls = LacPolls()
        self.compactor = Compactor(self.logs, self.index_dir, self.config.compaction_threshold)
        self._maint = asyncio.Lock()  # one flush or compaction at a time
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="storage")
        self.checkpointer = Checkpointer(
            self.write_cache, self.ledgers, self.indexes, self.compactor,
            FlushWriter(self.logs, self.dir, self.index_dir), self._pool, self._maint,
        )
        self._tasks: list[asyncio.Task[None]] = []

    # -- life cycle --

    def open(self) -> JournalMark:
        """Load durable state; returns the journal mark replay must start from."""
        self.index_dir.mkdir(parents=True, exist_ok=True)
        mark, states = read_states(self.dir)
        self.logs.open()
        self.indexes.update(load_indexes(self.index_dir))  # in place: the checkpointer shares it
        for idx in self.indexes.values():
            self.compactor.count(idx, 1)
        self.ledgers.load(states, {lid: idx.last_entry() for lid, idx in self.indexes.items()})
        self.checkpointer.last_mark = mark
        return mark

    def follow_journal(self, mark_fn: Callable[[], JournalMark], after_checkpoint: Callable[[JournalMark], object]) -> None:
        """Checkpoints record mark_fn() (the journal's durable mark), then call
        after_checkpoint(mark) on a thread of their own to delete the journal before it."""
        self.checkpointer.mark_fn = mark_fn
        self.checkpointer.after_checkpoint = after_checkpoint

    def start_background(self) -> None:
        self._tasks.append(asyncio.create_task(self._periodic(self.config.flush_interval, self.checkpoint)))
        self._tasks.append(asyncio.create_task(self._periodic(self.config.compaction_interval, self.compact)))

    async def _periodic(self, interval: float, fn: Callable[[], object]) -> None:
        await asyncio.sleep(random.uniform(0, interval))  # out of step with other bookies
        while True:
            await asyncio.sleep(interval)
            try:
                await fn()  # type: ignore[misc]
            except Exception:
                log.exception("background %s failed", getattr(fn, "__name__", fn))

    async def close(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        await self.checkpointer.close()
        await asyncio.get_running_loop().run_in_executor(self._pool, self.logs.close)
        self._pool.shutdown(wait=True)
        self.checkpointer.shutdown()

    # -- mutations (event loop) --

    def put(self, ledger_id: int, entry_id: int, lac: int, entry: Entry) -> LedgerInfo:
        info = self.put_replayed(ledger_id, entry_id, lac, entry)
        self.checkpointer.flush_soon()
        self.write_cache.limit_room()
        return info

    def put_replayed(self, ledger_id: int, entry_id: int, lac: int, entry: Entry) -> LedgerInfo:
        """put() without triggering a flush (journal replay fills the cache, then checkpoints)."""
        info = self.ledgers.get_or_create(ledger_id)
        self.write_cache.put(ledger_id, entry_id, entry)
        if entry_id > info.last_entry:
            info.last_entry = entry_id
        if lac > info.lac:
            info.lac = lac
            self.lac_polls.notify(ledger_id, lac)
        return info

    def raise_lac(self, ledger_id: int, lac: int) -> LedgerInfo:
        """An explicit LAC (WRITE_LAC or its journal record): the known LAC becomes at least
        `lac`, waking long polls. A ledger not seen yet is created (it may hold no entry here
        when the ledger is striped)."""
        info = self.ledgers.get_or_create(ledger_id)
        if lac > info.lac:
            info.lac = lac
            self.lac_polls.notify(ledger_id, lac)
        return info

    def has_room(self) -> bool:
        return self.write_cache.has_room()

    async def wait_room(self) -> None:
        await self.write_cache.wait_room()

    def on_room(self, cb: Callable[[], object]) -> None:
        """Call cb() (once) when the write cache has room again (soon if it has now)."""
        self.write_cache.on_room(cb)

    @property
    def cached_bytes(self) -> int:
        """Bytes in the write cache (both halves)."""
        return self.write_cache.cached_bytes

    def fence(self, ledger_id: int) -> tuple[LedgerInfo, bool]:
        """Mark fenced (creating the ledger if unknown); True if it was not fenced before."""
        info = self.ledgers.get_or_create(ledger_id)
        first = not info.fenced
        info.fenced = True
        return info, first

    def delete(self, ledger_id: int) -> bool:
        known = self.ledgers.delete(ledger_id)
        self.lac_polls.fail(ledger_id, NoLedgerError(f"ledger {ledger_id} was deleted"))
        if not known:
            return False
        self.write_cache.drop(ledger_id)
        idx = self.indexes.pop(ledger_id, None)
        if idx is not None:
            # A snapshot: the maintenance thread may be extending this index right now.
            self.compactor.count(LedgerIndex(bytes(idx.locs)), -1)
        self.read_cache.drop(ledger_id)
        return True

    async def wait_lac(self, ledger_id: int, previous_lac: int, wait_s: float) -> int | None:
        """The known LAC once it exceeds previous_lac, or None after `wait_s` seconds.
        On a ledger this bookie does not know yet the poll parks until its first entry
        arrives (a reader may ask before the writer's first add lands here); a deleted
        ledger raises NoLedgerError."""
        if ledger_id in self.ledgers.tombstones:
            raise NoLedgerError(f"ledger {ledger_id} was deleted")
        info = self.ledgers.get(ledger_id)
        if info is not None and info.lac > previous_lac:
            return info.lac
        return await self.lac_polls.wait(ledger_id, previous_lac, wait_s)

    # -- reads --

    def _cached(self, ledger_id: int, entry_id: int) -> Entry | None:
        e = self.write_cache.get(ledger_id, entry_id)
        return e if e is not None else self.read_cache.get(ledger_id, entry_id)

    def info(self, ledger_id: int) -> LedgerInfo:
        return self.ledgers.info(ledger_id)

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
        out, disk = self._plan(ledger_id, first, last, max_bytes)
        if disk:
            runs = _runs(disk)
            for run, data in zip(runs, await self._pread(runs)):
                if len(run.parts) == 1:
                    out[run.parts[0][0]] = data
                else:
                    mv = memoryview(data)
                    for pos, rel, n in run.parts:
                        out[pos] = mv[rel : rel + n]  # views of the one read of the run: no copy
            for pos, _ in disk:
                entry = out[pos]
                assert entry is not None
                self.read_cache.put(ledger_id, first + pos, entry)
        return out  # type: ignore[return-value]

    async def read_range_prefixed(self, ledger_id: int, first: int, last: int, max_bytes: int) -> list[Buffer]:
        """The entries read_range returns, each prefixed by its length (u32, big-endian), as
        buffers to send in order: range_pieces with each span read from its entry log."""
        pieces, logs = self.range_pieces(ledger_id, first, last, max_bytes)
        try:
            spans = [(i, piece) for i, piece in enumerate(pieces) if isinstance(piece, tuple)]
            if spans:
                loop = asyncio.get_running_loop()
                datas = await loop.run_in_executor(None, lambda: [read_run(*span) for _, span in spans])
                for (i, _), data in zip(spans, datas):
                    pieces[i] = data
        finally:
            self.release_logs(logs)
        return pieces  # type: ignore[return-value]

    def range_pieces(
        self, ledger_id: int, first: int, last: int, max_bytes: int, scan: bool = False
    ) -> tuple[list[Buffer | FileSpan], list[int]]:
        """READ_RANGE's response body for the entries read_range returns, each prefixed by its
        length (u32, big-endian): buffers for cached entries, and for each run of entries
        contiguous in one entry log an (fd, offset, length) span of that log, prefixes and
        all, since that is the logs' record format: a scan costs no slice, prefix or buffer
        per entry. Returns (pieces, the logs whose fds the spans hold): the caller sends or
        reads the spans, then hands those logs to release_logs. Its entries do not go into
        the read cache, where a scan would only displace what tailing readers share. scan: the
        spans are of the logs' fds without the kernel's read-ahead (EntryLogs.acquire)."""
        out, disk = self._plan(ledger_id, first, last, max_bytes)
        runs = _runs(disk)
        pieces: list[Buffer | FileSpan] = []
        logs: list[int] = []
        pos = r = 0
        try:
            while pos < len(out):
                e = out[pos]
                if e is not None:
                    pieces += (LEN.pack(len(e)), e)
                    pos += 1
                else:
                    run = runs[r]
                    fd = self.logs.acquire(run.log_id, scan)
                    logs.append(run.log_id)
                    pieces.append((fd, run.start - LEN.size, run.end - run.start + LEN.size))
                    pos += len(run.parts)
                    r += 1
        except BaseException:
            self.release_logs(logs)
            raise
        return pieces, logs

    def release_logs(self, logs: list[int]) -> None:
        """Give back the entry-log fds range_pieces' spans held."""
        for log_id in logs:
            self.logs.release(log_id)

    def _plan(
        self, ledger_id: int, first: int, last: int, max_bytes: int
    ) -> tuple[list[Entry | None], list[tuple[int, Location]]]:
        """A range read's entries: the cached ones, None where one is on disk, and the
        (position, location) of those on disk."""
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
        return out, disk

    async def _pread(self, runs: list[_Run]) -> list[bytes]:
        """One pread per run, in a worker thread."""
        jobs = [(self.logs.acquire(r.log_id), r.start, r.end - r.start) for r in runs]
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, lambda: [read_run(fd, off, n) for fd, off, n in jobs])
        finally:
            for r in runs:
                self.logs.release(r.log_id)

    # -- flush, checkpoint, compaction --

    async def checkpoint(self) -> JournalMark:
        """Flush the write cache to entry logs + index, sync them and persist the ledger
        states and the journal mark; then the journal files before the mark are deleted."""
        return await self.checkpointer.checkpoint()

    async def flush(self) -> JournalMark:
        """Move the active write cache half to the entry log (a checkpoint if one is due)."""
        return await self.checkpointer.flush()

    async def compact(self) -> int:
        """Rewrite entry logs whose live fraction is below the threshold; returns how many."""
        async with self._maint:
            return await self.compactor.compact(self.indexes, self._pool)


@dataclass
class _Run:
    """Entries stored back to back in one entry log, next to each other in a range read."""

    log_id: int
    start: int  # offset of the first entry's bytes
    end: int  # offset just past the last entry's
    parts: list[tuple[int, int, int]]  # (position in the read, offset from start, length)


def _runs(disk: list[tuple[int, Location]]) -> list[_Run]:
    runs: list[_Run] = []
    last_pos = -2
    for pos, (log_id, off, n) in disk:
        r = runs[-1] if runs else None
        if r is not None and r.log_id == log_id and r.end + LEN.size == off and pos == last_pos + 1:
            r.parts.append((pos, off - r.start, n))
            r.end = off + n
        else:
            runs.append(_Run(log_id, off, off + n, [(pos, 0, n)]))
        last_pos = pos
    return runs
