"""One share-partition's delivery state (Kafka's SharePartition), kept by the partition's owner.

Offsets before the share-partition start offset (SPSO) are done. From the SPSO to `end` (the
first offset never acquired) the state is a sorted run of spans, each a range of offsets with
one state, delivery count and (while ACQUIRED) holder and acquisition lock: the size follows the
number of ranges, never of records. Records are acquired as whole stored batches (their offset
ranges from the batch headers, no record decoding), expired locks return them to AVAILABLE, and
reaching the delivery-count limit archives them. Every change a client is answered about is
persisted first through a `ShareStateStore` (the cursor of the partition's log, see
gateway/shares.py), as the SPSO plus the spans that carry a count or a final state.

Key-shared mode (Pulsar's Key_Shared, `ShareConfig.key_shared`) acquires single records, by key:
the keys of the batches read are decoded (only then, and once per record while it is in the
window) and kept for the records of the window [SPSO, end), whose size the record-lock limit
bounds, never for keys seen before. Two rules keep keys apart and in order ("blocked keys"):
- a record of key K is acquired only if no other member holds (has ACQUIRED) a record of K;
- and only if every earlier unfinished record of K (not ACKNOWLEDGED, ARCHIVING nor ARCHIVED) is
  acquired in the same acquisition: a record waits while an earlier one of its key is held by a
  previous acquisition (even the same member's), backs off, is held back (delayed delivery) or
  is available again, and that earlier one goes first. So records of one key are delivered in
  offset order, and a lock expiry or a member leaving returns them to be redelivered in order.
On top, so that keys spread over the members rather than all go to whoever fetches first, a key
goes only to the member rendezvous hashing picks among those fetching from the partition now
(Pulsar's hash ranges over consumers, as a preference only: a key moving to another member waits
until the records its old member holds are finished, by the rules above, which is the draining
Pulsar needs when its ranges move).
Null keys are one key (as empty keys: Pulsar hashes a missing key as the empty one). Nothing of
this is stored: after a takeover nothing is acquired and the order follows from the offsets.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sortedcontainers import SortedDict

from coordinator.share.config import ShareConfig
from store.clock import SYSTEM_CLOCK, Clock, TimerHandle

log = logging.getLogger(__name__)


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3  # bound for the group's dead-letter topic: archived once the copy is durable
    ARCHIVED = 4


class AckType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge AcknowledgeTypes (Kafka 4.4)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
StoredSpan = tuple[int, int, int, int]  # first, last, state (all but ACQUIRED), delivery count

DueTimes = Callable[[int], Sequence[tuple[int, int, int]]]
"""Delayed delivery: a stored batch's base offset -> (first, last, epoch ms) runs of it that
must not be delivered before that time."""
KeysOf = Callable[[int], Sequence[tuple[int, int]]]
"""Key-shared mode: a stored batch's base offset -> (offset, key id) of its records. Key ids are
stable hashes of the keys (equal keys, equal ids; a collision only makes two keys wait for each
other)."""
PENDING = (RecordState.AVAILABLE, RecordState.ACQUIRED)  # to be delivered (again) or in flight

# Why a record is dead-lettered (Kafka 4.4's __dlq.errors.message texts).
REJECTED = "Offset rejected by client."
DELIVERY_COUNT_EXCEEDED = "Offset delivery count exceeded the threshold."


@dataclass
class Span:
    first: int
    last: int
    state: RecordState
    count: int = 0  # deliveries so far
    member: str | None = None  # holder while ACQUIRED
    lock: int = 0  # acquisition id while ACQUIRED (its timer returns the span)
    ready_at: float = 0.0  # AVAILABLE but backing off: acquirable from this monotonic time on
    reason: str = ""  # ARCHIVING: REJECTED or DELIVERY_COUNT_EXCEEDED

    def same(self, o: Span) -> bool:
        return (self.state, self.count, self.member, self.lock, self.ready_at, self.reason) == (
            o.state, o.count, o.member, o.lock, o.ready_at, o.reason)


class ShareStateStore(Protocol):
    async def save(self, spso: int, spans: list[StoredSpan]) -> None:
        """Durably record the state; returns once a takeover would see it."""
        ...


class InvalidRecordState(Exception):
    """An acknowledgement of records not acquired by the member (INVALID_RECORD_STATE)."""


def encode_spans(spans: list[StoredSpan]) -> str:
    return ",".join(f"{f}-{la}:{s}:{c}" for f, la, s, c in spans)


def decode_spans(text: str) -> list[StoredSpan]:
    out: list[StoredSpan] = []
    for item in filter(None, text.split(",")):
        rng, s, c = item.split(":")
        f, la = rng.split("-")
        out.append((int(f), int(la), int(s), int(c)))
    return out


class SharePartition:
    def __init__(
        self,
        spso: int,
        config: ShareConfig,
        *,
        store: ShareStateStore | None = None,
        clock: Clock = SYSTEM_CLOCK,
        on_available: Callable[[], None] | None = None,
        stored: list[StoredSpan] | None = None,
    ) -> None:
        self.spso = spso
        self.end = spso
        self.config = config
        self.store = store
        self._clock = clock
        self._on_available = on_available
        self._spans: SortedDict = SortedDict()  # first -> Span
        self._locks: dict[int, TimerHandle] = {}
        self._backoffs: dict[float, TimerHandle] = {}  # ready time -> timer that wakes fetchers
        # Delayed delivery: offsets held back (outside the in-flight window), by ready time.
        self._held = 0
        self._held_at: dict[float, int] = {}
        self._next_lock = 0
        # Key-shared mode: key ids of the window's records read so far (None: no record there,
        # a compacted batch's gap), dropped as the SPSO passes them.
        self._keys: SortedDict = SortedDict()
        for f, la, s, c in stored or ():
            if la < spso:
                continue
            f = max(f, spso)
            if f > self.end:  # never persisted between: available, never delivered
                self._put(Span(self.end, f - 1, RecordState.AVAILABLE))
            span = Span(f, la, RecordState(s), c)
            if span.state is RecordState.ARCHIVING:  # the reason is not stored: the likelier one
                span.reason = DELIVERY_COUNT_EXCEEDED if c >= config.delivery_count_limit else REJECTED
            self._put(span)
            self.end = la + 1
        self._advance()

    # ---- views ---------------------------------------------------------------------------

    def spans(self) -> list[Span]:
        return list(self._spans.values())

    def in_flight(self) -> int:
        """Offsets acquired now."""
        return sum(s.last - s.first + 1 for s in self._spans.values() if s.state is RecordState.ACQUIRED)

    def archived(self) -> int:
        return sum(s.last - s.first + 1 for s in self._spans.values() if s.state in DONE)

    def _acquirable(self, s: Span) -> bool:
        return s.state is RecordState.AVAILABLE and (s.ready_at == 0.0 or s.ready_at <= self._clock.monotonic())

    def fetch_start(self) -> int:
        """Where a read for acquisition starts: the first acquirable offset, else `end`
        (records backing off are skipped, so they hold nothing behind them up)."""
        for s in self._spans.values():
            if self._acquirable(s):
                return s.first
        return self.end

    def has_available(self, high_watermark: int) -> bool:
        return self.end < high_watermark or any(self._acquirable(s) for s in self._spans.values())

    def stored(self) -> list[StoredSpan]:
        """What a takeover needs: spans with a count or a final state (acquired ones as
        AVAILABLE with their count), neighbours alike merged."""
        out: list[StoredSpan] = []
        for s in self._spans.values():
            st = RecordState.AVAILABLE if s.state is RecordState.ACQUIRED else s.state
            if st is RecordState.AVAILABLE and s.count == 0:
                continue
            if out and out[-1][1] + 1 == s.first and out[-1][2:] == (st, s.count):
                out[-1] = (out[-1][0], s.last, st, s.count)
            else:
                out.append((s.first, s.last, int(st), s.count))
        return out

    async def persist(self) -> None:
        if self.store is not None:
            await self.store.save(self.spso, self.stored())

    # ---- span bookkeeping ----------------------------------------------------------------

    def _put(self, s: Span) -> None:
        self._spans[s.first] = s

    def _split_at(self, offset: int) -> None:
        """Make `offset` start a span, if a span covers it."""
        idx = self._spans.bisect_right(offset) - 1
        if idx < 0:
            return
        s: Span = self._spans.peekitem(idx)[1]
        if s.first < offset <= s.last:
            self._put(Span(offset, s.last, s.state, s.count, s.member, s.lock))
            s.last = offset - 1

    def _range(self, first: int, last: int) -> list[Span]:
        """The spans exactly covering [first, last] ∩ [spso, end), split at both ends."""
        first, last = max(first, self.spso), min(last, self.end - 1)
        if first > last:
            return []
        self._split_at(first)
        self._split_at(last + 1)
        return [self._spans[k] for k in self._spans.irange(first, last)]

    def _coalesce(self) -> None:
        prev: Span | None = None
        for k in list(self._spans):
            s = self._spans[k]
            if prev is not None and prev.last + 1 == s.first and prev.same(s):
                prev.last = s.last
                del self._spans[k]
            else:
                prev = s

    def _advance(self) -> None:
        """Move the SPSO past finished records."""
        while self._spans:
            s: Span = self._spans.peekitem(0)[1]
            if s.state not in DONE:
                break
            del self._spans[s.first]
            self.spso = s.last + 1
        if not self._spans:
            self.spso = max(self.spso, self.end)
            self.end = self.spso
        self._forget_keys()

    def _forget_keys(self) -> None:
        while self._keys and self._keys.peekitem(0)[0] < self.spso:
            self._keys.popitem(0)

    def skip_to(self, log_start: int) -> None:
        """Records before the log start are gone (retention, DeleteRecords): move past them."""
        if log_start <= self.spso:
            return
        for k in list(self._spans.irange(maximum=log_start - 1)):
            s = self._spans[k]
            if s.last < log_start:
                del self._spans[k]
            else:
                del self._spans[k]
                s.first = log_start
                self._put(s)
        self.spso = log_start
        self.end = max(self.end, log_start)
        self._forget_keys()

    # ---- acquisition ---------------------------------------------------------------------

    def acquire(
        self, member: str, batches: list[tuple[int, int]], max_records: int, skip: frozenset[int] = frozenset(),
        due: DueTimes | None = None, keys: KeysOf | None = None, members: Sequence[str] = (),
    ) -> list[tuple[int, int, int]]:
        """Acquire for `member` what is acquirable in these stored batches ((base, last offset)
        from their headers, in order), whole batches at a time, until `max_records` or the
        in-flight limit. Batches whose base offset is in `skip` hold nothing for consumers
        (transaction markers; aborted transactions' records under read_committed): they are
        archived as they are reached. `due` (delayed delivery in use): a batch's runs to hold
        back until an epoch-ms time, asked only for batches holding never-delivered records
        not yet looked at. `keys` (key-shared mode): a batch's record keys, asked only for
        batches with records whose key is not known yet; with it, single records are acquired
        by the rules of the module's doc, and `members` (those fetching from the partition now)
        spread the keys: each key goes only to the one of them rendezvous hashing picks (when
        `member` is one of them), so keys do not all go to whoever fetches first. Returns the
        acquired (first, last, delivery count) runs."""
        lock = self._next_lock = self._next_lock + 1
        if self.config.key_shared and keys is not None:
            keyed = self._acquire_keyed(member, lock, batches, max_records, skip, due, keys,
                                        members if member in members else ())
            self._lock_taken(lock, keyed)
            return keyed
        got = 0
        out: list[tuple[int, int, int]] = []
        for base, last in batches:
            if got >= max_records:
                break
            if self._passed_over(base, last, skip):
                continue
            delays = due(base) if due is not None and self._unchecked(base, last) else ()
            self._hold_back(delays)
            for s in self._range(base, last):
                if self._acquirable(s):
                    self._take(s, member, lock, out)
                    got += s.last - s.first + 1
            if last >= self.end:
                if self.end - self.spso - self._held >= self.config.partition_max_record_locks:
                    break
                first = max(base, self.end)
                self._put(Span(first, last, RecordState.AVAILABLE))
                self.end = last + 1
                self._hold_back(delays)
                for s in self._range(first, last):
                    if self._acquirable(s):
                        self._take(s, member, lock, out)
                        got += s.last - s.first + 1
        self._lock_taken(lock, out)
        return out

    def _passed_over(self, base: int, last: int, skip: frozenset[int]) -> bool:
        """A read batch nothing is acquired from: below the SPSO, or one to skip (archived as the
        share-partition's end passes it)."""
        if last < self.spso:
            return True
        if base in skip:
            if last >= self.end:
                self._put(Span(max(base, self.end), last, RecordState.ARCHIVED))
                self.end = last + 1
            return True
        return False

    def _lock_taken(self, lock: int, out: list[tuple[int, int, int]]) -> None:
        if out:
            self._locks[lock] = self._clock.call_later(
                self.config.record_lock_duration_ms / 1000, self._expire, lock
            )
        self._settle()

    def _acquire_keyed(
        self, member: str, lock: int, batches: list[tuple[int, int]], max_records: int, skip: frozenset[int],
        due: DueTimes | None, keys: KeysOf, members: Sequence[str],
    ) -> list[tuple[int, int, int]]:
        """`acquire` in key-shared mode: record by record, in offset order."""
        mine: dict[int, bool] = {}

        def preferred(key: int) -> bool:
            if key not in mine:
                mine[key] = not members or rendezvous(members, key) == member
            return mine[key]

        start = next((max(b, self.spso) for b, la in batches if la >= self.spso), self.end)
        # Who holds each key now, and the keys with an unfinished record before this read: those
        # wait (one of theirs is held by an earlier acquisition, backs off or is held back).
        holder: dict[int, str] = {}
        blocked: set[int] = set()
        for s in self._spans.values():
            if s.state not in PENDING:
                continue
            if s.state is not RecordState.ACQUIRED and s.first >= start:
                continue  # the read below sees these itself
            for k in self._keys.irange(s.first, s.last):
                key = self._keys[k]
                if key is None:
                    continue
                if s.state is RecordState.ACQUIRED and s.member is not None:
                    holder[key] = s.member
                if k < start:
                    blocked.add(key)
        got = 0
        out: list[tuple[int, int, int]] = []
        for base, last in batches:
            if got >= max_records:
                break
            if self._passed_over(base, last, skip):
                continue
            delays = due(base) if due is not None and self._unchecked(base, last) else ()
            full = False
            if last >= self.end:
                if self.end - self.spso - self._held >= self.config.partition_max_record_locks:
                    full = True  # what is in the window still counts; nothing past it
                else:
                    self._put(Span(max(base, self.end), last, RecordState.AVAILABLE))
                    self.end = last + 1
            self._hold_back(delays)
            first, upto = max(base, self.spso), min(last, self.end - 1)
            if first <= upto and any(o not in self._keys for o in range(first, upto + 1)):
                found = dict(keys(base))
                for o in range(first, upto + 1):
                    if o not in self._keys:
                        self._keys[o] = found.get(o)
            take: list[tuple[int, int]] = []
            for s in self._range(first, upto):
                if s.state not in PENDING:
                    continue
                acquirable = self._acquirable(s)
                for o in range(s.first, s.last + 1):
                    key = self._keys.get(o)
                    if key is None:
                        ok = acquirable  # no record: nothing to order
                    else:
                        ok = (acquirable and key not in blocked and holder.get(key, member) == member
                              and preferred(key))
                        if ok:
                            holder[key] = member
                        else:
                            blocked.add(key)  # and so every later record of the key, this time
                    if ok:
                        if take and take[-1][1] + 1 == o:
                            take[-1] = (take[-1][0], o)
                        else:
                            take.append((o, o))
            for f, la in take:
                for s in self._range(f, la):
                    self._take(s, member, lock, out)
                    got += s.last - s.first + 1
            if full:
                break
        return out

    def _unchecked(self, base: int, last: int) -> bool:
        """Whether the batch holds records never delivered nor held back yet (new ones, or ones
        a takeover restored without their delivery time: that is never stored)."""
        if last >= self.end:
            return True
        for k in self._spans.irange(maximum=last, reverse=True):
            s = self._spans[k]
            if s.last < base:
                break
            if s.state is RecordState.AVAILABLE and s.count == 0 and s.ready_at == 0.0:
                return True
        return False

    def _hold_back(self, delays: Sequence[tuple[int, int, int]]) -> None:
        """Never-delivered AVAILABLE records of these (first, last, due epoch ms) runs wait
        until then: their spans carry the time, and one timer per distinct time wakes fetchers
        (the index of delayed records: no read of the log until they are due)."""
        now_ms = self._clock.time() * 1000
        for first, last, due_ms in delays:
            if due_ms <= now_ms:
                continue
            for s in self._range(first, last):
                if s.state is RecordState.AVAILABLE and s.count == 0 and s.ready_at == 0.0:
                    delay = (due_ms - now_ms) / 1000
                    s.ready_at = self._clock.monotonic() + delay
                    n = s.last - s.first + 1
                    self._held += n
                    self._held_at[s.ready_at] = self._held_at.get(s.ready_at, 0) + n
                    if s.ready_at not in self._backoffs:
                        self._backoffs[s.ready_at] = self._clock.call_later(delay, self._backoff_over, s.ready_at)

    def _take(self, s: Span, member: str, lock: int, out: list[tuple[int, int, int]]) -> None:
        s.state, s.member, s.lock, s.ready_at = RecordState.ACQUIRED, member, lock, 0.0
        s.count += 1
        if out and out[-1][1] + 1 == s.first and out[-1][2] == s.count:
            out[-1] = (out[-1][0], s.last, s.count)
        else:
            out.append((s.first, s.last, s.count))

    def _give_back(self, s: Span, backoff: bool = True) -> None:
        """An ACQUIRED span returns: AVAILABLE (after the redelivery backoff of its count, if
        `backoff`), or ARCHIVED at the delivery limit."""
        s.member, s.lock = None, 0
        if s.count >= self.config.delivery_count_limit:
            self._finish(s, DELIVERY_COUNT_EXCEEDED)
            return
        s.state = RecordState.AVAILABLE
        delay_ms = self.config.redelivery_delay_ms(s.count) if backoff else 0.0
        if delay_ms > 0:
            s.ready_at = self._clock.monotonic() + delay_ms / 1000
            if s.ready_at not in self._backoffs:
                self._backoffs[s.ready_at] = self._clock.call_later(
                    delay_ms / 1000, self._backoff_over, s.ready_at)

    def _finish(self, s: Span, reason: str) -> None:
        """A record that will not be delivered again: ARCHIVED, or ARCHIVING while the group has
        a dead-letter topic (the owner copies it there, then calls `archive_dead_letters`)."""
        if self.config.dlq_topic:
            s.state, s.reason = RecordState.ARCHIVING, reason
        else:
            s.state = RecordState.ARCHIVED

    def dead_letters(self) -> list[tuple[int, int, int, str]]:
        """The ARCHIVING runs, in offset order: (first, last, delivery count, reason)."""
        return [(s.first, s.last, s.count, s.reason) for s in self._spans.values()
                if s.state is RecordState.ARCHIVING]

    def archive_dead_letters(self, first: int, last: int) -> None:
        """Their dead-letter copies are durable: ARCHIVING records in first..last are archived
        (persisting that is the caller's next step)."""
        for s in self._range(first, last):
            if s.state is RecordState.ARCHIVING:
                s.state, s.reason = RecordState.ARCHIVED, ""
        self._settle()

    def _backoff_over(self, ready_at: float) -> None:
        """Records backing off until `ready_at` are acquirable again: wake the fetchers."""
        self._backoffs.pop(ready_at, None)
        self._held = max(self._held - self._held_at.pop(ready_at, 0), 0)
        for s in self._spans.values():  # by the timer's own key: clock floats may differ by an ulp
            if s.ready_at and s.ready_at <= ready_at:
                # A delayed record keeps its (past) time: it is not looked at again.
                s.ready_at = 0.0 if s.count else min(s.ready_at, self._clock.monotonic())
        self._coalesce()
        if self._on_available is not None:
            self._on_available()

    def _expire(self, lock: int) -> None:
        self._locks.pop(lock, None)
        returned = False
        for s in self._spans.values():
            if s.state is RecordState.ACQUIRED and s.lock == lock:
                self._give_back(s)
                returned = True
        if returned:
            self._settle()
            self._after_change()

    def _settle(self) -> None:
        self._advance()
        self._coalesce()

    def _after_change(self) -> None:
        """A change nobody awaits (a timer): persist in the background and wake fetchers."""
        if self.store is not None:
            task = asyncio.get_running_loop().create_task(self.persist())
            task.add_done_callback(_log_failure)
        if self._on_available is not None:
            self._on_available()

    def release_member(self, member: str) -> bool:
        """The member's share session ended: its records return. True if any did."""
        returned = False
        for s in self._spans.values():
            if s.state is RecordState.ACQUIRED and s.member == member:
                self._give_back(s, backoff=False)  # the member left: no failed processing
                returned = True
        if returned:
            self._settle()
            if self._on_available is not None:
                self._on_available()
        return returned

    # ---- acknowledgement -----------------------------------------------------------------

    def acknowledge(self, member: str, first: int, last: int, types: list[int]) -> None:
        """One AcknowledgementBatch: one type for all of first..last, or one per offset.
        Offsets before the SPSO are finished and ignored. Raises InvalidRecordState (changing
        nothing) unless every other offset is ACQUIRED by `member`, and ValueError for a
        malformed batch."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            raise ValueError(f"bad acknowledgement batch {first}-{last} with {len(types)} types")
        if any(t not in AckType._value2member_map_ for t in types):
            raise ValueError(f"unknown acknowledge type in {types}")
        if last < self.spso:
            return  # all finished already: Kafka answers such acknowledgements without an error
        if first < self.spso:
            if len(types) > 1:
                types = types[self.spso - first :]
            first = self.spso
        runs: list[tuple[int, int, AckType]] = []
        if len(types) == 1:
            runs.append((first, last, AckType(types[0])))
        else:
            for i, t in enumerate(types):
                o = first + i
                if runs and runs[-1][2] == t:
                    runs[-1] = (runs[-1][0], o, runs[-1][2])
                else:
                    runs.append((o, o, AckType(t)))
        if first < self.spso or last >= self.end:
            raise InvalidRecordState(f"offsets {first}-{last} are not in flight")
        if not self.config.renew_acknowledge_enable and any(t is AckType.RENEW for _, _, t in runs):
            raise InvalidRecordState("Renewing acquisition locks is not enabled for the group.")  # Kafka's words
        for f, la, t in runs:
            if t is AckType.GAP:
                continue
            for s in self._range(f, la):
                if s.state is not RecordState.ACQUIRED or s.member != member:
                    self._coalesce()  # undo the splits: nothing changed
                    raise InvalidRecordState(f"offset {s.first} is not acquired by the member")
        renewed: int | None = None
        for f, la, t in runs:
            for s in self._range(f, la):
                if t is AckType.GAP:
                    s.state, s.member, s.lock = RecordState.ARCHIVED, None, 0
                elif t is AckType.REJECT:
                    s.member, s.lock = None, 0
                    self._finish(s, REJECTED)
                elif t is AckType.ACCEPT:
                    s.state, s.member, s.lock = RecordState.ACKNOWLEDGED, None, 0
                elif t is AckType.RELEASE:
                    self._give_back(s)
                elif t is AckType.RENEW:
                    if renewed is None:
                        renewed = self._next_lock = self._next_lock + 1
                    s.lock = renewed
        if renewed is not None:
            self._locks[renewed] = self._clock.call_later(
                self.config.record_lock_duration_ms / 1000, self._expire, renewed
            )
        self._settle()
        # Records back for others; in key-shared mode, finished ones also let their key's next go.
        wakes = (AckType.RELEASE,) if not self.config.key_shared else (AckType.RELEASE, AckType.ACCEPT,
                                                                        AckType.REJECT, AckType.GAP)
        if self._on_available is not None and any(t in wakes for _, _, t in runs):
            self._on_available()

    def close(self) -> None:
        for h in (*self._locks.values(), *self._backoffs.values()):
            h.cancel()
        self._locks.clear()
        self._backoffs.clear()


def rendezvous(members: Sequence[str], key: int) -> str:
    """The member a key id goes to (rendezvous hashing, stable across processes: a member coming
    or going moves only its share of the keys)."""
    kb = (key & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big")
    return max(members, key=lambda m: hashlib.blake2b(kb, digest_size=8, key=m.encode()[:64]).digest())


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("share-partition state not persisted: %r", task.exception())
