"""Flushes and checkpoints of the bookie's ledger storage (the event loop's side; flush.py is
the maintenance thread's).

Once the write cache's active half holds enough, a *flush* swaps the halves and the maintenance
thread appends the flushed half to the current entry log, syncs it and writes the index
records. A *checkpoint* (every flush_interval, and whenever a journal file could be deleted) is
a flush that also syncs the index files written since the last one and persists the ledger
states with the journal mark up to which everything is now in storage; then the journal files
before the mark go (after_checkpoint, on a thread of its own).

The maintenance thread writes the flushed entries' locations into their LedgerIndex objects
itself (each write is one atomic bytearray operation, and the loop finds those entries in the
half being flushed until then), so that the loop's cost per flush is O(ledgers), never
O(entries).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections.abc import Callable

from store.bookie.compaction import Compactor
from store.bookie.flush import Entry, FlushWriter
from store.bookie.index import LedgerIndex
from store.bookie.journal import JournalMark
from store.bookie.ledger_states import LedgerStates, State
from store.bookie.write_cache import WriteCache

log = logging.getLogger(__name__)


def _log_failure(f: asyncio.Future[object]) -> None:
    if not f.cancelled() and f.exception() is not None:
        log.error("journal clean-up after a checkpoint failed: %s", f.exception())


class Checkpointer:
    def __init__(
        self,
        cache: WriteCache,
        ledgers: LedgerStates,
        indexes: dict[int, LedgerIndex],
        compactor: Compactor,
        writer: FlushWriter,
        pool: concurrent.futures.Executor,
        lock: asyncio.Lock,
    ) -> None:
        self._cache = cache
        self._ledgers = ledgers
        self._indexes = indexes  # the storage's: indexes of new ledgers are added here
        self._compactor = compactor
        self._writer = writer  # the maintenance thread's part
        self._pool = pool  # the maintenance thread
        self._lock = lock  # one flush or compaction at a time
        # after_checkpoint (journal deletion) is slow on purpose: off the flush thread.
        self._gc_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="journal-gc")
        self._flush_task: asyncio.Task[None] | None = None
        self.mark_fn: Callable[[], JournalMark] = lambda: JournalMark(0, 0)
        self.after_checkpoint: Callable[[JournalMark], object] = lambda mark: None
        self.last_mark = JournalMark(0, 0)
        self.checkpoints = 0
        self.flushes = 0

    def flush_soon(self) -> None:
        """After an add: start flushing if the active half holds enough and no flush runs."""
        if self._cache.wants_flush and self._flush_task is None:
            self._flush_task = asyncio.get_running_loop().create_task(self._flush_while_full())

    async def _flush_while_full(self) -> None:
        try:
            while self._cache.wants_flush:
                await self._flush(checkpoint=False)
        except Exception:
            log.exception("write cache flush failed")
            await asyncio.sleep(1.0)  # no retry storm: the next put after this retries
        finally:
            self._flush_task = None

    async def checkpoint(self) -> JournalMark:
        """Flush the write cache to entry logs + index, sync them and persist the ledger
        states and the journal mark; then the journal files before the mark are deleted."""
        return await self._flush(checkpoint=True, wait_gc=True)

    async def flush(self) -> JournalMark:
        """Move the active write cache half to the entry log (a checkpoint if one is due)."""
        return await self._flush(checkpoint=False)

    async def close(self) -> None:
        """Wait for a running flush, then checkpoint a last time."""
        if self._flush_task is not None:
            with contextlib.suppress(Exception):
                await self._flush_task
        await self.checkpoint()

    def shutdown(self) -> None:
        self._gc_pool.shutdown(wait=True)

    async def _flush(self, *, checkpoint: bool, wait_gc: bool = False) -> JournalMark:
        # Everything on the loop here is O(ledgers), never O(entries): the thread does the rest.
        loop = asyncio.get_running_loop()
        async with self._lock:
            mark = self.mark_fn()
            if mark.file_id > self.last_mark.file_id:
                checkpoint = True  # a whole journal file can go: keep replay and disk use short
            flushing = self._cache.start_flush()
            idxs: dict[int, LedgerIndex] = {}
            for lid in flushing:
                idx = self._indexes.get(lid)
                if idx is None:
                    idx = self._indexes[lid] = LedgerIndex()
                idxs[lid] = idx
            deleted: set[int] = set()
            states: dict[int, State] | None = None
            if checkpoint:
                deleted = self._ledgers.take_unlinked()
                states = self._ledgers.checkpoint_states()
            t0, nbytes = loop.time(), self._cache.flushing_bytes
            try:
                live = await loop.run_in_executor(self._pool, self._flush_sync, flushing, idxs, deleted, states, mark)
            except BaseException:
                # Keep the entries readable and flush them next time.
                self._cache.flush_failed(lambda lid: lid in self._ledgers)
                self._ledgers.unlink_later(deleted)
                raise
            for lid, deltas in live.items():
                if lid not in self._ledgers:
                    self._ledgers.unlink_later((lid,))  # deleted during the flush: its index file goes next time
                    continue
                self._compactor.add(deltas)
            self._cache.flush_done()
            self.flushes += 1
            took = loop.time() - t0
            log.log(
                logging.WARNING if took > 1.0 else logging.DEBUG,
                "%s of %.1f MB took %.3f s (write cache now %.1f MB)",
                "checkpoint" if checkpoint else "flush",
                nbytes / 1e6,
                took,
                self._cache.cached_bytes / 1e6,
            )
            if checkpoint:
                self.last_mark = mark
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
        states: dict[int, State] | None,
        mark: JournalMark,
    ) -> dict[int, dict[int, int]]:
        return self._writer.write(flushing, idxs, deleted, states, mark)
