"""How fast a scan task reads: a fixed bound (`quire.maxBytesPerSecond`, Pace) and one that
adapts to leave part of the machine's CPU idle (`quire.cpuHeadroom`, Headroom).

Both matter only where Spark's executors share CPUs with Quire's servers (a standalone, or
executors on the bookies' machines). There a scan that takes every idle cycle, even under
SCHED_IDLE, stretches the write path: a CPU kept busy by batch work does not take over the
server's waiting threads as an idle one does (README, "Spark"). In bench 43 a 20 MB/s producer's
p99 went x1.91 of alone during unbounded direct scans (81 MB/s read, the CPU 98% busy) and x1.26
during scans bounded to 10 MiB/s a task (21 MB/s, 85% busy). A fixed bound also slows a scan
on a quiet machine; Headroom instead lowers the rate only while the machine is busier than
1 - headroom, and raises it again once it is not. In bench 45, at 0.15: x1.20 beside the producer
at 45 MB/s (x1.40 at 22 MB/s for the fixed bound there), but 173 MB/s alone against 286
unbounded, its own use cutting it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

STAT = "/proc/stat"


class Pace:
    """At most `rate` bytes a second on average (`quire.maxBytesPerSecond`): after each read, wait
    until the bytes read so far are due."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.total = 0
        self.t0 = time.monotonic()

    async def read(self, n: int) -> None:
        self.total += n
        ahead = self.t0 + self.total / self.rate - time.monotonic()
        if ahead > 0:
            await asyncio.sleep(ahead)


def machine_cpu() -> tuple[int, int] | None:
    """(busy, total) ticks of all the machine's CPUs from /proc/stat, the host's stealing left
    out of both; None where there is no /proc/stat (not Linux)."""
    try:
        with open(STAT) as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal (guest time is already in user and nice)
    total = sum(fields[:8])
    idle = fields[3] + fields[4]
    steal = fields[7] if len(fields) > 7 else 0
    return total - idle - steal, total - steal


class Headroom:
    """Read as fast as leaves `share` of the machine's CPU idle (`quire.cpuHeadroom`).

    Every `interval` seconds it looks how busy the machine was: busier than 1 - share, the rate
    is cut to `CUT` times the lower of itself and what the task read in that interval (at least
    FLOOR bytes a second); not, a bounded rate grows by STEP bytes a second a look, and is
    dropped (unbounded again) once above CEILING. Cut fast, grown slowly (as TCP's congestion
    window): a rate that grew back fast would spend every other look at full speed, in bursts that
    the producer's p99 shows (bench 44: x1.79 at 38 MB/s with multiplicative growth, against x1.21
    at 22 MB/s for a fixed bound).

    One per Python worker process and share (`shared`), so the rate one slice learnt carries on
    to the next slice the worker reads; `start` begins a slice's pacing afresh (a pace from an
    earlier slice would have fallen behind, and let the new slice burst to catch up)."""

    CUT = 0.7
    STEP = 1 << 20
    FLOOR = 1 << 20
    CEILING = 1 << 30
    _shared: dict[float, Headroom] = {}

    def __init__(self, share: float, *, interval: float = 0.25,
                 sample: Callable[[], tuple[int, int] | None] = machine_cpu) -> None:
        self.cap = 1.0 - share
        self.interval = interval
        self.sample = sample
        self.rate: float | None = None  # bytes a second; None: unbounded
        self.pace: Pace | None = None
        self.last = sample()
        self.t = time.monotonic()
        self.bytes = 0

    @classmethod
    def shared(cls, share: float) -> Headroom:
        """This process's Headroom for `share`, started for a new slice."""
        room = cls._shared.get(share)
        if room is None:
            return cls._shared.setdefault(share, cls(share))  # new: started as made
        room.start()
        return room

    def start(self) -> None:
        """A new slice: its pace and its first look start now, at the rate learnt so far."""
        self.pace = Pace(self.rate) if self.rate is not None else None
        self.last, self.t, self.bytes = self.sample(), time.monotonic(), 0

    def adjust(self, busy: float, read_rate: float) -> float | None:
        """The rate after one look: `busy` the machine's busy share since the last, `read_rate`
        the bytes a second the task read meanwhile."""
        if busy > self.cap:
            base = read_rate if self.rate is None else min(self.rate, read_rate)
            return max(self.FLOOR, base * self.CUT)
        if self.rate is None:
            return None
        grown = self.rate + self.STEP
        return None if grown > self.CEILING else grown

    async def read(self, n: int) -> None:
        self.bytes += n
        now = time.monotonic()
        if now - self.t >= self.interval:
            cur = self.sample()
            if cur is not None and self.last is not None and cur[1] > self.last[1]:
                busy = (cur[0] - self.last[0]) / (cur[1] - self.last[1])
                rate = self.adjust(busy, self.bytes / (now - self.t))
                if rate != self.rate:
                    self.rate = rate
                    self.pace = Pace(rate) if rate is not None else None
            self.last, self.t, self.bytes = cur, now, 0
        if self.pace is not None:
            await self.pace.read(n)
