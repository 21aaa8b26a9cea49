"""Entry logs: append-only files holding the entries of all ledgers, interleaved.

File = [magic:8] then records [len:u32][packed entry]. The flush writes each ledger's entries
contiguously (sorted by ledger, entry), so a range read is usually one pread. A location is
(log_id, offset of the entry bytes, length). Files roll at a size; compaction copies the live
entries of mostly-dead files into the current one and deletes the old file.

Threading: append/sync run on the single maintenance thread; fd bookkeeping for reads runs on
the event loop, and reads run in worker threads with fds the loop handed them.

Direct I/O (BookKeeper's direct-I/O entry logger): where the file system takes O_DIRECT, the
writer copies each write into one reused, page-aligned buffer, after the last partial page
written so far (kept, and written again with what follows it), and writes whole pages. A
buffered write copied every byte into page-cache pages allocated for it; on a virtual machine
whose host takes freed guest memory back, each such page costs a fault in the host too, and
that copy was three quarters of the flush thread's CPU. The cost: reads of flushed entries
come from the disk the first time (the bookie's write and read caches hold the recent ones).
The file ends in zeros up to the page boundary until it rolls or closes, when it is cut to
its records' end.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
from collections.abc import Sequence
from pathlib import Path

from store.bookie.journal import (
    FADVISE,
    IOV_MAX,
    O_DIRECT,
    DirectBuffer,
    direct_buffer,
    fsync_dir,
    pwrite_all,
    start_writeback,
)

MAGIC = b"QENTLOG1"
LEN = struct.Struct(">I")
_NAME = "{:010d}.log"
_CHUNK = 1 << 20  # write, and start writeback, this much at a time
_PAGE = 4096  # O_DIRECT writes: whole pages at page offsets

log = logging.getLogger(__name__)

Location = tuple[int, int, int]  # (log_id, offset, length)
FileSpan = tuple[int, int, int]  # (fd, offset, length): bytes of an open log, to read or sendfile


class EntryLogs:
    def __init__(self, directory: str | os.PathLike[str], *, max_log_size: int = 256 << 20,
                 direct_io: bool = True) -> None:
        """direct_io: write with O_DIRECT where the file system takes it (see the module doc)."""
        self.directory = Path(directory)
        self.max_log_size = max_log_size
        self.sizes: dict[int, int] = {}  # log id -> bytes after the header
        self.current = -1
        self._wfd = -1
        self._woff = 0
        self._direct_io = direct_io and bool(O_DIRECT)
        self._direct = False  # the current log is written with O_DIRECT
        self._tail = b""  # O_DIRECT: the bytes of the last partial page written so far
        self._buf: DirectBuffer | None = None
        self._rfds: dict[tuple[int, bool], int] = {}  # (log id, for scans) -> read fd
        self._inflight: dict[int, int] = {}
        self._doomed: set[int] = set()  # deleted logs whose read fd closes after in-flight reads

    def open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for p in self.directory.glob("*.log"):
            try:
                lid = int(p.stem)
            except ValueError:
                continue
            self.sizes[lid] = max(0, p.stat().st_size - len(MAGIC))
        self._roll((max(self.sizes) if self.sizes else -1) + 1)

    def path(self, log_id: int) -> Path:
        return self.directory / _NAME.format(log_id)

    # -- writer side (maintenance thread) --

    def _roll(self, log_id: int) -> None:
        self._close_current()
        path = self.path(log_id)
        fd, direct = -1, False
        if self._direct_io:
            try:
                fd, direct = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | O_DIRECT, 0o644), True
            except OSError as e:
                if e.errno != errno.EINVAL:  # EINVAL: a file system without O_DIRECT (tmpfs)
                    raise
                self._direct_io = False
        if not direct:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, MAGIC)
        fsync_dir(self.directory)
        # O_DIRECT: the magic goes out with the first records, in their first page
        self._wfd, self._woff, self.current, self._direct, self._tail = fd, len(MAGIC), log_id, direct, MAGIC
        self.sizes[log_id] = 0

    def _close_current(self) -> None:
        """Sync and close the log being written; an O_DIRECT one cut to its records' end."""
        if self._wfd < 0:
            return
        if self._direct and self._woff == len(MAGIC):
            self._write([], 0)  # nothing appended: the magic alone (buffered, if O_DIRECT is refused)
        if self._direct:
            os.ftruncate(self._wfd, self._woff)
        os.fdatasync(self._wfd)
        os.close(self._wfd)
        self._wfd = -1

    def append_many(self, entries: Sequence[bytes | memoryview]) -> list[Location]:
        """Append entries (gathered writes, no joining copy); returns their locations in order."""
        locs: list[Location] = []
        parts: list[bytes | memoryview] = []
        pending = 0
        limit = self.max_log_size + len(MAGIC)
        for e in entries:
            n = len(e)
            if self._woff + pending + 4 + n > limit and self._woff + pending > len(MAGIC):
                self._write(parts, pending)
                parts, pending = [], 0
                self._roll(self.current + 1)
            locs.append((self.current, self._woff + pending + 4, n))
            parts.append(LEN.pack(n))
            parts.append(e)
            pending += 4 + n
            if pending >= _CHUNK or len(parts) >= IOV_MAX:
                self._write(parts, pending)
                parts, pending = [], 0
        if parts:
            self._write(parts, pending)
        return locs

    def _write(self, parts: list[bytes | memoryview], total: int) -> None:
        if self._direct:
            try:
                self._write_direct(parts, total)
                return
            except OSError as e:
                if e.errno != errno.EINVAL:
                    raise
                # str(e): a kept log record must not keep the traceback, and so the buffer
                log.warning("entry log: O_DIRECT writes refused (%s); writing through the page cache", str(e))
                self._reopen_buffered()
        off = self._woff
        n = os.pwritev(self._wfd, parts, off)
        if n < total:  # short write: finish the rest the slow way
            rest = memoryview(b"".join(parts))[n:]
            while rest:
                k = os.pwrite(self._wfd, rest, off + n)
                rest = rest[k:]
                n += k
        start_writeback(self._wfd, off, total)
        off += total
        self.sizes[self.current] = off - len(MAGIC)
        self._woff = off

    def _write_direct(self, parts: list[bytes | memoryview], total: int) -> None:
        """_write with O_DIRECT: the last partial page written so far, then the parts, padded
        with zeros to whole pages, written at that page's offset."""
        start = self._woff - len(self._tail)  # a page boundary
        end = self._woff + total
        size = -(-(end - start) // _PAGE) * _PAGE
        self._buf = direct_buffer(self._buf, size, _CHUNK + 2 * _PAGE)
        mv = self._buf.fill([self._tail, *parts], size)
        try:
            pwrite_all(self._wfd, mv, start)
            keep = (end - start) & ~(_PAGE - 1)
            self._tail = bytes(mv[keep : end - start])
        finally:
            mv.release()
        self.sizes[self.current] = end - len(MAGIC)
        self._woff = end

    def _reopen_buffered(self) -> None:
        """O_DIRECT refused on write: the current log from here on through the page cache."""
        fd = os.open(self.path(self.current), os.O_WRONLY)
        os.close(self._wfd)
        self._wfd, self._direct, self._direct_io = fd, False, False
        # The bytes of the partial page, never written yet (the magic, in a new log).
        if self._tail:
            os.pwrite(fd, self._tail, self._woff - len(self._tail))
        self._tail = b""

    def sync(self) -> None:
        if self._wfd >= 0:
            os.fdatasync(self._wfd)

    def close(self) -> None:
        self._close_current()
        if self._buf is not None:
            self._buf.close()
            self._buf = None
        for fd in self._rfds.values():
            os.close(fd)
        self._rfds.clear()

    # -- reader side (fds managed on the loop) --

    def acquire(self, log_id: int, scan: bool = False) -> int:
        """A read fd of the log, held until release. scan: a second fd of the log with the
        kernel's read-ahead off (POSIX_FADV_RANDOM, which holds for that open file only), for
        background sends that read ahead themselves, a bounded amount (background_reads.py)."""
        fd = self._rfds.get((log_id, scan))
        if fd is None:
            fd = os.open(self.path(log_id), os.O_RDONLY)
            if scan and FADVISE:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            self._rfds[log_id, scan] = fd
        self._inflight[log_id] = self._inflight.get(log_id, 0) + 1
        return fd

    def _close_fds(self, log_id: int) -> None:
        for scan in (False, True):
            fd = self._rfds.pop((log_id, scan), None)
            if fd is not None:
                os.close(fd)

    def release(self, log_id: int) -> None:
        left = self._inflight[log_id] - 1
        if left:
            self._inflight[log_id] = left
            return
        del self._inflight[log_id]
        if log_id in self._doomed:
            self._doomed.discard(log_id)
            self._close_fds(log_id)

    def delete(self, log_id: int) -> None:
        """Unlink a log; a read fd stays open until reads in flight on it finish."""
        assert log_id != self.current
        self.path(log_id).unlink(missing_ok=True)
        self.sizes.pop(log_id, None)
        if self._inflight.get(log_id):
            self._doomed.add(log_id)
        else:
            self._close_fds(log_id)


def read_run(fd: int, offset: int, length: int) -> bytes:
    data = os.pread(fd, length, offset)
    if len(data) != length:
        raise OSError(f"short read: {len(data)} of {length} bytes at offset {offset}")
    return data
