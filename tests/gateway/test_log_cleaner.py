"""The gateway's log cleaner stops at close: its task cancelled and ended (it raised
"await wasn't used with future" at every gateway shutdown and went on running)."""

from __future__ import annotations

from typing import Any

from gateway.config import CleanerSettings
from gateway.partition.cleaner import LogCleaner


class _Log:
    """A partition log as the cleaner's loop sees it: a topic that is not compacted."""

    class topic:
        compacted = False


async def test_close_stops_the_cleaner_task() -> None:
    cleaner = LogCleaner(CleanerSettings(backoff_ms=60_000))
    plog: Any = _Log()
    cleaner.attach(plog)
    task = cleaner._task
    assert task is not None and not task.done()
    await cleaner.close()
    assert task.cancelled() and cleaner._task is None
    await cleaner.close()  # a second close is a no-op
