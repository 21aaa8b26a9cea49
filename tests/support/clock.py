"""A clock tests advance by hand (store.clock.Clock): timers fire when the test says so, in
due order, and the coroutines they wake run before `advance` returns."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from typing import Any

# Event-loop turns given to woken coroutines after each timer (they may schedule more work
# of their own, e.g. write to an in-memory log, then set another timer).
_SETTLE_TURNS = 20
_EPSILON = 1e-9  # sums of float steps land a hair short of a timer set for their total


class FakeTimer:
    def __init__(self, when: float, callback: Callable[..., object], args: tuple[Any, ...]) -> None:
        self.when = when
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    def __init__(self, start: float = 0.0, wall: float = 1.7e9) -> None:
        self._now = start
        self._wall_offset = wall - start
        self._seq = itertools.count()
        self._timers: list[tuple[float, int, FakeTimer]] = []

    def time(self) -> float:
        return self._now + self._wall_offset

    def monotonic(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> FakeTimer:
        timer = FakeTimer(self._now + max(delay, 0.0), callback, args)
        heapq.heappush(self._timers, (timer.when, next(self._seq), timer))
        return timer

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        timer = self.call_later(seconds, lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            timer.cancel()

    def pending(self) -> int:
        """Timers set and neither fired nor cancelled."""
        return sum(1 for _, _, t in self._timers if not t.cancelled)

    async def advance(self, seconds: float) -> None:
        """Move time forward by `seconds`, firing every timer due on the way (including those
        set by the timers themselves) at its own time."""
        target = self._now + seconds
        await _settle()
        while self._timers and self._timers[0][0] <= target + _EPSILON:
            when, _, timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._now = max(self._now, when)
            timer.callback(*timer.args)
            await _settle()
        self._now = max(self._now, target)
        await _settle()


async def _settle() -> None:
    for _ in range(_SETTLE_TURNS):
        await asyncio.sleep(0)
