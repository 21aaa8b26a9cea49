"""`embedded:///abs/dir`: the metadata store in a SQLite file (DIR/meta.db), WAL mode.

Durable across restarts and shared by several processes on one host (the standalone runs its
bookies as child processes). SQLite runs on one dedicated thread per store, so the event loop
never blocks on it. Sessions heartbeat every timeout/3; every store reaps sessions whose
heartbeat is older than their timeout, deleting their ephemeral nodes. Watches fire at once for
this store's own changes and, for other processes' changes, from a change log polled while
watches are pending.

A read-only store (readonly=True: Spark's tasks and driver, which only read) opens no session
and never writes. In WAL mode its reads neither wait for a writer nor keep one waiting, while a
session's writes (open, a heartbeat every timeout/3, close) each take the database's one write
lock and hold it through an fsync. Taken by a process the scheduler runs last (Spark's tasks
under SCHED_IDLE beside a busy gateway), the lock stays held until that process runs again:
during scans with sessions a write at normal priority waited up to 131 ms (10 writes over
20 ms in 90 s of scans); with read-only tasks, at most 24 ms (2).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from store.meta.api import (
    MetaConnectionError,
    MetaError,
    MetaStore,
    NoNodeError,
    SessionExpiredError,
    SessionListener,
    Stat,
    Watcher,
)
from store.meta.sqlite_db import Change, MetaDb, SessionGone
from store.meta.watch_table import WatchTable
from store.tasks import cancel_and_wait

log = logging.getLogger(__name__)

T = TypeVar("T")

POLL_INTERVAL = 0.025
POLL_BATCH = 1000
_PREFIX = "embedded://"


def parse_embedded_url(url: str) -> str:
    """'embedded:///abs/dir' -> '/abs/dir'."""
    if not url.startswith(_PREFIX):
        raise ValueError(f"not an embedded metadata URL: {url!r}")
    directory = url[len(_PREFIX) :]
    if not directory.startswith("/"):
        raise ValueError(f"embedded metadata URL needs an absolute directory (embedded:///dir): {url!r}")
    return directory.rstrip("/") or "/"


class EmbeddedMetaStore(MetaStore):
    def __init__(self, url: str, *, session_timeout: float = 10.0, readonly: bool = False) -> None:
        if session_timeout <= 0:
            raise ValueError("session_timeout must be positive")
        self._dir = parse_embedded_url(url)
        self._timeout = session_timeout
        self._readonly = readonly
        self._executor: ThreadPoolExecutor | None = None
        self._db: MetaDb | None = None
        self._sid = 0
        self._lost = False
        self._closed = False
        self._listeners: list[SessionListener] = []
        self._watches = WatchTable()
        self._polled_seq = 0
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._db is not None:
            raise RuntimeError("store already started")
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quire-meta-sqlite")
        self._db = await self._call(functools.partial(MetaDb, self._dir, readonly=self._readonly))
        self._tasks = [asyncio.create_task(self._poll_loop(), name="meta-poll")]
        if self._readonly:
            self._polled_seq = await self._call(self._db_max_seq)
            return
        self._sid, changes = await self._call(self._db.open_session, int(self._timeout * 1000))
        self._polled_seq = await self._call(self._db_max_seq)
        self._watches.dispatch(changes)
        self._tasks.append(asyncio.create_task(self._heartbeat_loop(), name=f"meta-heartbeat-{self._sid}"))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await cancel_and_wait(self._tasks)
        self._watches.clear()
        db, executor = self._db, self._executor
        if db is not None and executor is not None:
            try:
                if not self._lost and not self._readonly:
                    await self._call(db.close_session, self._sid)
            except (SessionGone, sqlite3.Error) as e:
                log.warning("closing metadata session %d: %s", self._sid, e)
            finally:
                await self._call(db.close)
        if executor is not None:
            executor.shutdown(wait=False)

    @property
    def session_id(self) -> int:
        return self._sid

    def add_session_listener(self, listener: SessionListener) -> None:
        self._listeners.append(listener)

    # -- reads ----------------------------------------------------------------------------------

    async def _get(self, path: str, watch: Watcher | None) -> tuple[bytes, Stat]:
        found, seq = await self._read(MetaDb.get, path)
        if found is None:
            raise NoNodeError(path)
        if watch is not None:
            self._add_data_watch(path, seq, watch)
        return found

    async def _exists(self, path: str, watch: Watcher | None) -> Stat | None:
        stat, seq = await self._read(MetaDb.exists, path)
        if watch is not None:
            self._add_data_watch(path, seq, watch)
        return stat

    async def _children(self, path: str, watch: Watcher | None) -> list[str]:
        names, seq = await self._read(MetaDb.children, path)
        if names is None:
            raise NoNodeError(path)
        if watch is not None:
            self._catch_up_poller(seq)
            self._watches.add_child(path, seq, watch)
            self._wake.set()
        return names

    # -- writes ---------------------------------------------------------------------------------

    async def _create(self, path: str, data: bytes, ephemeral: bool, sequential: bool, make_parents: bool) -> str:
        db = self._live()
        created, changes = await self._write(
            db.create, self._sid, path, bytes(data), ephemeral, sequential, make_parents
        )
        self._watches.dispatch(changes)
        return created

    async def _set(self, path: str, data: bytes, version: int) -> Stat:
        db = self._live()
        stat, changes = await self._write(db.set, self._sid, path, bytes(data), version)
        self._watches.dispatch(changes)
        return stat

    async def _delete(self, path: str, version: int, recursive: bool) -> None:
        db = self._live()
        changes = await self._write(db.delete, self._sid, path, version, recursive)
        self._watches.dispatch(changes)

    # -- internals ------------------------------------------------------------------------------

    def _live(self) -> MetaDb:
        if self._lost:
            raise SessionExpiredError(f"metadata session {self._sid} expired")
        if self._closed or self._db is None:
            raise RuntimeError("metadata store is not started or already closed")
        return self._db

    async def _read(self, fn: Callable[[MetaDb, str], T], path: str) -> T:
        """A read on the executor, answered only if the session is still live when it returns."""
        db = self._live()
        out = await self._call(fn, db, path)
        self._live()
        return out

    async def _call(self, fn: Callable[..., T], *args: object) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn, *args)
        except sqlite3.OperationalError as e:
            # Mostly "database is locked" after busy_timeout: another process holds the lock.
            raise MetaConnectionError(f"metadata database {self._dir}: {e}") from e

    async def _write(self, fn: Callable[..., T], *args: object) -> T:
        if self._readonly:
            raise MetaError(f"metadata store {self._dir} is open read-only")
        try:
            return await self._call(fn, *args)
        except SessionGone as gone:
            self._watches.dispatch(gone.changes)
            self._session_lost()
            raise SessionExpiredError(f"metadata session {self._sid} expired") from None

    def _db_max_seq(self) -> int:
        assert self._db is not None
        return self._db.exists("/")[1]

    def _add_data_watch(self, path: str, seq: int, watch: Watcher) -> None:
        self._catch_up_poller(seq)
        self._watches.add_data(path, seq, watch)
        self._wake.set()

    def _catch_up_poller(self, seq: int) -> None:
        # With no watch pending, changes up to this read concern nobody: don't poll them.
        if not self._watches.pending():
            self._polled_seq = max(self._polled_seq, seq)

    def _session_lost(self) -> None:
        if self._lost or self._closed:
            return
        self._lost = True
        log.warning("metadata session %d expired", self._sid)
        self._watches.fail_all()
        for listener in self._listeners:
            try:
                listener()
            except Exception:
                log.exception("session listener %r failed", listener)

    async def _heartbeat_loop(self) -> None:
        assert self._db is not None
        while not self._lost:
            await asyncio.sleep(self._timeout / 3)
            try:
                changes = await self._call(self._db.heartbeat, self._sid)
            except SessionGone as gone:
                self._watches.dispatch(gone.changes)
                self._session_lost()
                return
            except (MetaConnectionError, sqlite3.Error) as e:
                log.warning("metadata heartbeat failed (will retry): %s", e)
                continue
            self._watches.dispatch(changes)

    async def _poll_loop(self) -> None:
        assert self._db is not None
        while not self._lost:
            if not self._watches.pending():
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                changes: list[Change] = await self._call(self._db.changes_since, self._polled_seq, POLL_BATCH)
            except MetaConnectionError as e:
                log.warning("metadata change poll failed (will retry): %s", e)
                changes = []
            if changes:
                self._polled_seq = max(self._polled_seq, changes[-1].seq)
                self._watches.dispatch(changes)
            if len(changes) < POLL_BATCH:
                await asyncio.sleep(POLL_INTERVAL)
