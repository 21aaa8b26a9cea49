"""What the machine is doing, from /proc, for the benchmarks: its CPU (busy, stolen by the host),
memory stalls and reclaim, disk reads, processes started; the scheduling policies the benches run
their loads under."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


def proc_stats() -> Iterator[tuple[int, str, list[str]]]:
    """Each process on the machine now, from /proc/PID/stat: (pid, command name, the fields after
    the name: state is [0], parent pid [1], user and system ticks [11] and [12], those of reaped
    children [13] and [14])."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        name, _, rest = raw[raw.index("(") + 1 :].rpartition(")")
        yield int(d), name, rest.split()


def _proc_stat(key: str) -> list[int]:
    """The numbers of /proc/stat's line named `key` ("cpu": the whole machine's ticks)."""
    with open("/proc/stat") as f:
        for line in f:
            name, _, values = line.partition(" ")
            if name == key:
                return [int(v) for v in values.split()]
    return []


def cpu_ticks() -> tuple[int, int, int]:
    """(busy, stolen, total) CPU ticks of the machine so far, from /proc/stat (busy: neither idle
    nor waiting for I/O; stolen: on a virtual machine, CPU its host gave to someone else)."""
    ticks = _proc_stat("cpu")
    total = sum(ticks[:8])  # guest time is counted in user time already
    return total - ticks[3] - ticks[4], ticks[7], total


def thread_scheduling(pids: list[int]) -> dict[int, tuple[int, int, int]]:
    """Each thread of `pids` now: (ns run, ns waited runnable, migrations between CPUs) so far,
    from /proc/PID/task/TID/schedstat and sched. Waited runnable: woken or preempted, on a CPU's
    run queue but not running, the kernel's own account of the scheduling delays a latency-bound
    server feels."""
    out: dict[int, tuple[int, int, int]] = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # ended meanwhile
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    ran, waited, _ = f.read().split()
                with open(f"/proc/{pid}/task/{tid}/sched") as f:
                    moved = next((line.split()[-1] for line in f if line.startswith("se.nr_migrations")), "0")
            except (OSError, ValueError):
                continue  # ended meanwhile, or a kernel without these files
            out[int(tid)] = (int(ran), int(waited), int(moved))
    return out


def scheduling_between(before: dict[int, tuple[int, int, int]],
                       after: dict[int, tuple[int, int, int]]) -> tuple[int, int, int]:
    """(ns run, ns waited runnable, migrations) between two thread_scheduling snapshots, over the
    threads alive at the second (one started between them counts from its start; one that ended
    between them, its last stretch, is left out)."""
    run = wait = moved = 0
    for tid, (r, w, m) in after.items():
        r0, w0, m0 = before.get(tid, (0, 0, 0))
        run, wait, moved = run + r - r0, wait + w - w0, moved + m - m0
    return run, wait, moved


def memory_stalls() -> tuple[int, int, int, int, int, int, int]:
    """(direct reclaims, direct compactions, pages kswapd reclaimed, KiB read from disks, kswapd's
    CPU ticks, processes and threads started, bytes DAMON paged out) so far, from /proc and /sys:
    the times a process asking for memory had to free or compact it itself (a stall of
    milliseconds to hundreds), and the work kswapd, at normal priority, does to keep memory free
    once the page cache has filled it (a scan that reads what is not cached makes it reclaim as
    much as it reads)."""
    stats: dict[str, int] = {}
    with open("/proc/vmstat") as f:
        for line in f:
            name, _, value = line.partition(" ")
            stats[name] = int(value)
    return (sum(v for k, v in stats.items() if k.startswith("allocstall_")), stats.get("compact_stall", 0),
            stats.get("pgsteal_kswapd", 0), stats.get("pgpgin", 0), kswapd_ticks(), processes_started(),
            damon_paged_out())


def processes_started() -> int:
    """Processes (and threads) the machine has started since boot, from /proc/stat."""
    return (_proc_stat("processes") or [0])[0]


DAMON = Path("/sys/kernel/mm/damon/admin/kdamonds")


def _pageout_schemes(kdamond: Path) -> Iterator[Path]:
    """The schemes of one kdamond whose action is pageout."""
    for scheme in kdamond.glob("contexts/*/schemes/*"):
        try:
            if (scheme / "action").read_text().strip() == "pageout":
                yield scheme
        except OSError:
            continue


def damon_paged_out() -> int:
    """Bytes DAMON's pageout schemes have paged out so far (0 where none runs). A virtual machine
    may run one: this one pages out the page cache nobody touched for a minute, at up to 128 MiB
    a second, so the page cache never fills and kswapd has nothing to do."""
    total = 0
    for kdamond in DAMON.glob("[0-9]*"):
        try:
            (kdamond / "state").write_text("update_schemes_stats")  # the stats below are as of the last request
        except OSError:
            continue
        for scheme in _pageout_schemes(kdamond):
            try:
                total += int((scheme / "stats/sz_applied").read_text())
            except (OSError, ValueError):
                continue
    return total


def damon_pageout_running() -> bool:
    """Whether a DAMON pageout scheme runs (see damon_paged_out): then the page cache nobody
    touches never fills the memory."""
    for kdamond in DAMON.glob("[0-9]*"):
        try:
            if (kdamond / "state").read_text().strip() != "on":
                continue
        except OSError:
            continue
        if any(True for _ in _pageout_schemes(kdamond)):
            return True
    return False


def kswapd_ticks() -> int:
    """CPU ticks (user and system) of the kernel's kswapd threads so far."""
    return sum(int(f[11]) + int(f[12]) for _, name, f in proc_stats() if name.startswith("kswapd"))


def free_gib() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemFree:"):
                return int(line.split()[1]) / (1 << 20)
    return float("nan")


def idle_priority() -> None:
    """This thread, and the processes it starts from now on, run under SCHED_IDLE: only on CPU
    that nothing else wants (see the module doc)."""
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def normal_priority() -> None:
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def realtime_permitted() -> bool:
    """Whether this process may put threads under SCHED_RR (root, or an RLIMIT_RTPRIO above 0)."""
    return os.geteuid() == 0 or resource.getrlimit(resource.RLIMIT_RTPRIO)[0] > 0


def set_realtime(pids: list[int], on: bool) -> None:
    """Every thread of `pids` under SCHED_RR at the lowest real-time priority (on), or back under
    SCHED_OTHER: a bench's control, switched per window; quire.realtime.priority=1 runs the
    servers so from their start. A bookie's background send threads step back down to
    SCHED_OTHER at their next send, as they do under the setting."""
    policy, param = (os.SCHED_RR, os.sched_param(1)) if on else (os.SCHED_OTHER, os.sched_param(0))
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                os.sched_setscheduler(int(task.name), policy, param)
            except ProcessLookupError:
                pass  # the thread ended meanwhile
