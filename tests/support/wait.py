"""Waiting in tests for a condition (never for a duration): poll until it holds or a deadline."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

WAIT = 30.0


async def eventually(check: Callable[[], bool | Awaitable[bool]], within: float = WAIT, what: str = "") -> None:
    """Until `check()` (sync or async) is true; AssertionError after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        ok = check()
        if inspect.isawaitable(ok):
            ok = await ok
        if ok:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition{' ' + what if what else ''} not met within {within} s")
        await asyncio.sleep(0.02)
