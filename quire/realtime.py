"""Real-time scheduling for a server process (quire.realtime.priority, off by default): every
thread of a gateway, bookie or standalone under SCHED_RR, for hosts where the servers share
their CPUs with batch work (a Spark job on the same machine, as bench/spark_scan.py runs one).

Why: a produce goes through several processes in turn (client, gateway, bookies, and the block
layer's kworker for each journal fdatasync), and each hop is a wake-up. On an idle CPU a woken
thread runs at once. With every CPU kept busy, even by work under SCHED_IDLE, `perf sched`
traces showed woken gateway and bookie threads, and the kworker, waiting on the CPU running that
work until its next scheduler tick (4 ms at HZ=250); the journal's fdatasyncs over 5 ms went
from under 0.1% of them to 0.5-1.2%. A real-time thread that wakes takes a CPU from normal or
idle-class work at once. With two SCHED_IDLE busy loops beside a 20 MB/s producer (12 s windows,
medians of the windows' p99s, alone then beside the loops, two runs): normal 7.5 -> 22.5 ms and
9.0 -> 22.5 ms; nice -10: 16 ms; a 0.1 ms EEVDF slice: 19.5 ms; SCHED_RR on the event-loop
threads only: 17 ms (the others hold the GIL in turn); SCHED_RR on every thread: 8.5 and 13 ms.

Every thread, then: the ones there now, and the ones started later, which inherit the policy
(bookie children of a standalone too, which also get the setting as a flag). All but a bookie's
background send threads, the scans' work, which step back down to SCHED_OTHER at each send:
real-time, they held the CPU from the adds (store/bookie/background_reads.py). The kernel's
real-time throttling (kernel.sched_rt_runtime_us, 95% by default) is what then leaves other
processes a share of a CPU that a saturated server keeps busy."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from quire.settings import SettingsError

log = logging.getLogger(__name__)

KEY = "quire.realtime.priority"
FLAG = "--realtime-priority"


def apply_realtime(priority: int) -> bool:
    """Every thread of this process under SCHED_RR at `priority` (1-99); 0 leaves the process as
    it is. True if applied. A priority the kernel refuses (no CAP_SYS_NICE, an RLIMIT_RTPRIO
    below it) or a platform without SCHED_RR is a SettingsError naming the setting."""
    if priority == 0:
        return False
    if not hasattr(os, "SCHED_RR") or not hasattr(os, "sched_setscheduler"):
        raise SettingsError(f"{KEY} ({FLAG}) {priority}: this platform has no SCHED_RR")
    top = os.sched_get_priority_max(os.SCHED_RR)
    if not 1 <= priority <= top:
        raise SettingsError(f"{KEY} ({FLAG}) {priority}: must be 0 (off) or 1-{top}")
    param = os.sched_param(priority)
    try:
        os.sched_setscheduler(0, os.SCHED_RR, param)  # this thread first: a refusal changes nothing
        for tid in _threads():
            try:
                os.sched_setscheduler(tid, os.SCHED_RR, param)
            except ProcessLookupError:
                pass  # ended meanwhile
    except PermissionError:
        raise SettingsError(f"{KEY} ({FLAG}) {priority}: refused by the kernel (needs CAP_SYS_NICE, "
                            f"or an RLIMIT_RTPRIO of at least {priority}: ulimit -r)") from None
    log.info("every thread under SCHED_RR at priority %d (%s)", priority, KEY)
    return True


def _threads() -> list[int]:
    try:
        return [int(t.name) for t in Path("/proc/self/task").iterdir()]
    except OSError:
        return []  # no /proc: the calling thread only, done already
