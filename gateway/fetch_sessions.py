"""Incremental fetch sessions (KIP-227): the gateway's session cache, as Kafka 4.4's
FetchSessionCache (one shard) and FetchManager.newContext.

A full fetch (epoch 0) creates a session that remembers its partitions and what the last answer
told the client about each (high watermark, log start offset); later incremental fetches (epoch
1, 2, ...) send only partitions that changed, and their answers carry only partitions with news:
records, a moved high watermark or log start, an error, a diverging epoch. A full fetch with
epoch -1 is sessionless; any full fetch closes the session it names.

Cache limits as Kafka's: `max.incremental.fetch.session.cache.slots` sessions (default 1000).
When full, a new session may evict (1) the least recently used one if it has been idle for more
than two minutes, else (2) the smallest one (by partition count, then id) that is more than two
minutes old, if it is not larger than the new one; follower sessions (privileged) are evicted
only by privileged ones while younger than two minutes. Otherwise no session is made and the
answer's session id is 0, which clients take as "keep sending full requests".
"""

from __future__ import annotations

import collections
import random
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from kafka_wire.errors import ErrorCode
from store.metrics import InstanceCollector

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
DEFAULT_SLOTS = 1000  # max.incremental.fetch.session.cache.slots
_MAX_INT = 0x7FFFFFFF

TopicKey = str | uuid.UUID  # a name up to Fetch v12, a topic id from v13
PartKey = tuple[TopicKey, int]


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_INT else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """What a session remembers of one partition: the request's parameters and what the last
    answer carried (-1: never answered, so the next answer includes the partition)."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int
    high_watermark: int = -1
    log_start_offset: int = -1

    def must_respond(self, has_records: bool, error: int, hw: int, log_start: int, diverging: bool) -> bool:
        """Kafka's CachedPartition.maybeUpdateResponseData (updating): is there news?"""
        news = has_records or diverging
        if self.high_watermark != hw:
            news = True
            self.high_watermark = hw
        if self.log_start_offset != log_start:
            news = True
            self.log_start_offset = log_start
        if error:
            # re-sent once the error goes away
            self.high_watermark = -1
            news = True
        return news


class FetchSession:
    __slots__ = ("cached_size", "created_ms", "epoch", "evictable_by_all", "evictable_by_privileged", "id",
                 "last_used_ms", "partitions", "privileged", "uses_topic_ids")

    def __init__(self, sid: int, privileged: bool, partitions: dict[PartKey, CachedPartition],
                 uses_topic_ids: bool, now_ms: int) -> None:
        self.id = sid
        self.privileged = privileged
        # Ordered: partitions that returned records move to the end (fair share of max_bytes).
        self.partitions = partitions
        self.uses_topic_ids = uses_topic_ids
        self.created_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.cached_size = len(partitions)
        # As Kafka, decided when the session is touched (created or used), not when evicting.
        self.evictable_by_all = False
        self.evictable_by_privileged = not privileged

    def update(self, requested: Iterable[tuple[PartKey, CachedPartition]], forgotten: Iterable[PartKey]) -> None:
        """Apply an incremental request: new or changed partitions, then forgotten ones."""
        parts = self.partitions
        for key, p in requested:
            old = parts.get(key)
            if old is None:
                parts[key] = p
            else:
                old.fetch_offset = p.fetch_offset
                old.max_bytes = p.max_bytes
                old.current_leader_epoch = p.current_leader_epoch
                old.last_fetched_epoch = p.last_fetched_epoch
        for key in forgotten:
            parts.pop(key, None)

    def moved_to_end(self, key: PartKey) -> None:
        p = self.partitions.pop(key, None)
        if p is not None:
            self.partitions[key] = p

    def __repr__(self) -> str:
        return f"FetchSession(id={self.id}, epoch={self.epoch}, partitions={len(self.partitions)})"


class SessionError(Exception):
    """A fetch that cannot use the session it names: answered with this top-level error."""

    def __init__(self, error_code: int) -> None:
        super().__init__(error_code)
        self.error_code = error_code


class FetchSessionCache:
    def __init__(self, max_slots: int = DEFAULT_SLOTS, *, eviction_ms: int = EVICTION_MS,
                 now_ms: Callable[[], int] | None = None, rng: random.Random | None = None) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._now_ms = now_ms or (lambda: int(time.monotonic() * 1000))
        self._rng = rng or random.Random()
        # By last use, least recent first (Kafka's lastUsed tree).
        self._sessions: collections.OrderedDict[int, FetchSession] = collections.OrderedDict()
        self.evictions = 0
        FETCH_SESSIONS.track(self)

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, sid: int) -> FetchSession | None:
        return self._sessions.get(sid)

    @property
    def total_partitions(self) -> int:
        return sum(s.cached_size for s in self._sessions.values())

    def remove(self, sid: int) -> FetchSession | None:
        return self._sessions.pop(sid, None)

    def touch(self, session: FetchSession) -> None:
        now = session.last_used_ms = self._now_ms()
        session.cached_size = len(session.partitions)
        old = now - session.created_ms > self.eviction_ms
        session.evictable_by_all = old
        session.evictable_by_privileged = old or not session.privileged
        if session.id in self._sessions:
            self._sessions.move_to_end(session.id)

    def incremental(self, sid: int, epoch: int, topic_ids: bool) -> FetchSession:
        """The session an incremental request (epoch > 0) names, checked as Kafka does; the
        caller applies the request's changes with FetchSession.update, then calls `advance`."""
        session = self._sessions.get(sid)
        if session is None:
            raise SessionError(int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND))
        if session.epoch != epoch:
            raise SessionError(int(ErrorCode.INVALID_FETCH_SESSION_EPOCH))
        if session.uses_topic_ids != topic_ids:
            raise SessionError(int(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR))
        return session

    def advance(self, session: FetchSession) -> bool:
        """After `update`: False (and the session closed) if no partition is left, else the
        session is touched and its epoch moves on."""
        if not session.partitions:
            self.remove(session.id)
            return False
        self.touch(session)
        session.epoch = next_epoch(session.epoch)
        return True

    def create(self, partitions: dict[PartKey, CachedPartition], *, privileged: bool, topic_ids: bool) -> int:
        """A new session for a full fetch's answer: its id, or 0 when the cache is full and
        nothing may be evicted."""
        now = self._now_ms()
        if len(self._sessions) >= self.max_slots and not self._evict(privileged, len(partitions), now):
            return INVALID_SESSION_ID
        sid = 0
        while sid == INVALID_SESSION_ID or sid in self._sessions:
            sid = self._rng.randint(1, _MAX_INT - 1)
        self._sessions[sid] = FetchSession(sid, privileged, partitions, topic_ids, now)
        return sid

    def _evict(self, privileged: bool, size: int, now: int) -> bool:
        if not self._sessions:
            return False
        lru = next(iter(self._sessions.values()))
        if now - lru.last_used_ms > self.eviction_ms:
            self._drop(lru)
            return True
        # Kafka's evictableByAll / evictableByPrivileged: the least valuable session by
        # (privileged, size, id) goes if the newcomer's (privileged, size, 0) is not smaller.
        candidates = [s for s in self._sessions.values()
                      if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.id))
        if (privileged, size, 0) < (victim.privileged, victim.cached_size, victim.id):
            return False
        self._drop(victim)
        return True

    def _drop(self, s: FetchSession) -> None:
        del self._sessions[s.id]
        self.evictions += 1


# -- fetch sessions (kafka.server:type=FetchSessionCache) ----------------------------------------


def _session_metrics(caches: list[FetchSessionCache]) -> list[Metric]:
    p = "kafka_server_fetchsessioncache_"
    sessions = GaugeMetricFamily(p + "numincrementalfetchsessions", "Incremental fetch sessions cached")
    sessions.add_metric([], sum(len(c) for c in caches))
    parts = GaugeMetricFamily(p + "numincrementalfetchpartitionscached", "Partitions in cached fetch sessions")
    parts.add_metric([], sum(c.total_partitions for c in caches))
    evictions = CounterMetricFamily(p + "incrementalfetchsessionevictions", "Fetch sessions evicted")
    evictions.add_metric([], sum(c.evictions for c in caches))
    return [sessions, parts, evictions]


FETCH_SESSIONS: InstanceCollector[FetchSessionCache] = InstanceCollector(_session_metrics)
