"""Waiting on metadata-store watches with a bound (auto-recovery's loops wake on a change or a timer)."""

from __future__ import annotations

import asyncio

from store.meta.api import Watcher, WatchEvent


def event_watch() -> tuple[asyncio.Event, Watcher]:
    """An event and a one-shot watcher that sets it."""
    ev = asyncio.Event()

    def wake(_: WatchEvent) -> None:
        ev.set()

    return ev, wake


async def wait_event(ev: asyncio.Event, timeout: float) -> None:  # noqa: ASYNC109
    """Until `ev` is set or `timeout` seconds have passed."""
    if ev.is_set():
        return
    try:
        await asyncio.wait_for(ev.wait(), max(timeout, 0.0))
    except TimeoutError:
        pass
