"""store/managed: segmented logs (managed ledgers) over ledgers, cursors, entry cache, retention."""

from store.managed.cache import EntryCache, configure_default_cache, default_cache
from store.managed.config import LogConfig
from store.managed.cursor import ManagedCursor
from store.managed.errors import (
    LogClosedError,
    LogWriteError,
    ManagedLogError,
    NoSuchCursorError,
    NoSuchLogError,
    OwnershipLostError,
)
from store.managed.log import ManagedLog, delete_log
from store.managed.metadata import LedgerInfo
from store.managed.position import Entry, Position
from store.managed.readonly import ManagedLogReader

__all__ = [
    "Entry",
    "EntryCache",
    "LedgerInfo",
    "LogClosedError",
    "LogConfig",
    "LogWriteError",
    "ManagedCursor",
    "ManagedLog",
    "ManagedLogError",
    "ManagedLogReader",
    "NoSuchCursorError",
    "NoSuchLogError",
    "OwnershipLostError",
    "Position",
    "configure_default_cache",
    "default_cache",
    "delete_log",
]
