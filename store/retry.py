"""Retrying after a failure: exponential backoff with jitter, bounded by a deadline and/or a
number of attempts, sleeping on an injectable `Clock`.

Every loop that retries (LAC long polls, ensemble changes, partition opens, watch re-arms,
registry refreshes, bookie registration) takes its delays from here, with its own `Backoff`
constants named where it is used. It lives at the root of `store/`, beside `store/clock.py`,
so that store/ (which must not import Kafka or gateway code) and everything above it share it.

Why not `tenacity` or `backoff`: both are decorator/iterator wrappers around one call that
either succeeds or raises, while most loops here are long-running (a background task that
backs off after an error, resets after a success, and never ends); both read `time.monotonic`
and sleep on `asyncio.sleep` themselves, so a test cannot drive their deadline with a fake
clock; and the whole need is the ~40 lines below. A new dependency would cost more than it saves.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from store.clock import SYSTEM_CLOCK, Clock

__all__ = ["Backoff", "Retry"]


@dataclass(frozen=True)
class Backoff:
    """Delays `initial * multiplier**attempt`, capped at `maximum`, each shortened by a random
    fraction up to `jitter` so that processes failing together do not retry in step."""

    initial: float
    maximum: float
    multiplier: float = 2.0
    jitter: float = 0.2

    def delay(self, attempt: int) -> float:
        base = min(self.maximum, self.initial * self.multiplier ** min(attempt, 64))
        return base * (1.0 - self.jitter * random.random())


class Retry:
    """One retry loop's state: `await retry.pause()` after each failure sleeps the next delay
    (never past the deadline) and returns False, without sleeping, once the deadline has
    passed or the attempts are used up. `reset()` after a success starts over."""

    def __init__(
        self,
        backoff: Backoff,
        *,
        within: float | None = None,
        attempts: int | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.backoff = backoff
        self.clock = clock
        self.deadline = math.inf if within is None else clock.monotonic() + within
        self.max_attempts = attempts
        self.attempt = 0

    def remaining(self) -> float:
        return max(self.deadline - self.clock.monotonic(), 0.0)

    def next_delay(self) -> float | None:
        """The delay before the next attempt (counting it), or None when there is none."""
        left = self.remaining()
        if left <= 0 or (self.max_attempts is not None and self.attempt >= self.max_attempts):
            return None
        delay = min(self.backoff.delay(self.attempt), left)
        self.attempt += 1
        return delay

    async def pause(self) -> bool:
        delay = self.next_delay()
        if delay is None:
            return False
        await self.clock.sleep(delay)
        return True

    def reset(self) -> None:
        self.attempt = 0
