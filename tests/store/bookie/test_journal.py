"""Journal: group commit, replay, torn tails, rolling and deletion."""

from __future__ import annotations

import asyncio
import itertools
import os
import struct
from pathlib import Path

import pytest

from store.bookie import journal as jr
from store.bookie.entry import pack_entry

_START = jr.JournalMark(0, 0)


def _collect(directory: Path, mark: jr.JournalMark = _START) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    jr.replay(directory, mark, lambda t, p: out.append((t, bytes(p))))
    return out


async def test_group_commit_far_fewer_fdatasyncs_than_adds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = os.fdatasync

    def counting(fd: int) -> None:
        nonlocal calls
        calls += 1
        real(fd)

    j = jr.Journal(tmp_path)
    j.open(after_file_id=-1)
    monkeypatch.setattr(jr.os, "fdatasync", counting)
    n = 2000
    futs = [j.append(jr.REC_ADD, struct.pack(">q", i) * 16) for i in range(n)]
    await asyncio.gather(*futs)
    assert j.records == n
    assert calls == j.fsyncs
    assert 1 <= calls <= n // 20, f"{calls} fdatasyncs for {n} adds"
    # Adds arriving while a sync is in flight join the next batch, not one sync each.
    for _ in range(5):
        more = [j.append(jr.REC_ADD, b"y" * 100) for _ in range(300)]
        await asyncio.sleep(0)
        more += [j.append(jr.REC_ADD, b"z" * 100) for _ in range(300)]
        await asyncio.gather(*more)
    assert j.fsyncs <= calls + 5 * 3
    await j.close()
    records = _collect(tmp_path)
    assert len(records) == n + 5 * 600
    assert records[0] == (jr.REC_ADD, struct.pack(">q", 0) * 16)
    assert records[n - 1] == (jr.REC_ADD, struct.pack(">q", n - 1) * 16)


async def test_every_future_resolves_only_after_its_batch_is_synced(tmp_path: Path) -> None:
    j = jr.Journal(tmp_path)
    j.open(after_file_id=-1)
    fut = j.append(jr.REC_FENCE, struct.pack(">q", 7))
    assert not fut.done()
    await fut
    assert j.durable_mark.offset > len(jr.MAGIC)
    await j.close()
    assert _collect(tmp_path) == [(jr.REC_FENCE, struct.pack(">q", 7))]


async def test_torn_and_corrupt_tails_are_truncated(tmp_path: Path) -> None:
    j = jr.Journal(tmp_path)
    j.open(after_file_id=-1)
    for i in range(10):
        await j.append(jr.REC_ADD, bytes([i]) * 50)
    await j.close()
    (fid, path), = jr.journal_files(tmp_path)
    size = path.stat().st_size
    # Torn: the last record lost its last 7 bytes.
    os.truncate(path, size - 7)
    recs = _collect(tmp_path)
    assert [p for _, p in recs] == [bytes([i]) * 50 for i in range(9)]
    assert path.stat().st_size == size - (jr.REC_SIZE + 50)  # torn bytes truncated away
    # Corrupt: flip a payload byte of what is now the last record.
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    recs = _collect(tmp_path)
    assert [p for _, p in recs] == [bytes([i]) * 50 for i in range(8)]
    # A fresh journal continues after the repaired file and replay sees both.
    j2 = jr.Journal(tmp_path)
    j2.open(after_file_id=fid)
    await j2.append(jr.REC_DELETE, struct.pack(">q", 1))
    await j2.close()
    recs = _collect(tmp_path)
    assert len(recs) == 9 and recs[-1] == (jr.REC_DELETE, struct.pack(">q", 1))


async def test_entry_records_are_checked_by_the_entry_digest(tmp_path: Path) -> None:
    """REC_ENTRY's record CRC covers only the entry header: a flipped payload byte is still
    caught on replay, by the entry's own digest, and the record truncated away."""
    j = jr.Journal(tmp_path)
    j.open(after_file_id=-1)
    entries = [pack_entry(7, i, i - 1, bytes([i]) * 300) for i in range(3)]
    for e in entries:
        await j.append(jr.REC_ENTRY, e)
    await j.close()
    assert [p for _, p in _collect(tmp_path)] == entries
    (_, path), = jr.journal_files(tmp_path)
    data = bytearray(path.read_bytes())
    data[-100] ^= 0x01  # inside the last entry's payload, past its header
    path.write_bytes(bytes(data))
    assert [p for _, p in _collect(tmp_path)] == entries[:2]
    assert path.stat().st_size == len(data) - (jr.REC_SIZE + len(entries[2]))


async def test_replay_starts_at_mark_and_rolled_files_are_deleted(tmp_path: Path) -> None:
    j = jr.Journal(tmp_path, max_file_size=1000)
    j.open(after_file_id=-1)
    marks = []
    for i in range(40):
        await j.append(jr.REC_ADD, bytes([i]) * 100)
        marks.append(j.durable_mark)
    assert len(jr.journal_files(tmp_path)) >= 4
    mark = marks[29]  # everything up to record 29 is "in storage"
    recs = _collect(tmp_path, mark)
    assert [p[0] for _, p in recs] == list(range(30, 40))
    deleted = j.delete_before(mark)
    assert deleted >= 2
    assert all(fid >= mark.file_id for fid, _ in jr.journal_files(tmp_path))
    assert [p[0] for _, p in _collect(tmp_path, mark)] == list(range(30, 40))
    await j.close()


async def test_batch_wait_groups_sequential_appends(tmp_path: Path) -> None:
    j = jr.Journal(tmp_path, max_batch_wait=0.05)
    j.open(after_file_id=-1)
    futs = []
    for i in range(20):
        futs.append(j.append(jr.REC_ADD, bytes([i])))
        await asyncio.sleep(0)  # separate loop iterations, still one batch
    await asyncio.gather(*futs)
    assert j.fsyncs == 1
    await j.close()


async def test_no_fsync_journal_acks_without_fdatasync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = os.fdatasync

    def counting(fd: int) -> None:
        nonlocal calls
        calls += 1
        real(fd)

    j = jr.Journal(tmp_path, sync=False)
    j.open(after_file_id=-1)
    monkeypatch.setattr(jr.os, "fdatasync", counting)
    await asyncio.gather(*(j.append(jr.REC_ADD, b"x" * 100) for _ in range(500)))
    assert calls == 0 and j.records == 500
    await j.close()
    assert len(_collect(tmp_path)) == 500  # written all the same


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise")
async def test_synced_pages_leave_the_page_cache_only_after_their_fdatasync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = 0  # file size at the last fdatasync
    dropped: list[tuple[int, int]] = []
    real_sync, real_advise = os.fdatasync, os.posix_fadvise

    def sync(fd: int) -> None:
        nonlocal synced
        real_sync(fd)
        synced = os.fstat(fd).st_size

    def advise(fd: int, offset: int, length: int, advice: int) -> None:
        assert advice == os.POSIX_FADV_DONTNEED
        assert offset % 4096 == 0 and (offset + length) % 4096 == 0, "whole pages only"
        assert offset + length <= synced, "pages dropped before their fdatasync"
        dropped.append((offset, offset + length))
        real_advise(fd, offset, length, advice)

    j = jr.Journal(tmp_path)
    j.open(after_file_id=-1)
    monkeypatch.setattr(jr.os, "fdatasync", sync)
    monkeypatch.setattr(jr.os, "posix_fadvise", advise)
    payloads = [bytes([i % 251]) * 50_000 for i in range(80)]  # 4 MB
    for i in range(0, len(payloads), 4):
        await asyncio.gather(*(j.append(jr.REC_ADD, p) for p in payloads[i : i + 4]))
    await j.close()
    assert dropped and dropped[0][0] == 0
    assert all(a[1] == b[0] for a, b in itertools.pairwise(dropped)), "contiguous, each page once"
    assert dropped[-1][1] >= 3 << 20
    assert [p for _, p in _collect(tmp_path)] == payloads  # replay reads them from the file
