"""Disk-full protection: a bookie whose data disk fills past a threshold turns read-only.

BookKeeper's diskUsageThreshold / diskUsageLwmThreshold: at or above `threshold` (fraction of
the disk used) the bookie refuses adds with READ_ONLY, so writers change ensemble and placement
(which reads the bookie's registration) skips it; it serves reads meanwhile. It turns writable
again once usage falls below `lwm`. The usage source is injectable (tests fake a full disk).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

UsageSource = Callable[[], float]  # fraction of the disk in use, 0.0 .. 1.0


@dataclass
class DiskConfig:
    threshold: float = 0.95  # quire.bookie.disk.usage.threshold
    lwm: float = 0.90  # quire.bookie.disk.usage.lwm
    check_interval_s: float = 10.0  # quire.bookie.disk.check.interval.s


def disk_usage_of(path: Path) -> UsageSource:
    def usage() -> float:
        u = shutil.disk_usage(path)
        return u.used / u.total if u.total else 0.0

    return usage


class DiskMonitor:
    """Polls the usage source; `on_change(read_only)` runs when the mode flips."""

    def __init__(self, usage: UsageSource, config: DiskConfig, on_change: Callable[[bool], None]) -> None:
        if not 0.0 < config.lwm <= config.threshold <= 1.0:
            raise ValueError(f"need 0 < lwm <= threshold <= 1, got lwm={config.lwm} threshold={config.threshold}")
        self.usage = usage
        self.config = config
        self.on_change = on_change
        self.read_only = False
        self.last_usage = 0.0
        self._task: asyncio.Task[None] | None = None

    def check(self) -> bool:
        """Read the usage once and flip the mode if a threshold was crossed; returns read_only."""
        self.last_usage = u = self.usage()
        if not self.read_only and u >= self.config.threshold:
            self.read_only = True
            log.warning("disk %.1f%% used (threshold %.1f%%): bookie is read-only", u * 100, self.config.threshold * 100,
                        extra={"fields": {"event": "bookie_read_only", "usage": u}})
            self.on_change(True)
        elif self.read_only and u < self.config.lwm:
            self.read_only = False
            log.warning("disk %.1f%% used (below %.1f%%): bookie is writable again", u * 100, self.config.lwm * 100,
                        extra={"fields": {"event": "bookie_writable", "usage": u}})
            self.on_change(False)
        return self.read_only

    def start(self) -> None:
        self.check()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.config.check_interval_s)
            try:
                self.check()
            except OSError as e:
                log.warning("cannot read disk usage: %s", e)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
