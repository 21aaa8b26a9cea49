"""Running a process's event loop (on uvloop when installed), what stops a long-running
process (ProcessStop), stopping background tasks (cancel them, then wait until each has ended),
awaiting with a time limit (within) and leaving a future's outcome to nobody (retrieve_outcome).

At the root of `store/` (beside clock.py and retry.py) so that store/ and every layer above it
(the bookie and gateway processes alike) run and stop their loops the same way."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from store.meta.api import MetaStore

T = TypeVar("T")
SESSION_LOST_EXIT = 3  # the exit code of a process that stopped because its session was lost


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
    if isinstance(tasks, asyncio.Future):
        # A lone task is iterable too (Future.__iter__ is its __await__): iterating it outside an
        # await raises "await wasn't used with future" and leaves it running.
        raise TypeError("cancel_and_wait takes an iterable of tasks, not one task")
    pending = [t for t in tasks if t is not None]
    for t in pending:
        t.cancel()
    for t in pending:
        with contextlib.suppress(asyncio.CancelledError):
            await t


async def within(aw: Awaitable[T], seconds: float | None) -> T:
    """`await aw`, or TimeoutError once `seconds` have passed (None: no limit), `aw`
    then cancelled: asyncio.wait_for as 3.12 has it, for every caller here. 3.11's wait_for
    runs `aw` as a task of its own; cancelled from outside it leaves that task's outcome
    unretrieved (logged as never retrieved), and if the task ended at the same moment it returns
    the result and swallows the cancellation. Under asyncio.timeout `aw` runs in the caller's
    task, so there is no second task to lose."""
    async with asyncio.timeout(seconds):
        return await aw


def retrieve_outcome(fut: asyncio.Future[Any]) -> None:
    """A done callback for a future whose outcome nobody awaits (a replica's read that lost the
    race or was cancelled while its connection failed, a confirmation only another answers): its
    exception, if any, counts as retrieved, so asyncio does not log it as never retrieved."""
    if not fut.cancelled():
        fut.exception()


class ProcessStop:
    """What ends a long-running process (gateway, bookie, recovery worker): `event`, set by
    SIGINT/SIGTERM or by the loss of the process's metadata session. Without a session its
    ephemeral nodes (registration, leases, locks) are gone, so it cannot be trusted as alive and
    leaves with SESSION_LOST_EXIT for a supervisor to restart it."""

    def __init__(self, event: asyncio.Event | None = None) -> None:
        """`event`: the caller's, which it sets to stop the process (no signal handlers are then
        installed); None: a new one, set on SIGINT or SIGTERM where the loop can handle signals
        (not off the main thread)."""
        self.session_lost = False
        if event is None:
            event = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, event.set)
        self.event = event

    def on_session_lost(self, meta: MetaStore, logger: logging.Logger, message: str) -> None:
        """Stop when `meta`'s session is lost, logging `message` as an error."""

        def lost() -> None:
            self.session_lost = True
            logger.error("%s", message)
            self.event.set()

        meta.add_session_listener(lost)

    @property
    def exit_code(self) -> int:
        return SESSION_LOST_EXIT if self.session_lost else 0
