"""The entry cache: recently appended entries (and entries read ahead from bookies), bounded
in bytes and shared by every log of a process, so tailing readers are served from memory.
Evicts the oldest insertions first. Its budget also covers read-ahead in flight (reserve /
release), so one setting (quire.cache.mb) bounds the data a gateway holds for its readers.

Entries are accounted by the memory they keep alive, not by their length: a memoryview keeps
its whole underlying buffer (a request frame, a bookie response) alive, so a view is counted
at its buffer's size, and a small view of a large buffer is copied out when cached (see
retainable) rather than pin, say, a 1 MiB frame for a 100-byte batch."""

from __future__ import annotations

import itertools
from collections import OrderedDict, deque
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from store.metrics import InstanceCollector

DEFAULT_CACHE_BYTES = 256 << 20
_ENTRY_OVERHEAD = 64  # rough per-entry bookkeeping cost counted against the budget

_Key = tuple[int, int, int]  # (log token, ledger id, entry id)
# An entry as appended or read: bytes, or a view of a larger buffer (see retainable).
_Data = bytes | memoryview
_AHEAD_SHARE = 4  # read-ahead in flight may reserve up to 1/4 of the budget


def retained_size(data: _Data) -> int:
    """Bytes `data` keeps alive: its underlying buffer's size for a view."""
    if isinstance(data, memoryview):
        base = data.obj
        return base.nbytes if isinstance(base, memoryview) else len(base)  # type: ignore[arg-type]
    return len(data)


def retainable(data: _Data) -> _Data:
    """`data` itself, or a copy if it is a view of less than half of its buffer: kept as is,
    it would pin that whole buffer (a 1 MiB produce frame for a 100-byte batch) and be
    counted at that size; the copy costs len(data) once and lets the buffer go."""
    if isinstance(data, memoryview) and data.nbytes * 2 < retained_size(data):
        return data.tobytes()
    return data


class EntryCache:
    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[_Key, _Data] = OrderedDict()
        # Per log token, its keys in insertion order, so dropping one log costs its own entries
        # only (fronts that were evicted already are cleaned as eviction passes them).
        self._by_token: dict[int, deque[_Key]] = {}
        self._bytes = 0
        self._reserved = 0  # read-ahead in flight, counted against max_bytes
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

    @property
    def reserved(self) -> int:
        """Bytes reserved by read-ahead in flight."""
        return self._reserved

    def __len__(self) -> int:
        return len(self._entries)

    def can_reserve(self, nbytes: int) -> bool:
        """Whether a read-ahead of about nbytes fits the read-ahead share of the budget."""
        return self._reserved + nbytes <= self.max_bytes // _AHEAD_SHARE

    def reserve(self, nbytes: int) -> bool:
        """Reserve room for a read-ahead of about nbytes (False: the read-ahead share of the
        budget is in use; read on demand instead). Evicts entries to make room."""
        if not self.can_reserve(nbytes):
            return False
        self._reserved += nbytes
        self._evict()
        return True

    def release(self, nbytes: int) -> None:
        self._reserved = max(0, self._reserved - nbytes)

    def insert(self, token: int, ledger_id: int, entry_id: int, data: _Data) -> None:
        data = retainable(data)
        cost = retained_size(data) + _ENTRY_OVERHEAD
        if cost > self.max_bytes:
            return
        key = (token, ledger_id, entry_id)
        entries = self._entries
        old = entries.pop(key, None)
        if old is not None:
            self._bytes -= retained_size(old) + _ENTRY_OVERHEAD
        entries[key] = data
        dq = self._by_token.get(token)
        if dq is None:
            dq = self._by_token[token] = deque()
        dq.append(key)
        self._bytes += cost
        if self._bytes + self._reserved > self.max_bytes:
            self._evict()

    def _evict(self) -> None:
        entries = self._entries
        while self._bytes + self._reserved > self.max_bytes and entries:
            key, ev = entries.popitem(last=False)
            self._bytes -= retained_size(ev) + _ENTRY_OVERHEAD
            dq = self._by_token.get(key[0])
            if dq is not None:
                while dq and dq[0] not in entries:
                    dq.popleft()
                if not dq:
                    del self._by_token[key[0]]

    def get(self, token: int, ledger_id: int, entry_id: int) -> _Data | None:
        data = self._entries.get((token, ledger_id, entry_id))
        if data is None:
            self.misses += 1
        else:
            self.hits += 1
        return data

    def get_range(self, token: int, ledger_id: int, first: int, last: int, max_bytes: int) -> list[_Data]:
        """Consecutive cached entries from `first` (at most up to `last`), stopping at the first
        miss or once max_bytes is reached (the entry crossing it included)."""
        out: list[_Data] = []
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
                self._bytes -= retained_size(data) + _ENTRY_OVERHEAD
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


# -- entry cache -----------------------------------------------------------------------------


def _cache_metrics(caches: list[EntryCache]) -> Iterator[Metric]:
    hits = CounterMetricFamily("quire_entry_cache_hits", "Entries served from the entry cache")
    misses = CounterMetricFamily("quire_entry_cache_misses", "Entry cache lookups that found nothing")
    size = GaugeMetricFamily("quire_entry_cache_bytes", "Bytes held by the entry cache (with bookkeeping)")
    limit = GaugeMetricFamily("quire_entry_cache_max_bytes", "The entry cache's bound")
    entries = GaugeMetricFamily("quire_entry_cache_entries", "Entries held by the entry cache")
    reserved = GaugeMetricFamily(
        "quire_entry_cache_readahead_reserved_bytes", "Bytes of the entry cache's bound reserved by read-ahead in flight"
    )
    hits.add_metric([], sum(c.hits for c in caches))
    misses.add_metric([], sum(c.misses for c in caches))
    size.add_metric([], sum(c.size for c in caches))
    limit.add_metric([], sum(c.max_bytes for c in caches))
    entries.add_metric([], sum(len(c) for c in caches))
    reserved.add_metric([], sum(c.reserved for c in caches))
    return iter((hits, misses, size, limit, entries, reserved))


# The cache keeps plain int counters (the read path pays nothing more); read on scrape.
ENTRY_CACHES: InstanceCollector[EntryCache] = InstanceCollector(_cache_metrics)
