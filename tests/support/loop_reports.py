"""What an asyncio loop reports to its exception handler (a task's exception never retrieved, a
callback that raised), collected for a test to assert there was none."""

from __future__ import annotations

import asyncio
import gc
from typing import Any


class LoopReports:
    """Installs itself as the running loop's exception handler."""

    def __init__(self) -> None:
        self.reported: list[dict[str, Any]] = []
        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: self.reported.append(ctx))

    async def settled(self) -> list[tuple[str, str]]:
        """(message, future) of each report once finished tasks' own callbacks have run on the
        loop's next turns and the collector has freed what nobody holds (a never-retrieved
        exception is reported when its task is freed)."""
        for _ in range(3):
            await asyncio.sleep(0)
        gc.collect()
        return [(c["message"], repr(c.get("future"))) for c in self.reported]
