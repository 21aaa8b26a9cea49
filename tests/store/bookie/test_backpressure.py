"""Write-cache backpressure (adds wait while the cache is full, nothing piles up) and the
server's framing of large entries split across reads."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from store.bookie import protocol as p
from store.bookie.bookie import Bookie, BookieConfig
from store.bookie.client import BookieClient
from store.bookie.entry import pack_entry
from store.bookie.server import BookieServer
from store.bookie.storage import StorageConfig

CAP = 64_000


def _config() -> BookieConfig:
    sc = StorageConfig(flush_interval=3600, compaction_interval=3600, write_cache_bytes=CAP, flush_bytes=16_000)
    return BookieConfig(storage=sc)


def _gate_flushes(b: Bookie, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Hold every flush on the maintenance thread until the returned event is set."""
    gate = threading.Event()
    real: Callable[..., Any] = b.storage.checkpointer._flush_sync

    def held(*args: Any) -> Any:
        assert gate.wait(60)
        return real(*args)

    monkeypatch.setattr(b.storage.checkpointer, "_flush_sync", held)
    return gate


async def _until(cond: Callable[[], bool], what: str) -> None:
    for _ in range(1000):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


def _entry(lid: int, eid: int, n: int = 1000) -> bytes:
    return pack_entry(lid, eid, eid - 1, bytes([eid % 251]) * n)


async def test_full_write_cache_refuses_adds_until_a_flush_makes_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = Bookie(tmp_path / "d", config=_config())
    await b.start()
    gate = _gate_flushes(b, monkeypatch)
    flushes = b.storage.checkpointer.flushes  # start-up checkpoints
    acks: list[BaseException | None] = []
    n = 0
    while b.add_cb(1, _entry(1, n), False, acks.append):
        n += 1
        assert n < 1000, "the write cache never filled"
    # Bounded: the cache stops within one entry of its size, while the flush is stuck.
    assert CAP <= b.storage.cached_bytes < CAP + 1100
    assert not b.storage.has_room() and b.storage.checkpointer.flushes == flushes
    room: list[int] = []
    b.storage.on_room(lambda: room.append(1))
    slow_add = asyncio.create_task(b.add(1, _entry(1, n)))  # the awaitable path waits too
    await asyncio.sleep(0.05)
    assert not room and not slow_add.done()
    # Everything admitted stays readable (from the cache) during the stall.
    assert await b.read(1, n - 1) == _entry(1, n - 1)
    await b.journal.drain()
    assert acks == [None] * n  # durability is not held back, only admission
    gate.set()
    await _until(lambda: bool(room), "room after the flush")
    await asyncio.wait_for(slow_add, 10)
    assert b.storage.checkpointer.flushes > flushes
    got = await b.read_range(1, 0, n, 1 << 30)
    assert got == [_entry(1, i) for i in range(n + 1)]
    await b.close()


@pytest.fixture
async def held_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[BookieServer, threading.Event]]:
    b = Bookie(tmp_path / "d", config=_config())
    await b.start()
    gate = _gate_flushes(b, monkeypatch)
    s = BookieServer(b, max_frame=1 << 20)
    await s.listen()
    yield s, gate
    gate.set()
    await s.close()
    await b.close()


async def test_server_stops_reading_instead_of_queueing_tasks(
    held_server: tuple[BookieServer, threading.Event],
) -> None:
    server, gate = held_server
    c = BookieClient(server.address, request_timeout=60)
    await c.connect()
    total = 400  # ~400 KB against a 64 KB cache
    entries = [_entry(2, i) for i in range(total)]
    futs = [c.add_nowait(2, e) for e in entries]
    await _until(lambda: any(conn._blocked for conn in server.conns), "an add blocked on a full cache")
    (conn,) = server.conns
    await asyncio.sleep(0.1)
    storage = server.bookie.storage
    assert conn._reading_paused and not conn._tasks  # paused, no task per waiting add
    assert storage.cached_bytes < CAP + 1100
    acked = sum(f.done() for f in futs)
    assert 0 < acked < total
    assert all(f.done() for f in futs[:acked])  # in order
    # Other requests already read are still answered... and the rest flow once flushes run.
    gate.set()
    await asyncio.wait_for(asyncio.gather(*futs), 30)
    assert not conn._blocked and not conn._reading_paused
    assert storage.checkpointer.flushes >= 4
    got = []
    while len(got) < total:
        got += await c.read_range(2, len(got), total - 1, 1 << 20)
    assert got == entries
    await c.close()


async def test_large_and_small_frames_split_at_every_kind_of_boundary(tmp_path: Path) -> None:
    b = Bookie(tmp_path / "d", config=BookieConfig(storage=StorageConfig(flush_interval=3600)))
    await b.start()
    s = BookieServer(b, max_frame=1 << 20)
    await s.listen()
    rng = random.Random(7)
    sizes = [100, 70_000, 5, 20_000, 300_000, 16 << 10, 3000, 65_536, 1]
    entries = [pack_entry(3, i, i - 1, rng.randbytes(n)) for i, n in enumerate(sizes)]
    stream = b"".join(b"".join(p.encode(p.Op.ADD, 0, i + 1, p.LEDGER.pack(3), e)) for i, e in enumerate(entries))
    reader, writer = await asyncio.open_connection(s.host, s.port)
    pos = 0
    while pos < len(stream):  # ragged pieces: headers, bodies and frames all get split
        k = rng.choice([1, 3, 13, 4096, 50_000, 131_072])
        writer.write(stream[pos : pos + k])
        await writer.drain()
        if rng.random() < 0.3:
            await asyncio.sleep(0.002)
        pos += k
    for _ in entries:
        head = await asyncio.wait_for(reader.readexactly(p.HEADER_SIZE), 10)
        flen, _op, status, _rid = p.HEADER.unpack(head)
        await reader.readexactly(flen - p.FRAME_OVERHEAD)
        assert status == 0
    writer.close()
    c = BookieClient(s.address)
    assert [await c.read(3, i) for i in range(len(entries))] == entries
    await b.storage.checkpoint()
    b.storage.read_cache.clear()
    assert await c.read_range(3, 0, len(entries) - 1, 1 << 30) == entries  # and from the entry log
    await c.close()
    await s.close()
    await b.close()
