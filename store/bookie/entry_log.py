"""Entry logs: append-only files holding the entries of all ledgers, interleaved.

File = [magic:8] then records [len:u32][packed entry]. The flush writes each ledger's entries
contiguously (sorted by ledger, entry), so a range read is usually one pread. A location is
(log_id, offset of the entry bytes, length). Files roll at a size; compaction copies the live
entries of mostly-dead files into the current one and deletes the old file.

Threading: append/sync run on the single maintenance thread; fd bookkeeping for reads runs on
the event loop, and reads run in worker threads with fds the loop handed them.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from pathlib import Path

from store.bookie.journal import IOV_MAX, fsync_dir, start_writeback

MAGIC = b"QENTLOG1"
LEN = struct.Struct(">I")
_NAME = "{:010d}.log"
_CHUNK = 1 << 20  # write, and start writeback, this much at a time

Location = tuple[int, int, int]  # (log_id, offset, length)
FileSpan = tuple[int, int, int]  # (fd, offset, length): bytes of an open log, to read or sendfile


class EntryLogs:
    def __init__(self, directory: str | os.PathLike[str], *, max_log_size: int = 256 << 20) -> None:
        self.directory = Path(directory)
        self.max_log_size = max_log_size
        self.sizes: dict[int, int] = {}  # log id -> bytes after the header
        self.current = -1
        self._wfd = -1
        self._woff = 0
        self._rfds: dict[int, int] = {}
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
        if self._wfd >= 0:
            os.fdatasync(self._wfd)
            os.close(self._wfd)
        fd = os.open(self.path(log_id), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, MAGIC)
        fsync_dir(self.directory)
        self._wfd, self._woff, self.current = fd, len(MAGIC), log_id
        self.sizes[log_id] = 0

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

    def sync(self) -> None:
        if self._wfd >= 0:
            os.fdatasync(self._wfd)

    def close(self) -> None:
        if self._wfd >= 0:
            os.fdatasync(self._wfd)
            os.close(self._wfd)
            self._wfd = -1
        for fd in self._rfds.values():
            os.close(fd)
        self._rfds.clear()

    # -- reader side (fds managed on the loop) --

    def acquire(self, log_id: int) -> int:
        fd = self._rfds.get(log_id)
        if fd is None:
            fd = self._rfds[log_id] = os.open(self.path(log_id), os.O_RDONLY)
        self._inflight[log_id] = self._inflight.get(log_id, 0) + 1
        return fd

    def release(self, log_id: int) -> None:
        left = self._inflight[log_id] - 1
        if left:
            self._inflight[log_id] = left
            return
        del self._inflight[log_id]
        if log_id in self._doomed:
            self._doomed.discard(log_id)
            fd = self._rfds.pop(log_id, None)
            if fd is not None:
                os.close(fd)

    def delete(self, log_id: int) -> None:
        """Unlink a log; a read fd stays open until reads in flight on it finish."""
        assert log_id != self.current
        self.path(log_id).unlink(missing_ok=True)
        self.sizes.pop(log_id, None)
        if self._inflight.get(log_id):
            self._doomed.add(log_id)
        else:
            fd = self._rfds.pop(log_id, None)
            if fd is not None:
                os.close(fd)


def read_run(fd: int, offset: int, length: int) -> bytes:
    data = os.pread(fd, length, offset)
    if len(data) != length:
        raise OSError(f"short read: {len(data)} of {length} bytes at offset {offset}")
    return data
