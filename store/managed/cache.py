"""The entry cache: recently appended entries, bounded in bytes and shared by every log of a
process, so tailing readers are served from memory. Evicts the oldest insertions first."""

from __future__ import annotations

import itertools
from collections import OrderedDict, deque

from store.metrics import ENTRY_CACHES

DEFAULT_CACHE_BYTES = 256 << 20
_ENTRY_OVERHEAD = 64  # rough per-entry bookkeeping cost counted against the budget

_Key = tuple[int, int, int]  # (log token, ledger id, entry id)


class EntryCache:
    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[_Key, bytes] = OrderedDict()
        # Per log token, its keys in insertion order, so dropping one log costs its own entries
        # only (fronts that were evicted already are cleaned as eviction passes them).
        self._by_token: dict[int, deque[_Key]] = {}
        self._bytes = 0
        self._tokens = itertools.count(1)
        self.hits = 0
        self.misses = 0
        ENTRY_CACHES.track(self)

    def new_token(self) -> int:
        """A key space for one log handle."""
        return next(self._tokens)

    @property
    def size(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def insert(self, token: int, ledger_id: int, entry_id: int, data: bytes) -> None:
        cost = len(data) + _ENTRY_OVERHEAD
        if cost > self.max_bytes:
            return
        key = (token, ledger_id, entry_id)
        entries = self._entries
        old = entries.pop(key, None)
        if old is not None:
            self._bytes -= len(old) + _ENTRY_OVERHEAD
        entries[key] = data
        dq = self._by_token.get(token)
        if dq is None:
            dq = self._by_token[token] = deque()
        dq.append(key)
        self._bytes += cost
        if self._bytes > self.max_bytes:
            self._evict()

    def _evict(self) -> None:
        entries = self._entries
        while self._bytes > self.max_bytes and entries:
            key, ev = entries.popitem(last=False)
            self._bytes -= len(ev) + _ENTRY_OVERHEAD
            dq = self._by_token.get(key[0])
            if dq is not None:
                while dq and dq[0] not in entries:
                    dq.popleft()
                if not dq:
                    del self._by_token[key[0]]

    def get(self, token: int, ledger_id: int, entry_id: int) -> bytes | None:
        data = self._entries.get((token, ledger_id, entry_id))
        if data is None:
            self.misses += 1
        else:
            self.hits += 1
        return data

    def get_range(self, token: int, ledger_id: int, first: int, last: int, max_bytes: int) -> list[bytes]:
        """Consecutive cached entries from `first` (at most up to `last`), stopping at the first
        miss or once max_bytes is reached (the entry crossing it included)."""
        out: list[bytes] = []
        total = 0
        get = self._entries.get
        for eid in range(first, last + 1):
            data = get((token, ledger_id, eid))
            if data is None:
                break
            out.append(data)
            total += len(data)
            if total >= max_bytes:
                break
        if out:
            self.hits += len(out)
        else:
            self.misses += 1
        return out

    def invalidate(self, token: int, ledger_id: int | None = None) -> None:
        """Drop a log's entries (or only one ledger's): costs that log's entries, not the cache's."""
        dq = self._by_token.pop(token, None)
        if dq is None:
            return
        keep: deque[_Key] = deque()
        for key in dq:
            if ledger_id is not None and key[1] != ledger_id:
                if key in self._entries:
                    keep.append(key)
                continue
            data = self._entries.pop(key, None)
            if data is not None:
                self._bytes -= len(data) + _ENTRY_OVERHEAD
        if keep:
            self._by_token[token] = keep


_default: EntryCache | None = None


def default_cache() -> EntryCache:
    """The process-wide cache (256 MiB unless configure_default_cache was called first)."""
    global _default
    if _default is None:
        _default = EntryCache()
    return _default


def configure_default_cache(max_bytes: int) -> EntryCache:
    global _default
    if _default is None:
        _default = EntryCache(max_bytes)
    else:
        _default.max_bytes = max_bytes
        _default._evict()
    return _default
