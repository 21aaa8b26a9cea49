"""The bookie's operations over its journal and ledger storage (no networking here).

Add: verify the entry's CRC, refuse if fenced (unless recovery), put it in the write cache,
then journal it; the returned future resolves once the journal record is fdatasync'd.
Fence: set the flag, journal a fence record on the first fence; every fence of that ledger
answers only after that record is durable. Write LAC (an idle writer's explicit LAC): raise the
known LAC at once (waking long polls) and answer once its journal record is durable; refused
on a fenced or deleted ledger. Start-up replays the journal from the storage's
checkpoint mark, then checkpoints so the replayed journal files can go.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from store.bookie import journal as jr
from store.bookie.background_reads import DEFAULT_READ_AHEAD
from store.bookie.entry import EntryDigestError, peek_ids, unpack_entry
from store.bookie.entry_log import FileSpan
from store.bookie.errors import (
    BadRequestError,
    BookieError,
    DigestMismatchError,
    FencedError,
    NoLedgerError,
    ReadOnlyError,
    Status,
)
from store.bookie.flush import Entry
from store.bookie.protocol import LEDGER, WRITE_LAC_REQ
from store.bookie.storage import LedgerStorage, StorageConfig
from store.framing import Buffer

log = logging.getLogger(__name__)


@dataclass
class BookieConfig:
    storage: StorageConfig = field(default_factory=StorageConfig)
    journal_file_size: int = 64 << 20
    # BookKeeper's journalMaxGroupWaitMSec: 2 ms; 0 writes each batch as soon as the loop is idle
    journal_batch_wait: float = 0.002
    journal_sync: bool = True  # False: ack adds before fdatasync (UNSAFE, benchmarks only)
    # Group commits up to this long run on the event loop, slower ones send them to a thread
    # (journal.py's module doc); 0: always on the thread.
    journal_loop_sync_max: float = jr.DEFAULT_LOOP_SYNC_MAX
    background_read_threads: int = 2  # threads sending the READ_RANGEs flagged FLAG_BACKGROUND
    # Their nice level (0: the bookie's own). Not lowered by default: see background_reads.py.
    background_read_nice: int = 0
    # Bytes they read ahead a chunk, with the kernel's read-ahead off (0: the kernel's).
    background_read_ahead: int = DEFAULT_READ_AHEAD


class Bookie:
    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        journal_dir: str | os.PathLike[str] | None = None,
        config: BookieConfig | None = None,
    ) -> None:
        self.config = config or BookieConfig()
        self.data_dir = Path(data_dir)
        self.journal_dir = Path(journal_dir) if journal_dir is not None else self.data_dir / "journal"
        self.storage = LedgerStorage(self.data_dir, self.config.storage)
        self.journal = jr.Journal(
            self.journal_dir,
            max_file_size=self.config.journal_file_size,
            max_batch_wait=self.config.journal_batch_wait,
            sync=self.config.journal_sync,
            loop_sync_max=self.config.journal_loop_sync_max,
        )
        if not self.config.journal_sync:
            log.warning(
                "UNSAFE: journal fdatasync is OFF (--no-fsync): acknowledged adds can be lost "
                "on a crash or power failure. For benchmarks only."
            )
        self._fencing: dict[int, asyncio.Future[None]] = {}
        self.replayed = 0
        self.read_only = False  # set by store.bookie.disk.DiskMonitor when the disk fills

    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.journal_dir.mkdir(parents=True, exist_ok=True)
        mark = self.storage.open()
        self.replayed, last_id = await asyncio.to_thread(jr.replay, self.journal_dir, mark, self._apply)
        self.journal.open(after_file_id=last_id)
        self.storage.follow_journal(lambda: self.journal.durable_mark, self.journal.delete_before)
        await self.storage.checkpoint()
        self.storage.start_background()
        log.info("bookie storage open: %d journal records replayed, %d ledgers", self.replayed, len(self.storage.ledgers))

    def _apply(self, rtype: int, payload: memoryview) -> None:
        # Runs in a thread during start-up, before anything else touches storage.
        if rtype in (jr.REC_ADD, jr.REC_ENTRY):
            lid, eid, lac = peek_ids(payload)
            self.storage.put_replayed(lid, eid, lac, bytes(payload))
        elif rtype == jr.REC_FENCE:
            self.storage.fence(LEDGER.unpack_from(payload)[0])
        elif rtype == jr.REC_DELETE:
            self.storage.delete(LEDGER.unpack_from(payload)[0])
        elif rtype == jr.REC_LAC:
            lid, lac = WRITE_LAC_REQ.unpack_from(payload)
            if lid not in self.storage.ledgers.tombstones:
                self.storage.raise_lac(lid, lac)
        else:
            log.warning("unknown journal record type %d skipped", rtype)

    async def close(self) -> None:
        await self.journal.drain()
        await self.storage.close()
        await self.journal.close()

    # -- operations --

    def add_cb(
        self, ledger_id: int, entry: Entry, recovery: bool, cb: Callable[[BaseException | None], object]
    ) -> bool:
        """Start an add; cb(None) once durable, cb(error) if the journal write failed.
        False: the write cache is full (nothing done; wait_room() and retry). Raises
        BookieError for a refused add."""
        try:
            lid, eid, lac, _ = unpack_entry(entry)
        except EntryDigestError as e:
            raise DigestMismatchError(str(e)) from None
        if lid != ledger_id:
            raise BadRequestError(f"entry of ledger {lid} sent as an add to ledger {ledger_id}")
        if eid < 0:
            raise BadRequestError(f"negative entry id {eid}")
        if self.read_only:
            raise ReadOnlyError("bookie is read-only (disk usage above quire.bookie.disk.usage.threshold): "
                                "change ensemble")
        if lid in self.storage.ledgers.tombstones:
            if recovery:
                raise NoLedgerError(f"ledger {lid} was deleted")
            raise FencedError(f"ledger {lid} was deleted")
        if not self.storage.has_room():
            return False
        info = self.storage.ledgers.get(lid)
        if info is not None and info.fenced and not recovery:
            raise FencedError(f"ledger {lid} is fenced")
        if self.journal.failed is not None:
            raise BookieError(f"journal failed: {self.journal.failed}", Status.IO_ERROR)
        self.storage.put(lid, eid, lac, entry)
        # Verified just above; journaled as REC_ENTRY, whose record CRC leaves the payload to
        # the entry's own digest (no second pass over its bytes here).
        self.journal.append_cb(jr.REC_ENTRY, entry, cb)
        return True

    async def add(self, ledger_id: int, entry: Entry, recovery: bool = False) -> None:
        loop = asyncio.get_running_loop()
        while True:
            fut: asyncio.Future[None] = loop.create_future()

            def done(exc: BaseException | None, fut: asyncio.Future[None] = fut) -> None:
                if not fut.done():
                    fut.set_result(None) if exc is None else fut.set_exception(exc)

            if self.add_cb(ledger_id, entry, recovery, done):
                await fut
                return
            await self.storage.wait_room()

    async def fence(self, ledger_id: int) -> tuple[int, int]:
        """Fence durably; returns (lac, last_entry_id)."""
        if ledger_id in self.storage.ledgers.tombstones:
            raise NoLedgerError(f"ledger {ledger_id} was deleted")
        info, first = self.storage.fence(ledger_id)
        if first:
            fut = self._fencing[ledger_id] = self.journal.append(jr.REC_FENCE, LEDGER.pack(ledger_id))
            fut.add_done_callback(lambda _f: self._fencing.pop(ledger_id, None))
        else:
            fut = self._fencing.get(ledger_id)  # type: ignore[assignment]
        if fut is not None:
            await asyncio.shield(fut)
        return info.lac, info.last_entry

    async def read(self, ledger_id: int, entry_id: int, fence: bool = False) -> Entry:
        if fence:
            await self.fence(ledger_id)
        return await self.storage.read(ledger_id, entry_id)

    async def read_range(self, ledger_id: int, first: int, last: int, max_bytes: int) -> list[Entry]:
        _check_range(first, last)
        return await self.storage.read_range(ledger_id, first, last, max_bytes)

    async def read_range_prefixed(self, ledger_id: int, first: int, last: int, max_bytes: int) -> list[Buffer]:
        """read_range's entries, each after its u32 length: READ_RANGE's response body."""
        _check_range(first, last)
        return await self.storage.read_range_prefixed(ledger_id, first, last, max_bytes)

    def range_pieces(
        self, ledger_id: int, first: int, last: int, max_bytes: int, scan: bool = False
    ) -> tuple[list[Buffer | FileSpan], list[int]]:
        """READ_RANGE's response body with the entries on disk as entry-log spans to sendfile;
        the caller releases the logs afterwards (LedgerStorage.range_pieces)."""
        _check_range(first, last)
        return self.storage.range_pieces(ledger_id, first, last, max_bytes, scan)

    def read_lac(self, ledger_id: int) -> tuple[int, int]:
        info = self.storage.info(ledger_id)
        return info.lac, info.last_entry

    async def wait_lac(self, ledger_id: int, previous_lac: int, wait_s: float) -> int | None:
        return await self.storage.wait_lac(ledger_id, previous_lac, wait_s)

    async def write_lac(self, ledger_id: int, lac: int) -> None:
        """Record the writer's explicit LAC. Only the writer sends it, and only for entries it
        knows are acked at the ack quorum, so it is safe as a lower bound everywhere."""
        if lac < -1:
            raise BadRequestError(f"bad LAC {lac}")
        if ledger_id in self.storage.ledgers.tombstones:
            raise NoLedgerError(f"ledger {ledger_id} was deleted")
        info = self.storage.ledgers.get(ledger_id)
        if info is not None and info.fenced:
            raise FencedError(f"ledger {ledger_id} is fenced")
        if info is not None and lac <= info.lac:
            return  # known already (piggybacked, or an earlier WRITE_LAC)
        if self.journal.failed is not None:
            raise BookieError(f"journal failed: {self.journal.failed}", Status.IO_ERROR)
        self.storage.raise_lac(ledger_id, lac)
        await self.journal.append(jr.REC_LAC, WRITE_LAC_REQ.pack(ledger_id, lac))

    async def delete_ledger(self, ledger_id: int) -> None:
        self.storage.delete(ledger_id)
        self._fencing.pop(ledger_id, None)
        await self.journal.append(jr.REC_DELETE, LEDGER.pack(ledger_id))


def _check_range(first: int, last: int) -> None:
    if first < 0 or last < first:
        raise BadRequestError(f"bad range {first}..{last}")
