"""Entry logs: appends at the locations they return, with O_DIRECT or through the page cache."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import pytest

from store.bookie import entry_log as el


def _takes_o_direct(directory: Path) -> bool:
    if not hasattr(os, "O_DIRECT"):
        return False
    try:
        fd = os.open(directory / "probe", os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    except OSError:
        return False
    os.close(fd)
    (directory / "probe").unlink()
    return True


def _entries(n: int, salt: int = 0) -> list[bytes]:
    # odd sizes: records straddle pages, and most writes end inside one
    return [bytes([(i + salt) % 251]) * (97 + 1013 * (i % 7)) for i in range(n)]


def _read(logs: el.EntryLogs, loc: el.Location) -> bytes:
    log_id, offset, length = loc
    fd = logs.acquire(log_id)
    try:
        return el.read_run(fd, offset, length)
    finally:
        logs.release(log_id)


def test_o_direct_appends_read_back_at_their_locations_across_rolls(tmp_path: Path) -> None:
    """Whole pages with O_DIRECT from one reused buffer; the last partial page is written again
    with what follows it, so entries read back while the log grows, and a closed log ends at
    its last record."""
    if not _takes_o_direct(tmp_path):
        pytest.skip("this file system refuses O_DIRECT")
    logs = el.EntryLogs(tmp_path, max_log_size=200 << 10)
    logs.open()
    written: list[tuple[el.Location, bytes]] = []
    buffers = set()
    for salt in range(40):
        batch = _entries(9, salt)
        locs = logs.append_many(batch)
        assert fcntl.fcntl(logs._wfd, fcntl.F_GETFL) & os.O_DIRECT
        buffers.add(id(logs._buf))
        logs.sync()
        written += zip(locs, batch)
        for loc, data in written[-30:]:  # earlier pages, and the one just written over
            assert _read(logs, loc) == data
    ends = {lid: logs.sizes[lid] + len(el.MAGIC) for lid in logs.sizes}
    logs.close()
    assert len(buffers) == 1
    files = sorted(tmp_path.glob("*.log"))
    assert len(files) >= 3
    for p in files:
        data = p.read_bytes()
        assert data.startswith(el.MAGIC) and len(data) == ends[int(p.stem)], "cut to its records' end"
    reopened = el.EntryLogs(tmp_path)
    reopened.open()
    assert all(_read(reopened, loc) == data for loc, data in written)
    reopened.close()
    newest = max(tmp_path.glob("*.log"))
    assert newest.read_bytes() == el.MAGIC, "a log closed with nothing appended: its magic alone"


@pytest.mark.parametrize("where", ["open", "write", "never asked"])
def test_without_o_direct_the_logs_go_through_the_page_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    """A file system without O_DIRECT (EINVAL when opening, as tmpfs), one that wants another
    alignment (EINVAL on the write), or direct_io=False: buffered writes, nothing lost."""
    direct = getattr(os, "O_DIRECT", 0)
    real_open, real_pwrite = os.open, os.pwrite
    direct_fds: set[int] = set()
    opened: list[bool] = []

    def opening(path: object, flag: int, *a: object) -> int:
        opened.append(bool(flag & direct))
        if flag & direct and where == "open":
            raise OSError(errno.EINVAL, "Invalid argument")
        fd = real_open(path, flag, *a)  # type: ignore[arg-type]
        (direct_fds.add if flag & direct else direct_fds.discard)(fd)
        return fd

    def pwriting(fd: int, data: bytes | memoryview, offset: int) -> int:
        if fd in direct_fds:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(el.os, "open", opening)
    monkeypatch.setattr(el.os, "pwrite", pwriting)
    logs = el.EntryLogs(tmp_path, max_log_size=64 << 10, direct_io=where != "never asked")
    logs.open()
    written: list[tuple[el.Location, bytes]] = []
    with caplog.at_level("WARNING", logger="store.bookie.entry_log"):
        for salt in range(20):
            batch = _entries(5, salt)
            written += zip(logs.append_many(batch), batch)
    assert not logs._direct and len(list(tmp_path.glob("*.log"))) >= 2
    logs.close()
    refused = [r for r in caplog.records if "O_DIRECT writes refused" in r.getMessage()]
    assert len(refused) == (1 if where == "write" and direct else 0)
    if where == "never asked":
        assert not any(opened)
    for p in tmp_path.glob("*.log"):
        assert p.read_bytes().startswith(el.MAGIC)
    reopened = el.EntryLogs(tmp_path)
    reopened.open()
    assert all(_read(reopened, loc) == data for loc, data in written)
    reopened.close()
