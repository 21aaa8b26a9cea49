"""The bookie's write-ahead journal: append-only files with group commit.

File = [magic:8] then records [len:u32][crc32c:u32][type:u8][payload], CRC over type+payload,
except for REC_ENTRY: its payload is a packed entry (store.bookie.entry), which carries its own
CRC32C over ids, LAC and payload, so the record CRC covers the type and the entry's 28-byte
header (with that digest) and replay verifies the entry's digest. The bookie journals its adds
so: one CRC pass over an entry's bytes on the bookie (its check on add) instead of two, and a
torn or corrupt record is still detected.
Every add/fence/delete/explicit LAC is appended here and acknowledged only after its bytes are fdatasync'd.
Appends that arrive while a write+fdatasync is in progress queue up and go out together in one
write and one fdatasync; when the journal
is idle, an append that follows another within max_batch_wait waits up to that long for more
(BookKeeper's group wait: a steady stream of adds makes fewer, larger syncs, and the bookie's
CPU goes with the number of syncs more than with their size), and one after a quiet spell is
written at once. Files roll at a
size; files wholly before the ledger storage's checkpoint mark are deleted.

Where a group commit runs: on the event loop itself while commits are quick (a mean of the
recent ones up to loop_sync_max), else on a writer thread of the journal's own. On the loop, the
adds that arrive during a commit wait in the socket buffers and are read, together, into the
next one, as they would queue behind a thread's commit; a thread instead keeps the loop serving
reads while the disk syncs. But each commit through a thread costs two hand-offs between threads
(a queue, then back by call_soon_threadsafe), each a wake-up and a pass of the GIL: at 20 MB/s
of adds on 2 vCPUs, commits on the loop took the bookies' voluntary context switches from about
8,000 to 5,200 a second, their involuntary ones from about 1,500 to 500, and their CPU by a
sixth. When the mean of the loop's recent commits (weighted, SLOW_MEAN_WEIGHT to the newest:
about the last ten) passes loop_sync_max, a slow or busy disk, the commits go to the thread for
THREAD_SPELL_S, then come back to the loop and are timed afresh: a disk that slows down holds
the loop up for a few commits every spell, and in between only the adds, not the bookie's reads.
Only commits on the loop are timed. One on the thread also waits for the GIL after its write and
its fdatasync, so on a busy CPU it looks slow whatever the disk; when its time extended the
spell, a bookie that once met a slow commit (a hiccup of the host's disk) kept its commits on
the thread for good, with the two hand-offs each, and most so when the CPUs were busiest. A
single outlier no longer moves the commits either (one 30 ms commit among 1 ms ones leaves the
mean under 4 ms), where a stall ten times loop_sync_max does at once. loop_sync_max 0 always
uses the thread.

Preallocation (BookKeeper's journal preallocation, taken further): a thread fills the next file
with zeros ahead of time, and a roll renames it into place. Appends then overwrite blocks that are
allocated and written, in a file whose size does not change, so an fdatasync only writes data:
no filesystem journal commit (ext4's jbd2) per sync, a commit that otherwise queues behind
every other sync on the disk and stretches when the CPU is busy. Each group commit is padded
(REC_PAD) to a page boundary, so a write never half-covers a page that must first be read
back from disk. Replay stops at a zero record header: the file's unwritten rest.

Direct I/O: with preallocation, every group commit is whole pages at a page-aligned offset,
so it goes out with O_DIRECT from one reused, page-aligned buffer of the journal's own (where
the file system takes O_DIRECT). Only replay, after a restart, ever reads the journal. A
buffered write copied each commit into page-cache pages allocated for it, dropped once synced
(_drop_synced); on a virtual machine whose host takes freed guest memory back (free page
reporting), each such page costs a fault in the host as well, and that copy was half of the
journal thread's CPU under a steady stream of adds. The thread's CPU stayed about the same
(it now waits in the write as well as in the fdatasync), but the commit no longer copies into
memory the host must fault in, and the journal no longer churns the page cache.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import ctypes.util
import errno
import logging
import mmap
import os
import queue
import random
import struct
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import crc32c

from store.bookie.entry import HEADER_SIZE as ENTRY_HEADER
from store.bookie.entry import EntryDigestError, unpack_entry
from store.bookie.metrics import JOURNAL_METRICS, journal_batch, journal_commit
from store.tasks import within

log = logging.getLogger(__name__)

MAGIC = b"QJRNL\x00\x00\x01"
REC = struct.Struct(">IIB")
REC_SIZE = REC.size  # 9
MAX_RECORD = 64 << 20

REC_ADD = 1  # payload: a packed entry
REC_FENCE = 2  # payload: [ledger:i64]
REC_DELETE = 3  # payload: [ledger:i64]
REC_LAC = 4  # payload: [ledger:i64][lac:i64], an explicit LAC (WRITE_LAC)
REC_ENTRY = 5  # payload: a packed entry, checked by its own digest (see above)
REC_PAD = 6  # payload: zeros up to a page boundary; skipped by replay

_Waiter = Callable[[BaseException | None], object]  # told once its record is durable, or why not

_NAME = "journal-{:010d}.log"
_Batch = tuple[list[tuple[int, bytes | memoryview]], list[_Waiter]]
_SPARE = "journal-next.prealloc"  # the next file, being filled with zeros (not a journal file yet)
_SLOW_SYNC = 1.0  # log write+fdatasync slower than this (an overloaded or failing disk)
DEFAULT_LOOP_SYNC_MAX = 0.01  # group commits up to this long run on the event loop (module doc)
THREAD_SPELL_S = 10.0  # once the loop's commits are slow, they go through the writer thread this long
SLOW_MEAN_WEIGHT = 0.1  # the newest loop commit's weight in their running mean (module doc)


@dataclass(frozen=True, order=True)
class JournalMark:
    """A position in the journal: everything before it is reflected in ledger storage."""

    file_id: int
    offset: int


def journal_files(directory: Path) -> list[tuple[int, Path]]:
    out = []
    for p in directory.glob("journal-*.log"):
        try:
            out.append((int(p.stem.split("-", 1)[1]), p))
        except ValueError:
            continue
    return sorted(out)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


IOV_MAX = 1024  # buffers per writev/pwritev (Linux UIO_MAXIOV)
_PAGE = 4096
_DROP_EVERY = 1 << 20  # synced journal bytes taken out of the page cache at a time
_ZEROS = bytes(1 << 20)
_FILL_PAUSE = 0.002  # seconds between the spare's MBs (a 64 MB spare takes at least 0.13 s)


def _writeback_starter() -> Callable[[int, int, int], object]:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        fn = libc.sync_file_range
    except (OSError, AttributeError, TypeError):  # pragma: no cover - not Linux
        return lambda fd, off, n: None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    return lambda fd, off, n: fn(fd, off, n, 2)


# start_writeback(fd, offset, length): sync_file_range(SYNC_FILE_RANGE_WRITE), i.e. start
# writing these bytes to disk now without waiting. Data written this way reaches the disk as
# a stream of small writes instead of one burst at a later fdatasync (or a stall when the
# kernel throttles a writer with too many dirty pages), a burst that would queue the
# journal's latency-critical fdatasyncs behind it. Not a durability guarantee.
start_writeback = _writeback_starter()


def write_all(fd: int, parts: list[bytes | memoryview]) -> int:
    """writev the buffers (no joining copy); returns the bytes written."""
    total = 0
    for i in range(0, len(parts), IOV_MAX):
        chunk = parts[i : i + IOV_MAX]
        want = sum(len(c) for c in chunk)
        n = os.writev(fd, chunk)
        if n < want:  # short write: finish the rest the slow way
            rest = memoryview(b"".join(chunk))[n:]
            while rest:
                rest = rest[os.write(fd, rest) :]
        total += want
    return total


O_DIRECT = getattr(os, "O_DIRECT", 0)  # 0 where the platform has none (macOS)
FADVISE = hasattr(os, "posix_fadvise")  # False where the platform has none (macOS)


class DirectBuffer:
    """A page-aligned buffer (an anonymous mapping) for O_DIRECT writes, in whole MiB; reused
    write after write, so its pages stay those of the first (never fresh ones to fault in)."""

    def __init__(self, at_least: int) -> None:
        self.size = -(-max(at_least, 1) // (1 << 20)) * (1 << 20)
        self._map = mmap.mmap(-1, self.size)

    def fill(self, parts: list[bytes | memoryview], size: int) -> memoryview:
        """The parts copied in, one after the other, then zeros up to `size` (at most the
        buffer's): a view of those `size` bytes (release it)."""
        mv = memoryview(self._map)[:size]
        pos = 0
        for x in parts:
            n = len(x)
            mv[pos : pos + n] = x
            pos += n
        if pos < size:
            mv[pos:] = bytes(size - pos)
        return mv

    def close(self) -> None:
        self._map.close()


def direct_buffer(buf: DirectBuffer | None, size: int, at_least: int = 0) -> DirectBuffer:
    """`buf` if it holds `size` bytes; else a new one of max(size, at_least) (`buf` closed)."""
    if buf is not None and buf.size >= size:
        return buf
    if buf is not None:
        buf.close()
    return DirectBuffer(max(size, at_least))


def pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    """All of `data` at `offset` (an O_DIRECT write is whole or an error, short only at ENOSPC)."""
    written = 0
    while written < len(data):
        written += os.pwrite(fd, data[written:], offset + written)


_SEEDS = [crc32c.crc32c(bytes((t,))) for t in range(256)]  # CRC of the type byte, the CRC's start


def shrink_and_unlink(path: Path, step: int = 8 << 20, pause: float = 0.01) -> None:
    """Unlink a large file a few MB at a time. Freeing all its extents at once makes one big
    filesystem transaction that every other fdatasync on the disk (the journal's, of this
    and of other bookies) then waits behind for tens of milliseconds."""
    try:
        size = path.stat().st_size
        while size > step:
            size -= step
            os.truncate(path, size)
            time.sleep(pause)
        path.unlink()
    except FileNotFoundError:
        pass


def record_crc(rtype: int, payload: bytes | memoryview) -> int:
    """The record CRC: of a REC_ENTRY's entry header only (the entry's digest covers the rest)."""
    if rtype == REC_ENTRY:
        return crc32c.crc32c(memoryview(payload)[:ENTRY_HEADER], _SEEDS[rtype])
    return crc32c.crc32c(payload, _SEEDS[rtype])


def pad_record(offset: int) -> bytes:
    """A REC_PAD record starting at `offset` that ends on the next page boundary."""
    n = -(offset + REC_SIZE) % _PAGE
    return encode_record(REC_PAD, _ZEROS[:n])


def _head() -> bytes:
    """A preallocating journal's file head: the magic, then a pad to the first page boundary."""
    return MAGIC + pad_record(len(MAGIC))


def fill_spare(directory: Path, size: int) -> Path:
    """Write the next journal file under the spare's name: the header, a pad to the first page
    boundary, zeros up to `size`; synced, and out of the page cache (appends write whole pages,
    which need no read). Written with O_DIRECT where the file system takes it: nothing ever
    reads these zeros, so they skip the page cache (no copy into it of a third of the bytes a
    bookie writes, and no 64 MB of cache per spare to drop after)."""
    path = directory / _SPARE
    head = _head()
    if size % _PAGE == 0 and len(head) % _PAGE == 0 and _fill_direct(path, head, size):
        return path
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, head)
        # start_writeback: a stream of writes, not one burst at the fdatasync
        _write_zeros(fd, len(head), size, memoryview(_ZEROS), start_writeback)
        os.fdatasync(fd)
        if FADVISE:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return path


def _fill_direct(path: Path, head: bytes, size: int) -> bool:
    """fill_spare's O_DIRECT way (page-aligned sizes only); False where the platform or the file
    system refuses O_DIRECT (tmpfs, macOS), for the buffered way."""
    if not O_DIRECT:
        return False
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | O_DIRECT, 0o644)
    except OSError:
        return False
    buf = DirectBuffer(len(_ZEROS))
    mv = buf.fill([], buf.size)
    try:
        try:
            mv[: len(head)] = head
            os.write(fd, mv[: len(head)])
        except OSError as e:
            if e.errno != errno.EINVAL:  # EINVAL: this file system's O_DIRECT wants other alignment
                raise
            return False
        mv[: len(head)] = bytes(len(head))
        _write_zeros(fd, len(head), size, mv, None)
        os.fdatasync(fd)  # the blocks' allocation: O_DIRECT wrote the data itself
        return True
    finally:
        mv.release()
        buf.close()
        os.close(fd)


def _write_zeros(fd: int, written: int, size: int, zeros: memoryview,
                 after: Callable[[int, int, int], object] | None) -> None:
    """fill_spare's zeros from `written` up to `size`, a buffer's worth at a time; after(fd,
    offset, n) follows each write."""
    while written < size:
        n = os.write(fd, zeros[: min(len(zeros), size - written)])
        if after is not None:
            after(fd, written, n)
        written += n
        time.sleep(_FILL_PAUSE)  # a MB at a time: the disk's queue stays short for the journal's syncs


def encode_record(rtype: int, payload: bytes | memoryview) -> bytes:
    return REC.pack(len(payload), record_crc(rtype, payload), rtype) + bytes(payload)


def _damage(rtype: int, payload: memoryview, crc: int) -> str | None:
    """Why a replayed record is not intact, or None."""
    if record_crc(rtype, payload) != crc:
        return "checksum mismatch"
    if rtype == REC_ENTRY:
        try:
            unpack_entry(payload)
        except EntryDigestError as e:
            return f"entry digest mismatch ({e})"
    return None


def replay(
    directory: Path, start: JournalMark, apply: Callable[[int, memoryview], None]
) -> tuple[int, int]:
    """Re-apply every intact record from `start` on, truncating torn or corrupt tails.

    Returns (records applied, highest file id seen or -1)."""
    files = journal_files(directory)
    applied = 0
    last_id = files[-1][0] if files else -1
    for fid, path in files:
        if fid < start.file_id:
            continue
        data = path.read_bytes()
        if len(data) < len(MAGIC) or data[: len(MAGIC)] != MAGIC:
            log.warning("journal %s has no valid header; ignoring it", path)
            continue
        pos = max(len(MAGIC), start.offset) if fid == start.file_id else len(MAGIC)
        mv = memoryview(data)
        end = len(data)
        while pos < end:
            bad = None
            if pos + REC_SIZE > end:
                bad = "torn record header"
            else:
                n, crc, rtype = REC.unpack_from(mv, pos)
                if n == 0 and crc == 0 and rtype == 0:
                    break  # the preallocated rest of the file: never written
                if n > MAX_RECORD:
                    bad = f"record length {n} too large"
                elif pos + REC_SIZE + n > end:
                    bad = "torn record"
                else:
                    payload = mv[pos + REC_SIZE : pos + REC_SIZE + n]
                    bad = _damage(rtype, payload, crc)
            if bad is not None:
                level = logging.WARNING if fid == last_id else logging.ERROR
                log.log(level, "journal %s: %s at offset %d; truncating %d bytes", path, bad, pos, end - pos)
                mv.release()
                os.truncate(path, pos)
                fd = os.open(path, os.O_RDWR)
                try:
                    os.fdatasync(fd)
                finally:
                    os.close(fd)
                break
            if rtype != REC_PAD:
                apply(rtype, payload)
                applied += 1
            pos += REC_SIZE + n
    return applied, last_id


def _write_loop(ref: weakref.ref[Journal], batches: queue.SimpleQueue[_Batch | None],
                loop: asyncio.AbstractEventLoop) -> None:
    """A journal's writer thread: each group commit, then its outcome handed to the loop."""
    while (item := batches.get()) is not None:
        journal = ref()
        if journal is None:
            return
        batch, waiters = item
        mark, exc = journal._try_write(batch)
        try:
            loop.call_soon_threadsafe(journal._written, mark, exc, waiters)
        except RuntimeError:  # the loop is closed: nobody waits any more
            return
        del journal


class Journal:
    """Group-committing append-only journal. Use from one event loop."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        max_file_size: int = 64 << 20,
        max_batch_wait: float = 0.0,
        max_batch_bytes: int = 4 << 20,
        sync: bool = True,
        preallocate: bool = True,
        direct_io: bool = True,
        loop_sync_max: float = DEFAULT_LOOP_SYNC_MAX,
    ) -> None:
        """direct_io: group commits with O_DIRECT where the file system takes it (preallocating
        journals only: they write whole, aligned pages; see the module doc). loop_sync_max:
        seconds the loop's recent group commits may take on average and the next still run on
        the event loop (0: every commit on the writer thread; see the module doc)."""
        self.directory = Path(directory)
        # False: acknowledge after write(2) without fdatasync. Unsafe, for benchmarks only.
        self.sync = sync
        self.max_file_size = max_file_size
        self._roll_at = max_file_size
        self.max_batch_wait = max_batch_wait
        self.max_batch_bytes = max_batch_bytes
        self._fd = -1
        self._direct_io = direct_io and preallocate and bool(O_DIRECT)
        self._direct = False  # the open file is written with O_DIRECT
        self._buf: DirectBuffer | None = None
        self._file_id = -1
        self._offset = 0
        self._cached_from = 0
        self._durable = JournalMark(0, 0)
        self._pending: list[tuple[int, bytes | memoryview]] = []
        self._waiters: list[_Waiter] = []
        self._pending_bytes = 0
        self._last_append = float("-inf")  # loop time of the last append
        self._writing = False
        self._scheduled = False
        self._failed: BaseException | None = None
        self.loop_sync_max = loop_sync_max
        self._thread_until = float("-inf")  # loop time until which commits go to the thread
        self._took = 0.0  # the last commit's write+fdatasync, seconds (set by whichever thread wrote it)
        self._loop_mean = 0.0  # running mean of the loop's commits' write+fdatasync, seconds
        # Commits off the loop go to one writer thread of the journal's own, through a SimpleQueue,
        # and come back by call_soon_threadsafe: an executor's future per commit, chained to an
        # asyncio future, cost a bookie's loop about a tenth of its CPU under a steady stream of adds.
        self._batches: queue.SimpleQueue[_Batch | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        # Fills the spare (the next file) with zeros while this one is written; None: no preallocation.
        self._spare_pool = (
            concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="journal-prealloc") if preallocate else None
        )
        self._spare: concurrent.futures.Future[Path] | None = None
        JOURNAL_METRICS.register()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: asyncio.Event | None = None
        # Counters, for tests and stats.
        self.fsyncs = 0
        self.writes = 0
        self.records = 0

    def open(self, after_file_id: int) -> None:
        """Start a fresh file numbered after every existing one (replay first)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        existing = journal_files(self.directory)
        fid = max(after_file_id, existing[-1][0] if existing else -1) + 1
        (self.directory / _SPARE).unlink(missing_ok=True)  # a fill a crash cut short
        self._open_file(fid)
        self._durable = JournalMark(fid, self._offset)

    def _open_file(self, fid: int) -> None:
        path = self.directory / _NAME.format(fid)
        spare = self._spare
        if spare is not None and spare.done() and spare.exception() is None:
            # Filled while the last file was written: header, first pad and zeros already synced.
            self._spare = None
            os.rename(spare.result(), path)
            fd = os.open(path, os.O_WRONLY)
            offset = os.lseek(fd, len(_head()), os.SEEK_SET)
        else:
            # No spare ready (the first file, or rolls faster than the fill): a growing file.
            if spare is not None and spare.done():
                log.warning("journal preallocation failed: %s", spare.exception())
                self._spare = None
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            head = _head() if self._spare_pool is not None else MAGIC
            os.write(fd, head)
            os.fdatasync(fd)
            offset = len(head)
        fsync_dir(self.directory)
        direct = False
        if self._direct_io:
            # A second descriptor, as fcntl cannot set O_DIRECT everywhere; refused (EINVAL) by
            # file systems without it, which keep the buffered one.
            try:
                dfd = os.open(path, os.O_WRONLY | O_DIRECT)
            except OSError as e:
                if e.errno != errno.EINVAL:
                    os.close(fd)
                    raise
            else:
                os.close(fd)
                fd, direct = dfd, True  # written with pwrite at self._offset
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._file_id, self._offset, self._direct = fd, fid, offset, direct
        self._cached_from = 0  # pages before this offset are out of the page cache
        # Bookies of one ensemble journal the same bytes: roll (and so checkpoint) out of step.
        self._roll_at = self.max_file_size - random.randrange(self.max_file_size // 4 + 1)

    @property
    def durable_mark(self) -> JournalMark:
        """Everything before this position is written and synced."""
        return self._durable

    @property
    def failed(self) -> BaseException | None:
        return self._failed

    def append(self, rtype: int, payload: bytes | memoryview) -> asyncio.Future[None]:
        """Queue a record; the future resolves once it is durable."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def done(exc: BaseException | None) -> None:
            if not fut.done():
                if exc is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(exc)

        self.append_cb(rtype, payload, done)
        return fut

    def append_cb(self, rtype: int, payload: bytes | memoryview, cb: Callable[[BaseException | None], object]) -> None:
        """Queue a record; cb(None) runs once it is durable, cb(error) if the write failed.
        (The hot path: no future per record.)"""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        if self._failed is not None:
            loop.call_soon(cb, OSError(f"journal failed: {self._failed}"))
            return
        self._pending.append((rtype, payload))
        self._waiters.append(cb)
        self._pending_bytes += len(payload) + REC_SIZE
        now = loop.time()
        # A record within the group wait of the one before waits for company (BookKeeper's
        # journalMaxGroupWaitMSec); one after a quiet spell, a lone add, goes at once.
        busy = now - self._last_append < self.max_batch_wait
        self._last_append = now
        if not self._writing and not self._scheduled:
            self._scheduled = True
            if busy and self._pending_bytes < self.max_batch_bytes:
                loop.call_later(self.max_batch_wait, self._kick)
            else:
                # call_soon still lets every add of this loop iteration join the batch.
                loop.call_soon(self._kick)

    def _kick(self) -> None:
        self._scheduled = False
        if self._writing or not self._pending:
            return
        batch, waiters = self._pending, self._waiters
        self._pending, self._waiters, self._pending_bytes = [], [], 0
        self._writing = True
        assert self._loop is not None
        if self.loop_sync_max > 0 and self._loop.time() >= self._thread_until:
            journal_commit(on_loop=True)
            mark, exc = self._try_write(batch)
            self._timed_on_loop(self._took)
            self._written(mark, exc, waiters)
            return
        journal_commit(on_loop=False)
        if self._writer is None:
            # The thread holds no reference to the journal: one dropped unclosed ends its thread.
            self._writer = threading.Thread(target=_write_loop, args=(weakref.ref(self), self._batches, self._loop),
                                            name="journal", daemon=True)
            weakref.finalize(self, self._batches.put, None)
            self._writer.start()
        self._batches.put((batch, waiters))

    def _try_write(self, batch: list[tuple[int, bytes | memoryview]]) -> tuple[JournalMark | None, BaseException | None]:
        """One group commit, on the loop or the writer thread: its mark, or why it failed (a failed
        write fails the journal, in _written, on the loop)."""
        try:
            return self._write_batch(batch), None
        except BaseException as e:
            return None, e

    def _write_batch(self, batch: list[tuple[int, bytes | memoryview]]) -> JournalMark:
        if self._offset >= self._roll_at:
            os.fdatasync(self._fd)
            self._open_file(self._file_id + 1)
        parts: list[bytes | memoryview] = []
        pack, crc = REC.pack, record_crc
        size = 0
        for rtype, payload in batch:
            parts.append(pack(len(payload), crc(rtype, payload), rtype))
            parts.append(payload)
            size += REC_SIZE + len(payload)
        if self._spare_pool is not None:
            parts.append(pad_record(self._offset + size))  # whole pages only: see the module doc
            if self._spare is None and self._offset >= self._roll_at // 2:
                # Halfway through this file: fill the next one (not earlier, so that a bookie
                # that never rolls, a short-lived one, never writes a spare at all).
                self._spare = self._spare_pool.submit(fill_spare, self.directory, self.max_file_size)
        t0 = time.monotonic()
        start = self._offset
        self._offset += self._write_direct(parts) if self._direct else write_all(self._fd, parts)
        synced = None
        if self.sync:
            t1 = time.monotonic()
            os.fdatasync(self._fd)  # O_DIRECT or not: the disk's own cache flushed
            synced = time.monotonic() - t1
            if not self._direct:
                self._drop_synced()
        else:
            start_writeback(self._fd, start, self._offset - start)
        took = self._took = time.monotonic() - t0
        journal_batch(len(batch), self._offset - start, synced)
        if took > _SLOW_SYNC:
            log.warning("journal write+fdatasync of %d records took %.3f s (slow or shared disk)", len(batch), took)
        return JournalMark(self._file_id, self._offset)

    def _write_direct(self, parts: list[bytes | memoryview]) -> int:
        """One group commit (whole pages) with O_DIRECT, through the journal's aligned buffer;
        returns the bytes written. Refused (EINVAL: an alignment this file system does not
        take), the file goes on buffered, from this commit."""
        size = sum(len(x) for x in parts)
        self._buf = direct_buffer(self._buf, size)
        mv = self._buf.fill(parts, size)
        try:
            pwrite_all(self._fd, mv, self._offset)
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            # str(e): a record kept by a handler must not keep the traceback, and so the buffer
            log.warning("journal: O_DIRECT writes refused (%s); writing through the page cache", str(e))
            self._reopen_buffered()
            return write_all(self._fd, parts)
        finally:
            mv.release()
        return size

    def _reopen_buffered(self) -> None:
        fd = os.open(self.directory / _NAME.format(self._file_id), os.O_WRONLY)
        os.lseek(fd, self._offset, os.SEEK_SET)
        os.close(self._fd)
        self._fd, self._direct, self._direct_io = fd, False, False
        self._cached_from = self._offset

    def _drop_synced(self) -> None:
        """Take the synced whole pages out of the page cache (as BookKeeper's
        journalRemovePagesFromCache): the journal is read only by replay after a restart, and
        pages freed as soon as they are clean are the ones the next appends reuse, instead of
        each batch taking fresh ones (the journal's writes fell from a third of the bookie's
        CPU to a sixth). A hint: durability is fdatasync's, done before."""
        upto = self._offset & ~(_PAGE - 1)
        if upto - self._cached_from >= _DROP_EVERY and FADVISE:
            os.posix_fadvise(self._fd, self._cached_from, upto - self._cached_from, os.POSIX_FADV_DONTNEED)
            self._cached_from = upto

    def _timed_on_loop(self, took: float) -> None:
        """A commit on the loop took `took` seconds: past loop_sync_max on average, the next
        ones go through the writer thread for a spell, and are timed afresh after it."""
        self._loop_mean += SLOW_MEAN_WEIGHT * (took - self._loop_mean)
        if self._loop_mean > self.loop_sync_max and self._loop is not None:
            log.info("journal group commits took %.1f ms on average: they go through the writer thread for %.0f s",
                     self._loop_mean * 1000, THREAD_SPELL_S)
            self._thread_until = self._loop.time() + THREAD_SPELL_S
            self._loop_mean = 0.0

    def _written(self, mark: JournalMark | None, exc: BaseException | None, waiters: list[_Waiter]) -> None:
        self._writing = False
        if exc is not None:
            log.error("journal write failed: %s", exc)
            self._failed = exc
            err = OSError(f"journal write failed: {exc}")
            waiters = waiters + self._waiters
            self._pending, self._waiters = [], []
            for cb in waiters:
                cb(err)
        else:
            assert mark is not None
            self._durable = mark
            self.fsyncs += 1
            self.writes += 1
            self.records += len(waiters)
            for cb in waiters:
                cb(None)
        if self._pending:
            # These waited through a whole fdatasync already: send them at once.
            self._kick()
        elif self._idle is not None:
            self._idle.set()

    def delete_before(self, mark: JournalMark) -> int:
        """Delete journal files wholly before `mark` (their records are in ledger storage).
        Blocking and thread-safe: the bookie runs it on a thread of its own."""
        n = 0
        for fid, path in journal_files(self.directory):
            if fid < mark.file_id and fid != self._file_id:
                shrink_and_unlink(path)
                n += 1
        return n

    async def drain(self) -> None:
        """Wait until nothing is queued or being written."""
        while self._writing or self._pending or self._scheduled:
            self._idle = asyncio.Event()
            if not self._writing and self._pending and not self._scheduled:
                self._kick()
            try:
                await within(self._idle.wait(), 0.05)
            except TimeoutError:
                pass

    async def close(self) -> None:
        await self.drain()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._writer is not None:
            self._batches.put(None)
            await asyncio.to_thread(self._writer.join)
            self._writer = None
        if self._buf is not None:
            self._buf.close()
            self._buf = None
        if self._spare_pool is not None:
            self._spare_pool.shutdown(wait=True)
