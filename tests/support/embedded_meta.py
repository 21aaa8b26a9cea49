"""Freezing a process that uses the embedded metadata store, outside its writes."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable

from store.meta.embedded import parse_embedded_url
from store.meta.sqlite_db import DB_FILE


def db_file(url: str) -> str:
    """The SQLite file of an `embedded://` store."""
    return os.path.join(parse_embedded_url(url), DB_FILE)


def stop_outside_write(stop: Callable[[], None], cont: Callable[[], None], db: str, tries: int = 20) -> None:
    """SIGSTOP a process (`stop`; `cont` resumes it), making sure it is not frozen while holding
    SQLite's write lock: frozen there it stalls every other writer, the reaping of its own
    session included, until it resumes (the README's limit of the embedded store)."""
    for _ in range(tries):
        stop()
        conn = sqlite3.connect(db, timeout=0.2, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:
            cont()
            time.sleep(0.05)
        finally:
            conn.close()
    raise AssertionError(f"the process held the metadata store's write lock each of the {tries} times it was frozen")
