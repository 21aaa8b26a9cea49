"""Journal: group commit, replay, torn tails, rolling and deletion."""

from __future__ import annotations

import asyncio
import errno
import gc
import itertools
import os
import struct
import threading
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

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


async def test_a_failed_write_fails_its_waiters_and_every_later_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    j = jr.Journal(tmp_path)
    j.open(after_file_id=-1)
    await j.append(jr.REC_FENCE, struct.pack(">q", 1))

    def broken(fd: int) -> None:
        raise OSError(errno.EIO, "disk gone")

    monkeypatch.setattr(jr.os, "fdatasync", broken)
    futs = [j.append(jr.REC_FENCE, struct.pack(">q", i)) for i in range(3)]
    for r in await asyncio.gather(*futs, return_exceptions=True):
        assert isinstance(r, OSError) and "disk gone" in str(r)
    assert isinstance(j.failed, OSError)
    with pytest.raises(OSError, match="journal failed"):
        await j.append(jr.REC_FENCE, struct.pack(">q", 9))
    monkeypatch.undo()
    await j.close()
    assert _collect(tmp_path)[0] == (jr.REC_FENCE, struct.pack(">q", 1))


def _journal_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "journal"}


async def test_the_writer_thread_ends_with_its_journal_closed_or_dropped(tmp_path: Path) -> None:
    before = _journal_threads()
    closed = jr.Journal(tmp_path / "closed", loop_sync_max=0)  # 0: every commit on the thread
    closed.open(after_file_id=-1)
    await closed.append(jr.REC_FENCE, struct.pack(">q", 1))
    (writer,) = _journal_threads() - before
    await closed.close()
    assert not writer.is_alive()  # close() joins it

    dropped = jr.Journal(tmp_path / "dropped", loop_sync_max=0)
    dropped.open(after_file_id=-1)
    await dropped.append(jr.REC_FENCE, struct.pack(">q", 1))
    (writer,) = _journal_threads() - before
    del dropped
    gc.collect()
    writer.join(timeout=10)
    assert not writer.is_alive()


def _syncs_by_thread(monkeypatch: pytest.MonkeyPatch, slow: dict[int, float]) -> list[tuple[int, str]]:
    """Patches the journal's fdatasync to record (call number, thread name) and to take slow[n]
    seconds on call number n, no time on the others (the disk's own time left out: these tests
    time commits, and a slow disk under the suite would move them)."""
    calls: list[tuple[int, str]] = []
    stall = threading.Event()

    def sync(fd: int) -> None:
        n = len(calls)
        calls.append((n, threading.current_thread().name))
        if n in slow:
            stall.wait(slow[n])  # a slow disk (nothing sets the event)

    monkeypatch.setattr(jr.os, "fdatasync", sync)
    return calls


def _commits(on: str) -> float:
    value = REGISTRY.get_sample_value("quire_bookie_journal_commits_total", {"on": on})
    assert value is not None
    return value


async def test_quick_commits_run_on_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _journal_threads()
    j = jr.Journal(tmp_path)
    j.open(after_file_id=-1)
    calls = _syncs_by_thread(monkeypatch, slow={})
    loop_commits = _commits("loop")
    for i in range(5):
        await asyncio.gather(*(j.append(jr.REC_FENCE, struct.pack(">q", i * 10 + k)) for k in range(10)))
    main = threading.current_thread().name
    assert [name for _, name in calls] == [main] * 5  # one commit per round, each on the loop's thread
    assert _journal_threads() == before  # no writer thread started
    assert _commits("loop") == loop_commits + 5
    await j.close()
    assert len(_collect(tmp_path)) == 50


async def test_slow_commits_send_the_next_ones_to_the_writer_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    j = jr.Journal(tmp_path, loop_sync_max=0.02)
    j.open(after_file_id=-1)
    # 1: an outlier (its mean with the quick one before it stays under 20 ms); 2 and 3: a disk
    # that stays slow; 4 on the thread, slow there too.
    calls = _syncs_by_thread(monkeypatch, slow={1: 0.05, 2: 0.1, 3: 0.1, 4: 0.1})
    thread_commits = _commits("thread")
    main = threading.current_thread().name
    for i in range(4):
        await j.append(jr.REC_FENCE, struct.pack(">q", i))
    # One slow commit did not move them; the second of a slow spell did, after it.
    assert [name for _, name in calls] == [main] * 4
    spell_end = j._thread_until
    assert spell_end > asyncio.get_running_loop().time()
    # The next commit goes through the writer thread, and the loop serves while its disk is slow.
    fut = j.append(jr.REC_FENCE, struct.pack(">q", 4))
    ticks = 0
    while not fut.done():
        ticks += 1
        await asyncio.sleep(0)
    assert calls[4] == (4, "journal")
    assert ticks > 1  # the loop went round while the thread synced
    # Slow on the thread did not stretch the spell: there a commit's time is also the GIL's.
    assert j._thread_until == spell_end
    await j.append(jr.REC_FENCE, struct.pack(">q", 5))  # quick, still within the spell: the thread
    assert calls[5] == (5, "journal")
    # Once the spell is over (as if THREAD_SPELL_S had passed), commits come back to the loop.
    j._thread_until = float("-inf")
    await j.append(jr.REC_FENCE, struct.pack(">q", 6))
    assert calls[6] == (6, main)
    assert _commits("thread") == thread_commits + 2
    await j.close()
    assert [struct.unpack(">q", p)[0] for _, p in _collect(tmp_path)] == list(range(7))


async def test_torn_and_corrupt_tails_are_truncated(tmp_path: Path) -> None:
    j = jr.Journal(tmp_path, preallocate=False)  # records end the file (no page padding)
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
    j = jr.Journal(tmp_path, preallocate=False)
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


async def test_batch_wait_groups_appends_that_follow_each_other(tmp_path: Path) -> None:
    j = jr.Journal(tmp_path, max_batch_wait=1.0)
    j.open(after_file_id=-1)
    await j.append(jr.REC_ADD, b"first")  # after a quiet spell: written at once, alone
    assert j.fsyncs == 1
    futs = []
    for i in range(20):
        futs.append(j.append(jr.REC_ADD, bytes([i])))
        await asyncio.sleep(0)  # separate loop iterations
    await asyncio.gather(*futs)
    # Each within the wait of the one before: they shared one batch.
    assert j.fsyncs == 2 and j.records == 21
    await j.close()


async def test_batch_wait_never_holds_a_lone_append(tmp_path: Path) -> None:
    j = jr.Journal(tmp_path, max_batch_wait=3600)
    j.open(after_file_id=-1)
    await asyncio.wait_for(j.append(jr.REC_ADD, b"alone"), 30)  # never the hour's wait
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
    """Buffered writes (no O_DIRECT: direct_io=False, or a file system without it)."""
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

    j = jr.Journal(tmp_path, direct_io=False)
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


async def test_rolls_go_into_preallocated_files_written_a_page_at_a_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """After the first file, each roll renames a spare filled with zeros into place: appends
    overwrite it without changing its size (an fdatasync then needs no filesystem metadata),
    every group commit ends on a page boundary, and replay stops quietly at the zero tail."""
    size = 256 << 10
    j = jr.Journal(tmp_path, max_file_size=size)
    j.open(after_file_id=-1)
    payloads = [bytes([i % 251]) * (5000 + i) for i in range(300)]  # about 1.6 MB: several rolls
    sizes: dict[int, set[int]] = {}
    for p in payloads:
        await j.append(jr.REC_ADD, p)
        assert j.durable_mark.offset % 4096 == 0, "a group commit ends on a page boundary"
        if j._spare is not None:
            j._spare.result()  # let the fill finish, so the next roll takes it
        fid, path = jr.journal_files(tmp_path)[-1]
        sizes.setdefault(fid, set()).add(path.stat().st_size)
    await j.close()
    assert not (tmp_path / jr._SPARE).exists() or len(sizes) > 1
    # Every file after the first starts at its full size; only a last batch past the roll point
    # may extend it.
    preallocated = [fid for fid, seen in sizes.items() if min(seen) == size]
    assert len(preallocated) >= 3, sizes
    assert min(preallocated) == min(sizes) + 1
    with caplog.at_level("WARNING", logger="store.bookie.journal"):
        assert [p for _, p in _collect(tmp_path)] == payloads
    assert not caplog.records, "the zero tail of a preallocated file is its end, not damage"


async def test_a_torn_batch_in_a_preallocated_file_ends_replay_there(tmp_path: Path) -> None:
    size = 64 << 10
    j = jr.Journal(tmp_path, max_file_size=size)
    j.open(after_file_id=-1)
    n = 0
    while len(jr.journal_files(tmp_path)) < 2 or jr.journal_files(tmp_path)[-1][1].stat().st_size != size:
        await j.append(jr.REC_ADD, bytes([n % 251]) * 3000)
        n += 1
        if j._spare is not None:
            j._spare.result()
    await j.append(jr.REC_ADD, b"kept" * 1000)
    before = j.durable_mark.offset
    await j.append(jr.REC_ADD, b"lost" * 1000)  # its pages never reached the disk:
    await j.close()
    _fid, path = jr.journal_files(tmp_path)[-1]
    data = bytearray(path.read_bytes())
    data[before : before + 4096] = bytes(4096)  # the batch's first page is still zeros, as preallocated
    path.write_bytes(bytes(data))
    recs = [p for _, p in _collect(tmp_path)]
    assert recs[-1] == b"kept" * 1000 and len(recs) == n + 1


async def test_a_spare_left_by_a_crash_is_removed_on_open(tmp_path: Path) -> None:
    (tmp_path / jr._SPARE).write_bytes(b"half filled")
    j = jr.Journal(tmp_path)
    j.open(after_file_id=-1)
    assert not (tmp_path / jr._SPARE).exists()
    await j.append(jr.REC_FENCE, struct.pack(">q", 1))
    await j.close()
    assert [fid for fid, _ in jr.journal_files(tmp_path)] == [0]
    assert _collect(tmp_path) == [(jr.REC_FENCE, struct.pack(">q", 1))]


@pytest.mark.parametrize("direct", [True, False], ids=["o_direct", "refused"])
def test_a_spare_is_the_head_then_zeros_with_or_without_o_direct(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, direct: bool
) -> None:
    flags: list[int] = []
    real_open = os.open

    def watching_open(path: object, flag: int, *a: object) -> int:
        flags.append(flag)
        if not direct and flag & getattr(os, "O_DIRECT", 0):
            raise OSError(22, "Invalid argument")  # as on a file system without O_DIRECT
        return real_open(path, flag, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(jr.os, "open", watching_open)
    size = 3 << 20
    path = jr.fill_spare(tmp_path, size)
    data = path.read_bytes()
    head = jr._head()
    assert len(data) == size and data[: len(head)] == head and not any(data[len(head) :])
    used_direct = [bool(f & getattr(os, "O_DIRECT", 0)) for f in flags]
    if direct and hasattr(os, "O_DIRECT"):
        assert used_direct == [True]  # the buffered way was not needed
    else:
        assert used_direct[-1] is False  # written the buffered way


async def test_rolled_files_replay_after_o_direct_spares(tmp_path: Path) -> None:
    j = jr.Journal(tmp_path, max_file_size=1 << 20)
    j.open(after_file_id=-1)
    payloads = [bytes([i % 251]) * 20_000 for i in range(200)]  # about four files
    for p in payloads:
        await j.append(jr.REC_FENCE, p)  # replay hands back any record type's payload as written
    await j.close()
    assert len(jr.journal_files(tmp_path)) >= 3
    assert [p for _, p in _collect(tmp_path)] == payloads


def _takes_o_direct(directory: Path) -> bool:
    try:
        fd = os.open(directory / "probe", os.O_WRONLY | os.O_CREAT | getattr(os, "O_DIRECT", 0), 0o644)
    except OSError:
        return False
    os.close(fd)
    (directory / "probe").unlink()
    return hasattr(os, "O_DIRECT")


async def test_group_commits_go_out_with_o_direct_from_one_reused_buffer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whole aligned pages with O_DIRECT, through one buffer written over commit after commit
    (no page-cache pages to allocate, copy into and drop), across rolls; replay reads them back."""
    if not _takes_o_direct(tmp_path):
        pytest.skip("this file system refuses O_DIRECT")
    import fcntl

    advised: list[int] = []
    monkeypatch.setattr(jr.os, "posix_fadvise", lambda fd, *a: advised.append(fd))
    j = jr.Journal(tmp_path, max_file_size=1 << 20)
    j.open(after_file_id=-1)
    payloads = [bytes([i % 251]) * (3000 + 37 * i) for i in range(400)]  # about 2 MB: rolls
    buffers = set()
    for i in range(0, len(payloads), 5):
        await asyncio.gather(*(j.append(jr.REC_ADD, p) for p in payloads[i : i + 5]))
        assert fcntl.fcntl(j._fd, fcntl.F_GETFL) & os.O_DIRECT, "the journal file is written with O_DIRECT"
        assert j.durable_mark.offset % 4096 == 0
        buffers.add(id(j._buf))
        if j._spare is not None:
            j._spare.result()
    await j.close()
    assert len(jr.journal_files(tmp_path)) >= 2
    assert len(buffers) == 1, "one buffer for every commit"
    assert advised == [], "nothing in the page cache to drop"
    assert [p for _, p in _collect(tmp_path)] == payloads


async def test_a_commit_larger_than_the_buffer_gets_a_larger_one(tmp_path: Path) -> None:
    if not _takes_o_direct(tmp_path):
        pytest.skip("this file system refuses O_DIRECT")
    j = jr.Journal(tmp_path)
    j.open(after_file_id=-1)
    payloads = [b"a" * 1000, b"b" * (3 << 20), b"c" * 1000]
    for p in payloads:
        await j.append(jr.REC_ADD, p)
    assert j._buf is not None and j._buf.size == 4 << 20
    await j.close()
    assert j._buf is None
    assert [p for _, p in _collect(tmp_path)] == payloads


@pytest.mark.parametrize("where", ["open", "write"])
async def test_o_direct_refused_the_journal_writes_through_the_page_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    """A file system without O_DIRECT (EINVAL when opening), or one that wants another alignment
    (EINVAL on the write): the journal goes on buffered, and loses nothing."""
    direct = getattr(os, "O_DIRECT", 0)
    real_open, real_pwrite = os.open, os.pwrite
    direct_fds: set[int] = set()

    def opening(path: object, flag: int, *a: object) -> int:
        if flag & direct and where == "open":
            raise OSError(errno.EINVAL, "Invalid argument")
        fd = real_open(path, flag, *a)  # type: ignore[arg-type]
        (direct_fds.add if flag & direct else direct_fds.discard)(fd)
        return fd

    def writing(fd: int, data: bytes | memoryview, offset: int) -> int:
        if fd in direct_fds:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(jr.os, "open", opening)
    monkeypatch.setattr(jr.os, "pwrite", writing)
    j = jr.Journal(tmp_path, max_file_size=256 << 10)
    j.open(after_file_id=-1)
    payloads = [bytes([i % 251]) * 7000 for i in range(100)]  # rolls
    with caplog.at_level("WARNING", logger="store.bookie.journal"):
        for p in payloads:
            await j.append(jr.REC_ADD, p)
            if j._spare is not None:
                j._spare.result()
    await j.close()
    assert not j._direct and len(jr.journal_files(tmp_path)) >= 2
    refused = [r for r in caplog.records if "O_DIRECT writes refused" in r.getMessage()]
    assert len(refused) == (1 if where == "write" and direct else 0)
    assert [p for _, p in _collect(tmp_path)] == payloads
