"""Embedded (SQLite) store: durability, several processes on one directory, session expiry, read-only
clients."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from store.meta.api import EventType, MetaError, SessionExpiredError, WatchEvent
from store.meta.embedded import EmbeddedMetaStore, parse_embedded_url
from store.meta.factory import open_meta
from store.meta.paths import ancestors, parent_of, validate_path
from tests.support.embedded_meta import db_file, stop_outside_write
from tests.support.wait import eventually

from .conftest import ChildClient, Events

Spawn = Callable[[str, float], ChildClient]


def test_url_and_path_helpers() -> None:
    assert parse_embedded_url("embedded:///var/lib/quire/meta/") == "/var/lib/quire/meta"
    with pytest.raises(ValueError):
        parse_embedded_url("embedded://relative/dir")
    with pytest.raises(ValueError):
        open_meta("etcd://x")
    assert isinstance(open_meta("embedded:///tmp/x"), EmbeddedMetaStore)
    assert parent_of("/a/b") == "/a" and parent_of("/a") == "/" and parent_of("/") == ""
    assert ancestors("/a/b/c") == ["/a", "/a/b"]
    assert validate_path("/q/", sequential=True) == "/q/"


async def test_data_survives_close_and_reopen(tmp_path: Path) -> None:
    url = f"embedded://{tmp_path}/meta"
    m = open_meta(url)
    await m.start()
    await m.create("/ledgers/L1", b"meta-1", make_parents=True)
    await m.set("/ledgers/L1", b"meta-2")
    seq = await m.create("/ledgers/id-", sequential=True)
    await m.create("/ledgers/lease", ephemeral=True)
    first_session = m.session_id
    await m.close()

    m2 = open_meta(url)
    await m2.start()
    try:
        assert m2.session_id != first_session
        data, stat = await m2.get("/ledgers/L1")
        assert data == b"meta-2" and stat.version == 1
        assert await m2.exists(seq) is not None
        assert await m2.exists("/ledgers/lease") is None  # ephemeral: gone with its session
        # Sequence counters continue after a restart.
        assert int((await m2.create("/ledgers/id-", sequential=True))[-10:]) > int(seq[-10:])
    finally:
        await m2.close()


async def test_own_stale_session_is_detected(tmp_path: Path) -> None:
    """A store that could not heartbeat for longer than its timeout (its loop was blocked, as
    if SIGSTOPped) finds its session expired: listener called, watches get SESSION_LOST, ops fail."""
    m = open_meta(f"embedded://{tmp_path}", session_timeout=0.5)
    await m.start()
    try:
        await m.create("/eph", ephemeral=True)
        lost: list[int] = []
        m.add_session_listener(lambda: lost.append(1))
        events = Events()
        await m.exists("/never", watch=events)
        time.sleep(1.0)  # noqa: ASYNC251 - blocking the loop on purpose: no heartbeat can run
        with pytest.raises(SessionExpiredError):
            await m.create("/after", b"")
        assert lost == [1]
        assert await events.next() == WatchEvent(EventType.SESSION_LOST, "/never")
        with pytest.raises(SessionExpiredError):
            await m.get("/")
    finally:
        await m.close()
    m2 = open_meta(f"embedded://{tmp_path}")
    await m2.start()
    try:
        assert await m2.exists("/eph") is None
        assert await m2.exists("/after") is None
    finally:
        await m2.close()


async def test_two_processes_share_writes_and_watches(tmp_path: Path, spawn_child: Spawn) -> None:
    url = f"embedded://{tmp_path}/meta"
    m = open_meta(url)
    await m.start()
    try:
        child = await asyncio.to_thread(spawn_child, url, 10.0)
        # child -> parent: a write and a watch fired by it
        events = Events()
        assert await m.exists("/from-child", watch=events) is None
        assert await child.ask("create /from-child hello") == "OK /from-child"
        assert await events.next() == WatchEvent(EventType.CREATED, "/from-child")
        assert (await m.get("/from-child"))[0] == b"hello"
        # parent -> child
        await m.create("/from-parent", b"p0")
        assert await child.ask("get /from-parent") == "OK p0"
        assert await child.ask("watch /from-parent") == "OK"
        await m.set("/from-parent", b"p1")
        assert await child.expect_async("EVENT") == "EVENT changed /from-parent"
        # the child's ephemeral node is visible here and gone when it closes
        assert await child.ask("create /child-lease x eph") == "OK /child-lease"
        stat = await m.exists("/child-lease")
        assert stat is not None and stat.ephemeral_owner == child.session_id
        child.send("quit")
        await child.expect_async("BYE")
        assert await m.exists("/child-lease") is None
    finally:
        await m.close()


async def test_killed_process_ephemeral_is_reaped(tmp_path: Path, spawn_child: Spawn) -> None:
    url = f"embedded://{tmp_path}/meta"
    m = open_meta(url, session_timeout=3.0)
    await m.start()
    try:
        child = await asyncio.to_thread(spawn_child, url, 1.5)
        assert await child.ask("create /lease x eph") == "OK /lease"
        events = Events()
        assert await m.exists("/lease", watch=events) is not None
        child.signal(signal.SIGKILL)
        assert await events.next() == WatchEvent(EventType.DELETED, "/lease")
        assert await m.exists("/lease") is None
    finally:
        await m.close()


async def test_stopped_process_loses_its_session(tmp_path: Path, spawn_child: Spawn) -> None:
    url = f"embedded://{tmp_path}/meta"
    m = open_meta(url, session_timeout=3.0)
    await m.start()
    try:
        child = await asyncio.to_thread(spawn_child, url, 1.5)
        assert await child.ask("create /lease x eph") == "OK /lease"
        assert await child.ask("watch /pending") == "OK"
        await asyncio.to_thread(stop_outside_write, lambda: child.signal(signal.SIGSTOP),
                                lambda: child.signal(signal.SIGCONT), db_file(url))

        async def reaped() -> bool:
            return await m.exists("/lease") is None

        await eventually(reaped)  # our heartbeat reaped the frozen session
        child.signal(signal.SIGCONT)
        assert await child.expect_async("LOST") == "LOST"
        assert await child.expect_async("EVENT") == "EVENT session_lost /pending"
        assert await child.ask("set /x y") == "ERR SessionExpiredError"
        assert await child.ask("get /") == "ERR SessionExpiredError"
    finally:
        await m.close()


async def test_a_read_only_store_reads_and_watches_without_a_session_or_the_write_lock(tmp_path: Path) -> None:
    url = f"embedded://{tmp_path}/meta"
    with pytest.raises(MetaError, match="no metadata store in"):
        await open_meta(url, readonly=True).start()
    writer = open_meta(url)
    await writer.start()
    reader = open_meta(url, readonly=True)
    try:
        await writer.create("/t/a", b"1", make_parents=True)
        sessions = _sessions(url)
        # Another process holds the write lock all along: a reader that needed it (a session
        # opened, a heartbeat, the schema) would fail after the busy timeout instead.
        lock = sqlite3.connect(db_file(url), isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        try:
            await reader.start()
            assert reader.session_id == 0
            assert (await reader.get("/t/a"))[0] == b"1"
            assert await reader.children("/t") == ["a"]
            with pytest.raises(MetaError, match="read-only"):
                await reader.set("/t/a", b"2")
            with pytest.raises(MetaError, match="read-only"):
                await reader.create("/t/b", b"", ephemeral=True)
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        assert _sessions(url) == sessions == 1
        events = Events()
        assert await reader.exists("/t/a", watch=events) is not None
        await writer.set("/t/a", b"3")  # another store's change reaches the reader's watch
        assert await events.next() == WatchEvent(EventType.CHANGED, "/t/a")
        assert (await reader.get("/t/a"))[0] == b"3"
    finally:
        await reader.close()
        await writer.close()


def _sessions(url: str) -> int:
    with contextlib.closing(sqlite3.connect(db_file(url))) as c:
        return int(c.execute("SELECT COUNT(*) FROM sessions").fetchone()[0])
