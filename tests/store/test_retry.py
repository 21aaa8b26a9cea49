"""store.retry: exponential backoff with jitter, bounded by a deadline and attempts, on a clock
the test drives."""

from __future__ import annotations

import asyncio

import pytest

from store.retry import Backoff, Retry
from tests.support.clock import FakeClock


def test_delays_grow_to_the_cap_and_jitter_only_shortens() -> None:
    b = Backoff(initial=0.1, maximum=1.0, jitter=0.0)
    assert [b.delay(i) for i in range(6)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    assert b.delay(10_000) == 1.0  # no overflow on long-running loops
    j = Backoff(initial=1.0, maximum=1.0, jitter=0.5)
    samples = [j.delay(0) for _ in range(200)]
    assert all(0.5 <= d <= 1.0 for d in samples) and len(set(samples)) > 1


async def test_pause_sleeps_on_the_clock_until_the_deadline() -> None:
    clock = FakeClock()
    r = Retry(Backoff(initial=1.0, maximum=4.0, jitter=0.0), within=6.0, clock=clock)
    paused = asyncio.ensure_future(r.pause())
    await clock.advance(0.5)
    assert not paused.done()
    await clock.advance(0.5)
    assert await paused is True and clock.monotonic() == 1.0
    assert r.next_delay() == 2.0
    await clock.advance(2.0)
    assert r.next_delay() == 3.0  # 4 s wanted, cut at the deadline (6 s from the start)
    await clock.advance(3.0)
    assert r.remaining() == 0.0
    assert r.next_delay() is None and await r.pause() is False  # no sleep once past it


async def test_attempts_limit_and_reset() -> None:
    clock = FakeClock()
    r = Retry(Backoff(initial=1.0, maximum=8.0, jitter=0.0), attempts=2, clock=clock)
    assert r.next_delay() == 1.0 and r.next_delay() == 2.0
    assert r.next_delay() is None
    r.reset()
    assert r.next_delay() == 1.0  # after a success the backoff starts over
