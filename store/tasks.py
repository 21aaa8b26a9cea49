"""Running a process's event loop (on uvloop when installed) and stopping background tasks
(cancel them, then wait until each has ended).

At the root of `store/` (beside clock.py and retry.py) so that store/ and every layer above it
(the bookie and gateway processes alike) run and stop their loops the same way."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run on uvloop when it is installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel every task (None: none to stop), then wait for each to end. A task's cancellation
    is swallowed; any other exception it ended with is raised."""
    pending = [t for t in tasks if t is not None]
    for t in pending:
        t.cancel()
    for t in pending:
        with contextlib.suppress(asyncio.CancelledError):
            await t
