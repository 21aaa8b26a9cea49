"""Time, in one place: what every product timer reads and sleeps on.

Timers (group sessions and rebalances, ledger age rollover, writer watchdogs, retry backoff)
take a `Clock` instead of calling `time.monotonic()`, `asyncio.sleep()` or `loop.call_later()`
directly, so that a test can hand them a clock it advances itself (`tests/support/clock.py`)
and wait for the timer's effect instead of sleeping for a duration.

It sits at the root of `store/`, the lowest layer that does I/O: store/, coordinator/ and
gateway/ may all import it without a dependency pointing upward, and it imports nothing of
Kafka or of the layers above.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock", "TimerHandle"]


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def time(self) -> float:
        """Wall-clock seconds since the epoch (for timestamps, never for timeouts)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for deadlines and ages)."""
        ...

    async def sleep(self, seconds: float) -> None: ...

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> TimerHandle:
        """Run `callback(*args)` on the running loop after `delay` seconds."""
        ...


class SystemClock:
    """The real clock: `time`, and the running event loop's timers."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> TimerHandle:
        return asyncio.get_running_loop().call_later(delay, callback, *args)


SYSTEM_CLOCK: Clock = SystemClock()
