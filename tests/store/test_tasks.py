"""store.tasks: cancel_and_wait (every task cancelled and awaited, a lone task refused) and within
(a time limit that, cancelled, leaves no outcome unretrieved)."""

from __future__ import annotations

import asyncio

import pytest

from store.tasks import cancel_and_wait, within
from tests.support.loop_reports import LoopReports


async def test_cancels_and_waits_for_every_task() -> None:
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    tasks = [asyncio.create_task(forever()), asyncio.create_task(forever())]
    await started.wait()
    await cancel_and_wait([*tasks, None])
    assert all(t.cancelled() for t in tasks)


async def test_raises_what_a_task_ended_with_other_than_its_cancellation() -> None:
    started = asyncio.Event()

    async def refuses_to_stop() -> None:
        try:
            started.set()
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise ValueError("stop failed") from None

    task = asyncio.create_task(refuses_to_stop())
    await started.wait()  # cancelled before it ran, it would end as cancelled, not raise
    with pytest.raises(ValueError, match="stop failed"):
        await cancel_and_wait([task])


async def test_a_lone_task_is_refused_not_iterated() -> None:
    """A Task is iterable (its __await__): iterating it raised "await wasn't used with future"."""
    task = asyncio.create_task(asyncio.Event().wait())
    with pytest.raises(TypeError, match="iterable of tasks"):
        await cancel_and_wait(task)  # type: ignore[arg-type]
    await cancel_and_wait([task])
    assert task.cancelled()


async def test_within_gives_the_result_or_cancels_at_its_limit() -> None:
    assert await within(asyncio.sleep(0, "done"), 1.0) == "done"
    assert await within(asyncio.sleep(0, "no limit"), None) == "no limit"
    cancelled = asyncio.Event()

    async def slow() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError):
        await within(slow(), 0.01)
    assert cancelled.is_set()


async def test_within_cancelled_leaves_no_outcome_unretrieved() -> None:
    # A bookie read cancelled as its connection is lost ends with the connection's error. 3.11's
    # wait_for gave its caller CancelledError and left that error unretrieved in a task of its own.
    reports = LoopReports()
    started = asyncio.Event()

    async def read() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise ConnectionResetError("connection to bookie lost") from None

    caller = asyncio.ensure_future(within(read(), 60.0))
    await started.wait()
    caller.cancel()
    with pytest.raises(ConnectionResetError, match="connection to bookie lost"):
        await caller
    del caller
    assert await reports.settled() == []
