"""Rollover of an owned segmented log: closing the current ledger and starting the next, on
demand or when the size, entry count or age policy says so (a base of ManagedLog)."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable

from store.clock import Clock
from store.managed.config import should_roll
from store.managed.errors import ManagedLogError
from store.managed.ledgers import WriterLike
from store.managed.log_retention import LogRetention
from store.managed.metadata import LedgerInfo, LogMetadata
from store.managed.ownership import LEDGER_PROP_LOG, best_effort, now_ms
from store.managed.position import Position

log = logging.getLogger("store.managed.log")


class LogRollover(LogRetention):
    """Base of ManagedLog (which owns the state declared here)."""

    _writer: WriterLike | None
    _rolling: asyncio.Task[None] | None
    _queued: deque[tuple[bytes | memoryview, asyncio.Future[Position]]]
    _new_ledger_props: Callable[[], dict[str, str]] | None
    _clock: Clock
    _cur_entries: int
    _cur_bytes: int
    _cur_started: float
    _cur_first_ms: int
    _cur_last_ms: int
    _acked_since_tick: bool
    _submit: Callable[[bytes | memoryview, asyncio.Future[Position]], None]
    _fail: Callable[[ManagedLogError], None]
    _translate: Callable[[BaseException], ManagedLogError]
    schedule_offload: Callable[[], None]

    def _start_roll(self) -> None:
        if self._rolling is None and self._failure is None:
            self._rolling = asyncio.get_running_loop().create_task(self._roll())

    async def _roll(self) -> None:
        try:
            await self._do_roll()
        except Exception as e:
            self._fail(self._translate(e))
        finally:
            self._rolling = None
        while self._queued and self._rolling is None and self._failure is None:
            payload, out = self._queued.popleft()
            self._submit(payload, out)
        if self._failure is None:
            self.schedule_trim()
            self.schedule_offload()

    async def _do_roll(self) -> None:
        old = self._writer
        assert old is not None
        # New-ledger props are taken now: every later append goes to the new ledger.
        props = self._new_ledger_props() if self._new_ledger_props else {}
        await old.close()
        self._stamp_last()
        first_ms, last_ms = self._cur_first_ms, self._cur_last_ms or now_ms()
        new = await self.client.create(
            self.config.ensemble_size,
            self.config.write_quorum,
            self.config.ack_quorum,
            properties={LEDGER_PROP_LOG: self.name},
        )

        def mutate(md: LogMetadata) -> None:
            cur = md.ledgers[-1]
            cur.entries, cur.size, cur.closed = old.last_add_confirmed + 1, old.length, True
            cur.first_ms, cur.last_ms = first_ms, last_ms
            md.ledgers.append(LedgerInfo(new.ledger_id, props=dict(props)))

        async with self._meta_lock:
            try:
                await self._cas(mutate)
            except ManagedLogError:
                await best_effort(new.close(), "close unused ledger")
                await best_effort(self.client.delete(new.ledger_id), "delete unused ledger")
                raise
        self._writer = new
        self._cur_entries = self._cur_bytes = 0
        self._cur_started = self._clock.monotonic()
        self._cur_first_ms = self._cur_last_ms = 0
        if self._last_confirmed == Position(old.ledger_id, -1):
            self._last_confirmed = Position(new.ledger_id, -1)
        log.info("log %s rolled %d -> %d", self.name, old.ledger_id, new.ledger_id,
                 extra={"fields": {"event": "ledger_rolled", "log": self.name, "closed_ledger": old.ledger_id,
                                   "ledger": new.ledger_id}})

    async def roll(self) -> None:
        """Close the current ledger now (if it has entries) and start a new one."""
        self._check_writable()
        if self._rolling is None and self._cur_entries > 0:
            self._start_roll()
        if self._rolling is not None:
            await asyncio.shield(self._rolling)
        self._check_writable()

    def _stamp_last(self) -> None:
        if self._acked_since_tick:
            self._acked_since_tick = False
            self._cur_last_ms = now_ms()

    async def _age_timer(self) -> None:
        period = max(0.05, min(1.0, self.config.max_age_s / 4))
        ticks = 0
        while not self._closed and self._failure is None:
            await self._clock.sleep(period)
            self._stamp_last()
            ticks += 1
            if ticks % 30 == 0:  # offload by age and bookie deletion after the lag
                self.schedule_offload()
            if self._rolling is None and should_roll(
                self.config, self._cur_entries, self._cur_bytes, self._clock.monotonic() - self._cur_started
            ):
                self._start_roll()
