"""How fast a scan task reads: a fixed bound (`quire.maxBytesPerSecond`, Pace) and one that
adapts to leave part of the machine's CPU idle for other work (`quire.cpuHeadroom`, Headroom;
on by default where a task shares a machine with a bookie: pipeline/source.py).

Both matter only where Spark's executors share CPUs with Quire's servers (a standalone, or
executors on the bookies' machines). There a scan that takes every idle cycle, even under
SCHED_IDLE, stretches the write path: a CPU kept busy by batch work does not take over the
server's waiting threads as an idle one does (README, "Spark"). In bench 43 a 20 MB/s producer's
p99 went x1.91 of alone during unbounded direct scans (81 MB/s read, the CPU 98% busy) and x1.26
during scans bounded to 10 MiB/s a task (21 MB/s, 85% busy). A fixed bound also slows a scan
on a quiet machine; Headroom instead lowers the rate only while the machine is busier than
1 - headroom with other work than the scan's, and raises it again once it is not.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

PROC = "/proc"
STAT = "/proc/stat"
DEFAULT_HEADROOM = 0.25  # quire.cpuHeadroom where a task runs beside a bookie and the option is not set


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


def _proc_stat(pid: int) -> tuple[str, int, int, int] | None:
    """(command name, parent's pid, CPU ticks it ran, ticks its reaped children ran) of a process."""
    try:
        with open(f"{PROC}/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    head, _, tail = text.rpartition(")")  # the name may hold spaces and parentheses
    fields = tail.split()
    try:  # after the name: state ppid ... utime(11) stime cutime cstime
        return head.partition("(")[2], int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])
    except (IndexError, ValueError):
        return None


def _children(pid: int) -> list[int]:
    try:
        with open(f"{PROC}/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except (OSError, ValueError):
        return []


def executor_cpu(pid: int | None = None) -> int | None:
    """CPU ticks this Spark executor has run: its JVM, and the PySpark daemon that forked this
    worker with all its workers, live or gone (a worker gone between the daemon's and its own
    reading counts for neither: a dip of a look at most). None outside a Spark worker (no java
    parent or grandparent) or without /proc. `pid`: the worker's, this process's by default."""
    me = _proc_stat(os.getpid() if pid is None else pid)
    parent = _proc_stat(me[1]) if me is not None else None
    if me is None or parent is None:
        return None
    if parent[0] == "java":  # no daemon (spark.python.use.daemon=false): this worker alone
        return parent[2] + parent[3] + me[2]
    jvm = _proc_stat(parent[1])
    if jvm is None or jvm[0] != "java":
        return None
    workers = (_proc_stat(c) for c in _children(me[1]))
    return jvm[2] + jvm[3] + parent[2] + parent[3] + sum(w[2] for w in workers if w is not None)


def cpu_sample() -> tuple[int, int, int] | None:
    """(busy, total) ticks of the machine (machine_cpu) and the busy ticks of this executor
    (executor_cpu; 0 when unknown, so all the machine's work counts as others')."""
    machine = machine_cpu()
    if machine is None:
        return None
    return machine[0], machine[1], executor_cpu() or 0


class Headroom:
    """Read as fast as leaves `share` of the machine's CPU idle for other work
    (`quire.cpuHeadroom`).

    Every `interval` seconds it looks how busy the machine was, and moves the rate in proportion
    to how far that was from the cap of 1 - share: over it, the rate is cut to the lower of itself
    and what the task read in that interval, times 1 - DOWN x (busy - cap), at most by CUT (and to
    at least FLOOR bytes a second); under it, a bounded rate grows by UP x (cap - busy) of itself,
    at most by GROW, and is dropped (unbounded again) once above CEILING. Only while work other
    than this executor's (cpu_sample) keeps at least OTHERS of the machine busy: else there is no
    one to leave the CPU to, the machine is busy with the scan itself (and the bookies serving it:
    up to 15% of the bench's 2 vCPUs), and the rate grows by GROW a look. Without that gate a scan
    alone was cut for its own use: 202 MB/s alone at a share of 0.25 in bench 47, against 390
    unpaced and 240 for Spark's Kafka source from Apache Kafka. A fixed cut and a fixed step
    (bench 45) ran the rate in a sawtooth under the cap; a rate grown back by a fixed factor
    (bench 44) spent every other look at full speed, in bursts that the producer's p99 shows.

    One per Python worker process and share (`shared`), so the rate one slice learnt carries on
    to the next slice the worker reads; `start` begins a slice's pacing afresh (a pace from an
    earlier slice would have fallen behind, and let the new slice burst to catch up)."""

    DOWN = 3.0
    CUT = 0.5
    UP = 1.0
    GROW = 1.25
    FLOOR = 1 << 20
    CEILING = 1 << 30
    OTHERS = 0.3
    _shared: dict[float, Headroom] = {}

    def __init__(self, share: float, *, interval: float = 0.25,
                 sample: Callable[[], tuple[int, int, int] | None] = cpu_sample) -> None:
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

    def adjust(self, busy: float, others: float, read_rate: float) -> float | None:
        """The rate after one look: `busy` the machine's busy share since the last, `others` the
        share of it that was not this executor's, `read_rate` the bytes a second the task read
        meanwhile."""
        over = busy - self.cap
        crowded = others >= self.OTHERS  # else no one to leave the CPU to: the scan's own work
        if over > 0 and crowded:
            base = read_rate if self.rate is None else min(self.rate, read_rate)
            return max(self.FLOOR, base * max(self.CUT, 1.0 - self.DOWN * over))
        if self.rate is None:
            return None
        grown = self.rate * (min(self.GROW, 1.0 - self.UP * over) if crowded else self.GROW)
        return None if grown > self.CEILING else grown

    async def read(self, n: int) -> None:
        self.bytes += n
        now = time.monotonic()
        if now - self.t >= self.interval:
            cur = self.sample()
            if cur is not None and self.last is not None and cur[1] > self.last[1]:
                total = cur[1] - self.last[1]
                busy = (cur[0] - self.last[0]) / total
                others = max(0.0, busy - (cur[2] - self.last[2]) / total)
                rate = self.adjust(busy, others, self.bytes / (now - self.t))
                if rate != self.rate:
                    self.rate = rate
                    self.pace = Pace(rate) if rate is not None else None
            self.last, self.t, self.bytes = cur, now, 0
        if self.pace is not None:
            await self.pace.read(n)
