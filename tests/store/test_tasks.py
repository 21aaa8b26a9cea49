"""store.tasks.cancel_and_wait: every task cancelled and awaited, a lone task refused."""

from __future__ import annotations

import asyncio

import pytest

from store.tasks import cancel_and_wait


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
