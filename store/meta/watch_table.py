"""One-shot watches of the embedded store, fired from the shared change log.

Each watch remembers the change-log position (`since`) of the snapshot its read came from, so
it fires for exactly the changes after that read: a change already seen (locally or by the
poller) is never replayed into a newer watch, and a change made between the read and the
registration is caught from a small buffer of recently dispatched changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from store.meta.api import EventType, Watcher, WatchEvent
from store.meta.paths import parent_of
from store.meta.sqlite_db import KIND_CHANGED, KIND_CREATED, KIND_DELETED, Change

log = logging.getLogger(__name__)

_RECENT = 512


@dataclass
class _Watch:
    since: int
    fn: Watcher


def _call(fn: Watcher, event: WatchEvent) -> None:
    try:
        fn(event)
    except Exception:
        log.exception("metadata watcher %r failed on %s", fn, event)


class WatchTable:
    """Data watches (get/exists) and child watches (children), keyed by path. Loop-thread only."""

    def __init__(self) -> None:
        self._data: dict[str, list[_Watch]] = {}
        self._child: dict[str, list[_Watch]] = {}
        self._recent: deque[Change] = deque(maxlen=_RECENT)
        self._evicted_seq = 0  # highest seq pushed out of _recent

    def pending(self) -> bool:
        return bool(self._data or self._child)

    def add_data(self, path: str, since: int, fn: Watcher) -> None:
        event = self._missed(since, lambda c: self._data_event(c, path), WatchEvent(EventType.CHANGED, path))
        if event is not None:
            asyncio.get_running_loop().call_soon(_call, fn, event)
        else:
            self._data.setdefault(path, []).append(_Watch(since, fn))

    def add_child(self, path: str, since: int, fn: Watcher) -> None:
        event = self._missed(
            since, lambda c: self._child_event(c, path), WatchEvent(EventType.CHILDREN, path)
        )
        if event is not None:
            asyncio.get_running_loop().call_soon(_call, fn, event)
        else:
            self._child.setdefault(path, []).append(_Watch(since, fn))

    def dispatch(self, changes: list[Change]) -> None:
        """Fire the watches these changes trigger (each change may be dispatched twice: once
        locally, once from the poller; one-shot removal makes that harmless)."""
        for change in changes:
            if len(self._recent) == _RECENT:
                self._evicted_seq = max(self._evicted_seq, self._recent[0].seq)
            self._recent.append(change)
            self._fire(self._data, change.path, change.seq, self._data_event(change, change.path))
            if change.kind == KIND_DELETED:
                self._fire(self._child, change.path, change.seq, WatchEvent(EventType.DELETED, change.path))
            if change.kind in (KIND_CREATED, KIND_DELETED):
                parent = parent_of(change.path)
                self._fire(self._child, parent, change.seq, WatchEvent(EventType.CHILDREN, parent))

    def fail_all(self) -> None:
        """Session lost: every pending watch gets SESSION_LOST."""
        pending = [(p, w) for table in (self._data, self._child) for p, ws in table.items() for w in ws]
        self._data.clear()
        self._child.clear()
        for path, w in pending:
            _call(w.fn, WatchEvent(EventType.SESSION_LOST, path))

    def clear(self) -> None:
        self._data.clear()
        self._child.clear()

    # -- internals ------------------------------------------------------------------------------

    @staticmethod
    def _data_event(change: Change, path: str) -> WatchEvent | None:
        if change.path != path:
            return None
        return WatchEvent(EventType(change.kind), path)

    @staticmethod
    def _child_event(change: Change, path: str) -> WatchEvent | None:
        if change.path == path and change.kind == KIND_DELETED:
            return WatchEvent(EventType.DELETED, path)
        if change.kind != KIND_CHANGED and parent_of(change.path) == path:
            return WatchEvent(EventType.CHILDREN, path)
        return None

    def _missed(
        self, since: int, match: Callable[[Change], WatchEvent | None], fallback: WatchEvent
    ) -> WatchEvent | None:
        """The event a change dispatched before this registration (but after its read) owes it."""
        if since < self._evicted_seq:
            # Too old to tell what happened since: firing spuriously beats never firing.
            return fallback
        for change in self._recent:
            if change.seq > since:
                event = match(change)
                if event is not None:
                    return event
        return None

    @staticmethod
    def _fire(table: dict[str, list[_Watch]], path: str, seq: int, event: WatchEvent | None) -> None:
        if event is None:
            return
        watches = table.get(path)
        if not watches:
            return
        due = [w for w in watches if w.since < seq]
        if not due:
            return
        keep = [w for w in watches if w.since >= seq]
        if keep:
            table[path] = keep
        else:
            del table[path]
        for w in due:
            _call(w.fn, event)
