"""Per-ledger index files and the bookie's durable ledger states.

Index file `<ledger>.idx`: a fixed-width array, record i = location of entry i as
[log_id:u32][offset:u64][length:u32] (length 0: absent). Entry ids are dense, so no search.
An in-memory mirror (bytearray) of each file answers lookups.

`ledgers.state`: every ledger this bookie holds with its fenced flag, LAC and last entry id,
rewritten atomically (tmp + fsync + rename) at each checkpoint, followed by the journal mark.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c

from store.bookie.entry_log import Location
from store.bookie.journal import JournalMark, fsync_dir

LOC = struct.Struct(">IQI")
LOC_SIZE = LOC.size  # 16
_STATE_MAGIC = b"QLSTATE1"
_STATE_HEAD = struct.Struct(">qqI")  # mark file id, mark offset, ledger count
_STATE_REC = struct.Struct(">qBqq")  # ledger, flags, lac, last entry
FLAG_FENCED = 1
# A deleted ledger stays as a tombstone so that a paused writer coming back cannot re-create it.
FLAG_DELETED = 2


class LedgerIndex:
    """In-memory mirror of one ledger's index file."""

    __slots__ = ("locs",)

    def __init__(self, data: bytes | bytearray = b"") -> None:
        self.locs = bytearray(data)

    def get(self, entry_id: int) -> Location | None:
        pos = entry_id * LOC_SIZE
        if entry_id < 0 or pos + LOC_SIZE > len(self.locs):
            return None
        log_id, off, n = LOC.unpack_from(self.locs, pos)
        return (log_id, off, n) if n else None

    def set(self, entry_id: int, loc: Location) -> None:
        pos = entry_id * LOC_SIZE
        if pos + LOC_SIZE > len(self.locs):
            self.locs.extend(bytes(pos + LOC_SIZE - len(self.locs)))
        LOC.pack_into(self.locs, pos, *loc)

    def put_run(self, first_entry: int, records: bytes) -> bytes:
        """Store consecutive records from first_entry on; returns the bytes they replaced.
        (The maintenance thread calls this while the loop reads: each step is atomic.)"""
        pos = first_entry * LOC_SIZE
        end = pos + len(records)
        have = len(self.locs)
        old = bytes(self.locs[pos:end]) if pos < have else b""
        if end > have:
            self.locs.extend(bytes(end - have))
        self.locs[pos:end] = records
        return old

    def last_entry(self) -> int:
        i = len(self.locs) // LOC_SIZE - 1
        while i >= 0 and not LOC.unpack_from(self.locs, i * LOC_SIZE)[2]:
            i -= 1
        return i

    def items(self) -> list[tuple[int, Location]]:
        return [(i, (a, b, n)) for i, (a, b, n) in enumerate(LOC.iter_unpack(self.locs)) if n]


def index_path(directory: Path, ledger_id: int) -> Path:
    return directory / f"{ledger_id}.idx"


def load_indexes(directory: Path) -> dict[int, LedgerIndex]:
    out = {}
    for p in directory.glob("*.idx"):
        try:
            lid = int(p.stem)
        except ValueError:
            continue
        data = p.read_bytes()
        out[lid] = LedgerIndex(data[: len(data) - len(data) % LOC_SIZE])
    return out


def write_index(directory: Path, ledger_id: int, updates: list[tuple[int, Location]]) -> None:
    """pwrite the records (contiguous runs in one call each) and fdatasync. Thread-side."""
    updates.sort()
    fd = os.open(index_path(directory, ledger_id), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        i = 0
        while i < len(updates):
            j = i + 1
            while j < len(updates) and updates[j][0] == updates[j - 1][0] + 1:
                j += 1
            buf = b"".join(LOC.pack(*loc) for _, loc in updates[i:j])
            os.pwrite(fd, buf, updates[i][0] * LOC_SIZE)
            i = j
        os.fdatasync(fd)
    finally:
        os.close(fd)


def write_states(directory: Path, mark: JournalMark, states: dict[int, tuple[int, int, int]]) -> None:
    """Atomically replace ledgers.state with these ledger states and journal mark."""
    parts = [_STATE_MAGIC, _STATE_HEAD.pack(mark.file_id, mark.offset, len(states))]
    parts.extend(_STATE_REC.pack(lid, flags, lac, last) for lid, (flags, lac, last) in states.items())
    body = b"".join(parts)
    body += struct.pack(">I", crc32c.crc32c(body))
    tmp = directory / "ledgers.state.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, body)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, directory / "ledgers.state")
    fsync_dir(directory)


def read_states(directory: Path) -> tuple[JournalMark, dict[int, tuple[int, int, int]]]:
    path = directory / "ledgers.state"
    if not path.exists():
        return JournalMark(0, 0), {}
    data = path.read_bytes()
    if len(data) < len(_STATE_MAGIC) + _STATE_HEAD.size + 4 or not data.startswith(_STATE_MAGIC):
        raise OSError(f"{path} is not a ledger state file")
    (crc,) = struct.unpack_from(">I", data, len(data) - 4)
    if crc32c.crc32c(data[:-4]) != crc:
        raise OSError(f"{path} is corrupt (checksum mismatch)")
    fid, off, count = _STATE_HEAD.unpack_from(data, len(_STATE_MAGIC))
    pos = len(_STATE_MAGIC) + _STATE_HEAD.size
    states = {}
    for _ in range(count):
        lid, flags, lac, last = _STATE_REC.unpack_from(data, pos)
        states[lid] = (flags, lac, last)
        pos += _STATE_REC.size
    return JournalMark(fid, off), states
