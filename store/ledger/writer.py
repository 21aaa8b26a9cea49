"""The single writer of a ledger: pipelined quorum adds, in-order acks, ensemble change.

Each entry goes to the WQ bookies of its write set; it completes once AQ of them acked, and
is acknowledged (its future resolved, LAC advanced) only when every earlier entry is. A bookie
that errors or stalls for add_timeout is replaced: new fragment from LAC+1 written to the
metadata with compare-and-set, then every pending entry is resent to the newcomer. With no
spare bookie, one that is still registered (slow, not gone) is kept and resent to instead. A
FENCED answer from any bookie ends the writer: every pending and later add fails. An idle
writer sends its LAC explicitly (WRITE_LAC) so that readers see the last entry without a next add.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from typing import Any

from store.bookie.entry import HEADER_SIZE, pack_entry_parts
from store.bookie.errors import FencedError
from store.bookie.protocol import DEFAULT_MAX_FRAME
from store.clock import TimerHandle
from store.framing import Buffer
from store.ledger.body import BODY_OVERHEAD, length_prefix
from store.ledger.env import BookieConn, LedgerEnv
from store.ledger.errors import (
    LedgerClosedError,
    LedgerError,
    LedgerFencedError,
    MetadataVersionError,
    NotEnoughBookiesError,
)
from store.ledger.metadata import CLOSED, OPEN, LedgerMetadata
from store.ledger.metrics import ENSEMBLE_CHANGES
from store.ledger.placement import BookieInfo, available_bookies
from store.ledger.quorum import write_set
from store.retry import Backoff, Retry
from store.tasks import within

log = logging.getLogger(__name__)

# The largest payload one bookie frame can carry (frame, ledger id, entry and body headers).
MAX_PAYLOAD = DEFAULT_MAX_FRAME - 64 - HEADER_SIZE - BODY_OVERHEAD


class _Add:
    __slots__ = ("acked", "count", "entry_id", "future", "packed", "size")

    def __init__(self, entry_id: int, packed: list[Buffer], size: int, future: asyncio.Future[int]) -> None:
        self.entry_id = entry_id
        self.packed = packed
        self.size = size
        self.future = future
        self.acked = 0  # bitmask of ensemble indexes that acknowledged it
        self.count = 0


class LedgerWriter:
    def __init__(self, env: LedgerEnv, metadata: LedgerMetadata, *, explicit_lac_interval: float = 0.0) -> None:
        """explicit_lac_interval: once idle this long with a LAC no bookie was told yet, send
        it to the ensemble with WRITE_LAC (0: never; bookies then learn it from the next add)."""
        if metadata.state != OPEN:
            raise LedgerClosedError(f"ledger {metadata.ledger_id} is {metadata.state}")
        self._env = env
        self._clock = env.clock
        self.ledger_id = metadata.ledger_id
        self.metadata = metadata
        self.last_add_confirmed = metadata.ensembles[-1][0] - 1
        self.length = 0
        self._e = metadata.ensemble_size
        self._aq = metadata.ack_quorum
        self._write_sets = [write_set(i, self._e, metadata.write_quorum) for i in range(self._e)]
        ensemble = metadata.ensembles[-1][1]
        self._conns: list[BookieConn] = [env.bookies.get(a) for a in ensemble]
        self._next_entry_id = self.last_add_confirmed + 1
        self._sent_length = 0
        self._pending: collections.deque[_Add] = collections.deque()
        # Per ensemble index: a generation bumped on replacement (late answers from the
        # replaced bookie are ignored), adds in flight, and when it last made progress.
        self._gen = [0] * self._e
        self._outstanding = [0] * self._e
        self._progress = [0.0] * self._e
        self._failed_mask = 0
        self._ever_failed: set[str] = set()
        self._changing = False
        self._change_task: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._error: LedgerError | None = None
        self._closing = False
        self._closed = False
        self._aborted = False
        self.explicit_lac_interval = explicit_lac_interval
        self._told_lac = self.last_add_confirmed  # highest LAC sent to any bookie
        self._last_append = 0.0  # clock.monotonic() of the last append
        self._lac_timer: TimerHandle | None = None
        self._lac_task: asyncio.Task[None] | None = None

    # -- adds -----------------------------------------------------------------------------

    def append(self, payload: bytes | memoryview) -> asyncio.Future[int]:
        if self._error is not None:
            raise type(self._error)(str(self._error))
        if self._closing:
            raise LedgerClosedError(f"ledger {self.ledger_id} is closed")
        if len(payload) > MAX_PAYLOAD:
            raise ValueError(f"entry of {len(payload)} bytes exceeds the {MAX_PAYLOAD}-byte limit")
        loop = asyncio.get_running_loop()
        eid = self._next_entry_id
        self._next_entry_id = eid + 1
        self._sent_length += len(payload)
        lac = self.last_add_confirmed
        # In pieces: the payload (often a view of the produce request) is never copied here.
        packed = pack_entry_parts(self.ledger_id, eid, lac, payload, prefix=length_prefix(self._sent_length))
        self._told_lac = lac  # piggybacked (never decreases: LAC only grows)
        self._last_append = self._clock.monotonic()
        add = _Add(eid, packed, len(payload), loop.create_future())
        self._pending.append(add)
        failed = self._failed_mask
        for idx in self._write_sets[eid % self._e]:
            if not failed & (1 << idx):
                self._send(add, idx)
        return add.future

    def _send(self, add: _Add, idx: int) -> None:
        if self._outstanding[idx] == 0:
            self._progress[idx] = self._clock.monotonic()
        self._outstanding[idx] += 1
        if self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch_stalls())
        # A future per send, not a task: this is the per-entry hot path.
        try:
            fut = self._conns[idx].add_nowait(self.ledger_id, add.packed)
        except Exception as exc:  # refused before sending: same as a failed add
            fut = asyncio.get_running_loop().create_future()
            fut.set_exception(exc)
        fut.add_done_callback(functools.partial(self._sent, add, idx, self._gen[idx]))

    def _sent(self, add: _Add, idx: int, gen: int, fut: asyncio.Future[Any]) -> None:
        exc = fut.exception() if not fut.cancelled() else asyncio.CancelledError()
        if self._aborted:
            return
        if exc is not None:
            if isinstance(exc, FencedError):
                self._fail(LedgerFencedError(f"ledger {self.ledger_id} was fenced by another client"))
            elif gen == self._gen[idx]:
                self._outstanding[idx] -= 1
                self._bookie_failed(idx, exc)
            return
        if gen != self._gen[idx]:
            return
        self._outstanding[idx] -= 1
        self._progress[idx] = self._clock.monotonic()
        bit = 1 << idx
        if self._failed_mask & bit or add.acked & bit:
            return
        add.acked |= bit
        add.count += 1
        if add.count == self._aq and self._pending and self._pending[0] is add:
            self._drain()

    def _drain(self) -> None:
        if self._changing:
            return  # acks wait until the new ensemble is in the metadata
        pending, aq = self._pending, self._aq
        while pending and pending[0].count >= aq:
            add = pending.popleft()
            self.last_add_confirmed = add.entry_id
            self.length += add.size
            if not add.future.done():
                add.future.set_result(add.entry_id)
        if self._lac_timer is None and self.explicit_lac_interval > 0 and self.last_add_confirmed > self._told_lac:
            self._schedule_lac(self.explicit_lac_interval)

    # -- explicit LAC for an idle writer ----------------------------------------------------

    def _schedule_lac(self, delay: float) -> None:
        self._lac_timer = self._clock.call_later(delay, self._lac_due)

    def _lac_due(self) -> None:
        self._lac_timer = None
        if self._error is not None or self._closed or self.last_add_confirmed <= self._told_lac:
            return
        if self._lac_task is not None:  # the previous round is still out: check again later
            self._schedule_lac(self.explicit_lac_interval)
            return
        idle = self._clock.monotonic() - self._last_append
        if idle < self.explicit_lac_interval:
            self._schedule_lac(self.explicit_lac_interval - idle)
            return
        lac = self._told_lac = self.last_add_confirmed
        self._lac_task = asyncio.get_running_loop().create_task(self._send_lac(lac))

    async def _send_lac(self, lac: int) -> None:
        """WRITE_LAC to every bookie of the current ensemble. Best effort: a failure (a fenced
        ledger included; the next add will say so) only costs readers the early LAC."""
        conns = [c for i, c in enumerate(self._conns) if not self._failed_mask & (1 << i)]

        async def one(conn: BookieConn) -> None:
            await within(conn.write_lac(self.ledger_id, lac), self._env.add_timeout)

        try:
            results = await asyncio.gather(*(one(c) for c in conns), return_exceptions=True)
            for r in results:
                if isinstance(r, BaseException):
                    log.debug("ledger %d: explicit LAC %d not delivered: %r", self.ledger_id, lac, r)
        finally:
            self._lac_task = None

    def _fail(self, exc: LedgerError) -> None:
        if self._error is not None:
            return
        self._error = exc
        log.warning("ledger %d writer failed: %s", self.ledger_id, exc)
        for add in self._pending:
            if not add.future.done():
                add.future.set_exception(type(exc)(str(exc)))
                add.future.exception()  # pipelined callers may drop futures: no "never retrieved" noise
        self._pending.clear()
        self._stop_background()

    def _stop_background(self) -> None:
        current = asyncio.current_task()
        for t in (self._watchdog, self._change_task, self._lac_task):
            if t is not None and t is not current:
                t.cancel()
        self._watchdog = None
        if self._lac_timer is not None:
            self._lac_timer.cancel()
            self._lac_timer = None

    # -- bookie failures and ensemble change -----------------------------------------------

    async def _watch_stalls(self) -> None:
        """Fail a bookie that has adds in flight but answered none for add_timeout. Runs only
        while adds are in flight (an idle writer costs no wake-ups)."""
        timeout = self._env.add_timeout
        tick = min(timeout / 4, 0.25)
        clock = self._clock
        while True:
            woke_due = clock.monotonic() + tick
            await clock.sleep(tick)
            if not any(self._outstanding):
                self._watchdog = None
                return
            now = clock.monotonic()
            if now - woke_due > tick:
                # This process was not running (loop blocked, SIGSTOP): answers may be waiting
                # unread in the sockets. Do not blame the bookies for our own pause.
                self._progress = [now] * self._e
                continue
            for idx in range(self._e):
                if self._outstanding[idx] and now - self._progress[idx] > timeout:
                    self._bookie_failed(idx, TimeoutError(f"no add acknowledged for {timeout}s"))

    def _bookie_failed(self, idx: int, exc: BaseException) -> None:
        bit = 1 << idx
        if self._error is not None or self._failed_mask & bit or self._closed:
            return
        addr = self.metadata.ensembles[-1][1][idx]
        log.warning("ledger %d: bookie %s failed (%r), changing ensemble", self.ledger_id, addr, exc,
                    extra={"fields": {"event": "bookie_failed", "ledger": self.ledger_id, "bookie": addr}})
        self._failed_mask |= bit
        self._ever_failed.add(addr)
        # Its copies of pending entries will not be in the new fragment: resend them later.
        for add in self._pending:
            if add.acked & bit:
                add.acked &= ~bit
                add.count -= 1
        if self._change_task is None:
            self._changing = True
            self._change_task = asyncio.get_running_loop().create_task(self._change_ensemble())

    def replace_bookies(self, addresses: set[str]) -> bool:
        """Replace these bookies of the current fragment as if they had failed: auto-recovery
        found them lost, and an idle writer would otherwise keep them (and its ledger stay
        under-replicated) until its next add. True if one of them was in the fragment."""
        hit = False
        for idx, addr in enumerate(self.metadata.ensembles[-1][1]):
            if addr in addresses:
                self._bookie_failed(idx, ConnectionError(f"bookie {addr} is lost (auto-recovery)"))
                hit = True
        return hit

    def _replacement(self, ensemble: list[str], i: int, wq: int, bookies: list[BookieInfo], now_failed: set[str]) -> str:
        """A bookie for position i: preferably none that ever failed this writer; failing that,
        one that failed before but is registered again (a restarted bookie), never one failing
        now. Without the fallback, a long-lived ledger ran out of spares after a few restarts
        and its writer failed with live bookies to spare."""
        place = self._env.placement
        try:
            return place.replace_bookie(ensemble, i, wq, bookies, exclude=self._ever_failed)
        except NotEnoughBookiesError:
            if self._ever_failed <= now_failed:
                raise
            return place.replace_bookie(ensemble, i, wq, bookies, exclude=now_failed)

    async def _change_ensemble(self) -> None:
        # Bookies may be re-registering: placement is retried for up to add_timeout.
        timeout = self._env.add_timeout
        retry = Retry(Backoff(initial=timeout / 10, maximum=timeout / 5), within=timeout, clock=self._clock)
        try:
            while self._failed_mask and self._error is None:
                failed = [i for i in range(self._e) if self._failed_mask & (1 << i)]
                md = self.metadata
                ensemble = list(md.ensembles[-1][1])
                kept: list[int] = []
                try:
                    bookies = await available_bookies(self._env.meta)
                    live = {b.address for b in bookies}
                    now_failed = {md.ensembles[-1][1][i] for i in failed}
                    for i in failed:
                        try:
                            ensemble[i] = self._replacement(ensemble, i, md.write_quorum, bookies, now_failed)
                        except NotEnoughBookiesError:
                            if ensemble[i] not in live:
                                raise
                            # No spare, but it is still registered (slow disk, restarting):
                            # keep it and resend, rather than kill the ledger over a stall.
                            kept.append(i)
                except NotEnoughBookiesError as exc:
                    if not await retry.pause():
                        self._fail(exc)
                        return
                    continue
                if ensemble != md.ensembles[-1][1]:
                    new_md = md.with_ensemble(self.last_add_confirmed + 1, ensemble)
                    try:
                        self.metadata = await self._env.cas_metadata(new_md)
                    except MetadataVersionError:
                        current = await self._env.read_metadata(self.ledger_id)
                        if current.state != OPEN:
                            self._fail(
                                LedgerFencedError(f"ledger {self.ledger_id} is {current.state}: fenced")
                            )
                            return
                        self.metadata = current
                        continue
                    ENSEMBLE_CHANGES.inc()
                    log.info(
                        "ledger %d: new fragment from %d on %s",
                        self.ledger_id,
                        new_md.ensembles[-1][0],
                        ensemble,
                        extra={"fields": {"event": "ensemble_changed", "ledger": self.ledger_id,
                                          "first_entry": new_md.ensembles[-1][0], "ensemble": list(ensemble)}},
                    )
                if kept:
                    log.warning(
                        "ledger %d: no spare bookie, retrying %s", self.ledger_id, [ensemble[i] for i in kept]
                    )
                    await self._clock.sleep(retry.backoff.maximum)
                for i in failed:
                    self._gen[i] += 1
                    self._outstanding[i] = 0
                    self._conns[i] = self._env.bookies.get(ensemble[i])
                    self._failed_mask &= ~(1 << i)
                for add in self._pending:
                    ws = self._write_sets[add.entry_id % self._e]
                    for i in failed:
                        if i in ws:
                            self._send(add, i)
        except LedgerError as exc:
            self._fail(exc)
        except Exception as exc:
            self._fail(LedgerError(f"ensemble change failed: {exc!r}"))
        finally:
            self._changing = False
            self._change_task = None
            if self._error is None:
                self._drain()

    # -- close ----------------------------------------------------------------------------

    async def close(self) -> None:
        """Wait for pending adds, then record the last entry id and length (CAS)."""
        if self._closed:
            if self._error is not None:
                raise type(self._error)(str(self._error))
            return
        self._closing = True
        while self._pending and self._error is None:
            await asyncio.wait({self._pending[-1].future})
        if self._error is not None:
            self._closed = True
            raise type(self._error)(str(self._error))
        self._closed = True
        self._stop_background()
        md = self.metadata
        while True:
            closed = md.copy(state=CLOSED, last_entry_id=self.last_add_confirmed, length=self.length)
            try:
                self.metadata = await self._env.cas_metadata(closed)
                return
            except MetadataVersionError:
                md = await self._env.read_metadata(self.ledger_id)
                if md.state == CLOSED and md.last_entry_id == self.last_add_confirmed:
                    self.metadata = md
                    return
                if md.state != OPEN:
                    raise LedgerFencedError(
                        f"ledger {self.ledger_id} was {md.state} by another client "
                        f"(last entry {md.last_entry_id}, ours {self.last_add_confirmed})"
                    ) from None

    async def abort(self) -> None:
        """Drop the handle without closing the ledger (for tests and shutdown paths): answers
        to adds in flight are ignored and their futures never resolve."""
        self._closing = self._closed = self._aborted = True
        self._stop_background()
