"""The synchronous SQLite side of the embedded metadata store.

Runs on one dedicated thread per store (never on the event loop). Every public method is one
transaction: BEGIN IMMEDIATE for writes so concurrent processes queue on the write lock
(busy_timeout) instead of failing, and a deferred BEGIN for reads so a read and the change-log
position it reports come from one snapshot (a watch set from that read misses nothing).

Tables: nodes (the tree), sessions (id, last heartbeat, timeout) and changes, a
monotonically increasing log of (seq, path, kind) that other processes poll to fire watches.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from typing import NamedTuple, TypeVar

from store.meta.api import (
    BadVersionError,
    MetaError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Stat,
)
from store.meta.paths import ancestors, parent_of

T = TypeVar("T")

DB_FILE = "meta.db"  # in the store's directory
BUSY_TIMEOUT_MS = 5000
# Change-log entries older than this are trimmed; a reader that lags longer has lost its
# session long before (session timeouts are seconds).
CHANGE_RETENTION_MS = 300_000
KIND_CREATED = "created"
KIND_CHANGED = "changed"
KIND_DELETED = "deleted"

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS nodes (
        path TEXT PRIMARY KEY,
        parent TEXT NOT NULL,
        data BLOB NOT NULL,
        version INTEGER NOT NULL,
        ephemeral_owner INTEGER NOT NULL,
        ctime INTEGER NOT NULL,
        mtime INTEGER NOT NULL,
        cversion INTEGER NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS nodes_parent ON nodes(parent)",
    "CREATE INDEX IF NOT EXISTS nodes_owner ON nodes(ephemeral_owner) WHERE ephemeral_owner != 0",
    """CREATE TABLE IF NOT EXISTS sessions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        heartbeat_ms INTEGER NOT NULL,
        timeout_ms INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS changes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        path TEXT NOT NULL,
        kind TEXT NOT NULL,
        ts_ms INTEGER NOT NULL)""",
    "INSERT OR IGNORE INTO nodes VALUES ('/', '', x'', 0, 0, 0, 0, 0)",
)


class Change(NamedTuple):
    seq: int
    path: str
    kind: str  # KIND_CREATED / KIND_CHANGED / KIND_DELETED


class SessionGone(Exception):
    """Our own session was reaped (possibly by this very transaction, which is committed)."""

    def __init__(self, changes: list[Change]) -> None:
        super().__init__("metadata session expired")
        self.changes = changes


def now_ms() -> int:
    return int(time.time() * 1000)


class MetaDb:
    """One SQLite connection; call every method from the same (executor) thread."""

    def __init__(self, directory: str, *, readonly: bool = False) -> None:
        """`readonly`: the store must exist already, and this connection never writes (nor
        creates the schema)."""
        if readonly and not os.path.exists(os.path.join(directory, DB_FILE)):
            raise MetaError(f"no metadata store in {directory}")
        os.makedirs(directory, exist_ok=True)
        self._c = sqlite3.connect(
            os.path.join(directory, DB_FILE),
            isolation_level=None,
            check_same_thread=False,
            timeout=BUSY_TIMEOUT_MS / 1000,
        )
        self._c.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        self._c.execute("PRAGMA journal_mode=WAL")
        # Metadata (ledger state, cursors) must survive power loss, not only a process crash.
        self._c.execute("PRAGMA synchronous=FULL")
        if not readonly:
            self._write(self._create_schema)

    def close(self) -> None:
        self._c.close()

    # -- transactions ---------------------------------------------------------------------------

    def _write(self, fn: Callable[[], T]) -> T:
        self._c.execute("BEGIN IMMEDIATE")
        try:
            out = fn()
        except SessionGone:
            self._c.execute("COMMIT")  # keep the reaping that found it
            raise
        except BaseException:
            self._c.execute("ROLLBACK")
            raise
        self._c.execute("COMMIT")
        return out

    def _read(self, fn: Callable[[], T]) -> tuple[T, int]:
        """Run fn in one snapshot; also return the change-log position of that snapshot."""
        self._c.execute("BEGIN")
        try:
            out = fn()
            seq = self._max_seq()
        finally:
            self._c.execute("COMMIT")
        return out, seq

    def _create_schema(self) -> None:
        for stmt in _SCHEMA:
            self._c.execute(stmt)

    # -- helpers (inside a transaction) ---------------------------------------------------------

    def _max_seq(self) -> int:
        row = self._c.execute("SELECT seq FROM changes ORDER BY seq DESC LIMIT 1").fetchone()
        return int(row[0]) if row else 0

    def _log(self, path: str, kind: str, now: int, out: list[Change]) -> None:
        cur = self._c.execute("INSERT INTO changes(path, kind, ts_ms) VALUES (?, ?, ?)", (path, kind, now))
        assert cur.lastrowid is not None
        out.append(Change(cur.lastrowid, path, kind))

    def _row(self, path: str) -> tuple[bytes, int, int, int, int, int] | None:
        row = self._c.execute(
            "SELECT data, version, ephemeral_owner, ctime, mtime, cversion FROM nodes WHERE path = ?",
            (path,),
        ).fetchone()
        return None if row is None else (bytes(row[0]), row[1], row[2], row[3], row[4], row[5])

    def _num_children(self, path: str) -> int:
        return int(self._c.execute("SELECT count(*) FROM nodes WHERE parent = ?", (path,)).fetchone()[0])

    def _stat(self, path: str, row: tuple[bytes, int, int, int, int, int]) -> Stat:
        return Stat(
            version=row[1],
            ephemeral_owner=row[2],
            ctime_ms=row[3],
            mtime_ms=row[4],
            num_children=self._num_children(path),
        )

    def _insert(self, path: str, data: bytes, owner: int, now: int, out: list[Change]) -> None:
        parent = parent_of(path)
        self._c.execute("UPDATE nodes SET cversion = cversion + 1 WHERE path = ?", (parent,))
        self._c.execute(
            "INSERT INTO nodes VALUES (?, ?, ?, 0, ?, ?, ?, 0)", (path, parent, data, owner, now, now)
        )
        self._log(path, KIND_CREATED, now, out)

    def _remove(self, path: str, now: int, out: list[Change]) -> None:
        self._c.execute("DELETE FROM nodes WHERE path = ?", (path,))
        self._c.execute("UPDATE nodes SET cversion = cversion + 1 WHERE path = ?", (parent_of(path),))
        self._log(path, KIND_DELETED, now, out)

    def _reap(self, sid: int, now: int, out: list[Change]) -> None:
        owned = self._c.execute("SELECT path FROM nodes WHERE ephemeral_owner = ?", (sid,)).fetchall()
        for (path,) in owned:
            self._remove(path, now, out)
        self._c.execute("DELETE FROM sessions WHERE id = ?", (sid,))

    def _reap_expired(self, now: int, out: list[Change]) -> None:
        expired = self._c.execute(
            "SELECT id FROM sessions WHERE heartbeat_ms + timeout_ms < ?", (now,)
        ).fetchall()
        for (sid,) in expired:
            self._reap(sid, now, out)

    def _versioned_row(self, sid: int, now: int, path: str, version: int) -> tuple[bytes, int, int, int, int, int]:
        """The node's row for a set or delete by session `sid` that expects `version` (-1: any)."""
        self._require_session(sid, now)
        row = self._row(path)
        if row is None:
            raise NoNodeError(path)
        if version != -1 and row[1] != version:
            raise BadVersionError(f"{path}: expected version {version}, found {row[1]}")
        return row

    def _require_session(self, sid: int, now: int) -> None:
        row = self._c.execute("SELECT heartbeat_ms, timeout_ms FROM sessions WHERE id = ?", (sid,)).fetchone()
        if row is None:
            raise SessionGone([])
        if row[0] + row[1] < now:
            # Nobody reaped us yet, but our heartbeat is older than the timeout: we are expired.
            out: list[Change] = []
            self._reap(sid, now, out)
            raise SessionGone(out)

    # -- sessions -------------------------------------------------------------------------------

    def open_session(self, timeout_ms: int) -> tuple[int, list[Change]]:
        def run() -> tuple[int, list[Change]]:
            now = now_ms()
            out: list[Change] = []
            self._reap_expired(now, out)
            cur = self._c.execute(
                "INSERT INTO sessions(heartbeat_ms, timeout_ms) VALUES (?, ?)", (now, timeout_ms)
            )
            assert cur.lastrowid is not None
            return cur.lastrowid, out

        return self._write(run)

    def heartbeat(self, sid: int) -> list[Change]:
        """Refresh our session, reap expired ones (ours included), trim the change log.
        Raises SessionGone if our session no longer exists."""

        def run() -> list[Change]:
            now = now_ms()
            out: list[Change] = []
            self._reap_expired(now, out)
            cur = self._c.execute("UPDATE sessions SET heartbeat_ms = ? WHERE id = ?", (now, sid))
            if cur.rowcount == 0:
                raise SessionGone(out)
            self._c.execute("DELETE FROM changes WHERE ts_ms < ?", (now - CHANGE_RETENTION_MS,))
            return out

        return self._write(run)

    def close_session(self, sid: int) -> list[Change]:
        def run() -> list[Change]:
            out: list[Change] = []
            self._reap(sid, now_ms(), out)
            return out

        return self._write(run)

    # -- reads ----------------------------------------------------------------------------------

    def get(self, path: str) -> tuple[tuple[bytes, Stat] | None, int]:
        def run() -> tuple[bytes, Stat] | None:
            row = self._row(path)
            return None if row is None else (row[0], self._stat(path, row))

        return self._read(run)

    def exists(self, path: str) -> tuple[Stat | None, int]:
        def run() -> Stat | None:
            row = self._row(path)
            return None if row is None else self._stat(path, row)

        return self._read(run)

    def children(self, path: str) -> tuple[list[str] | None, int]:
        def run() -> list[str] | None:
            if self._row(path) is None:
                return None
            rows = self._c.execute("SELECT path FROM nodes WHERE parent = ?", (path,)).fetchall()
            return sorted(p.rsplit("/", 1)[1] for (p,) in rows)

        return self._read(run)

    def changes_since(self, seq: int, limit: int = 1000) -> list[Change]:
        rows = self._c.execute(
            "SELECT seq, path, kind FROM changes WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)
        ).fetchall()
        return [Change(*r) for r in rows]

    # -- writes ---------------------------------------------------------------------------------

    def create(
        self, sid: int, path: str, data: bytes, ephemeral: bool, sequential: bool, make_parents: bool
    ) -> tuple[str, list[Change]]:
        def run() -> tuple[str, list[Change]]:
            now = now_ms()
            self._require_session(sid, now)
            out: list[Change] = []
            parent = parent_of(path)
            prow = self._row(parent)
            if prow is None:
                if not make_parents:
                    raise NoNodeError(f"parent of {path} does not exist")
                for anc in ancestors(path):
                    arow = self._row(anc)
                    if arow is None:
                        self._insert(anc, b"", 0, now, out)
                    elif arow[2] != 0:
                        raise MetaError(f"ephemeral node {anc} cannot have children")
                prow = self._row(parent)
                assert prow is not None
            if prow[2] != 0:
                raise MetaError(f"ephemeral node {parent} cannot have children")
            name = f"{path}{prow[5]:010d}" if sequential else path
            if self._row(name) is not None:
                raise NodeExistsError(name)
            self._insert(name, data, sid if ephemeral else 0, now, out)
            return name, out

        return self._write(run)

    def set(self, sid: int, path: str, data: bytes, version: int) -> tuple[Stat, list[Change]]:
        def run() -> tuple[Stat, list[Change]]:
            now = now_ms()
            row = self._versioned_row(sid, now, path, version)
            self._c.execute(
                "UPDATE nodes SET data = ?, version = version + 1, mtime = ? WHERE path = ?",
                (data, now, path),
            )
            out: list[Change] = []
            self._log(path, KIND_CHANGED, now, out)
            stat = Stat(row[1] + 1, row[2], row[3], now, self._num_children(path))
            return stat, out

        return self._write(run)

    def delete(self, sid: int, path: str, version: int, recursive: bool) -> list[Change]:
        def run() -> list[Change]:
            now = now_ms()
            self._versioned_row(sid, now, path, version)
            out: list[Change] = []
            if self._num_children(path):
                if not recursive:
                    raise NotEmptyError(path)
                # '0' sorts right after '/', so this range is exactly the subtree.
                below = self._c.execute(
                    "SELECT path FROM nodes WHERE path > ? AND path < ?", (path + "/", path + "0")
                ).fetchall()
                for (p,) in sorted(below, key=lambda r: r[0].count("/"), reverse=True):
                    self._remove(p, now, out)
            self._remove(path, now, out)
            return out

        return self._write(run)
