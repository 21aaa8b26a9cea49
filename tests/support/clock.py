"""A clock tests advance by hand (store.clock.Clock): timers fire when the test says so, in
due order, and the coroutines they wake run before `advance` returns."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

# Event-loop turns given to woken coroutines after each timer (they may schedule more work
# of their own, e.g. write to an in-memory log, then set another timer).
_SETTLE_TURNS = 20
_NS = 1_000_000_000
T = TypeVar("T")


def _ns(seconds: float) -> int:
    # Whole nanoseconds, so that sums of steps land exactly on a timer set for their total;
    # a positive delay is at least 1 ns, so that a timer re-armed for "the rest" (a float
    # difference that rounds to nothing) still moves time on instead of firing forever.
    if seconds <= 0:
        return 0
    return max(round(seconds * _NS), 1)


class FakeTimer:
    def __init__(self, when: int, callback: Callable[..., object], args: tuple[Any, ...]) -> None:
        self.when = when
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    def __init__(self, wall: float = 1.7e9) -> None:
        self._now = 0  # nanoseconds
        self._wall = wall
        self._seq = itertools.count()
        self._timers: list[tuple[int, int, FakeTimer]] = []

    def time(self) -> float:
        return self._wall + self._now / _NS

    def monotonic(self) -> float:
        return self._now / _NS

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> FakeTimer:
        timer = FakeTimer(self._now + _ns(delay), callback, args)
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
        target = self._now + _ns(seconds)
        await _settle()
        while self._timers and self._timers[0][0] <= target:
            when, _, timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._now = max(self._now, when)
            timer.callback(*timer.args)
            await _settle()
        self._now = max(self._now, target)
        await _settle()

    async def run_until_done(self, aw: Awaitable[T], step: float = 0.01, limit: float = 60.0) -> T:
        """Await `aw` while moving time on in `step`s (its timers fire as they fall due)."""
        task = asyncio.ensure_future(aw)
        moved = 0.0
        while not task.done():
            assert moved < limit, f"not done after {limit} s of fake time"
            await self.advance(step)
            moved += step
        return task.result()


async def _settle() -> None:
    for _ in range(_SETTLE_TURNS):
        await asyncio.sleep(0)
