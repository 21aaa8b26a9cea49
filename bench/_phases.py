"""A producer's latency alone and under loads, in windows interleaved in one run: the phased
producer (bench/PhasedProducer.java), the loads it is measured under (Spark scans, busy loops),
each run in a thread of its own for its window and stopped at the window's end, and the
interleaving with what the machine did in each window."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from bench._machine import PAGE, cpu_ticks, memory_stalls, scheduling_between, set_realtime, thread_scheduling
from bench.perf_tools import PERF_JVM_OPTS
from compat_tests.support import kafka_dist

PHASED_PRODUCER = Path(__file__).with_name("PhasedProducer.java")
ALONE = "alone"
# A window in which the host stole more of the CPU than this counts to no steal-free p99: in
# bench 33 the five windows alone with 17-39% stolen had p99s of 25-92 ms, the others 7-10 ms.
STOLEN_MAX = 0.05
MIN_CLEAN = 3  # steal-free windows a phase needs for its steal-free p99 (else nan)
STOPPING = "stopping a load"  # records sent while a window's load winds down count to no measured phase


class PhasedProducer:
    """bench/PhasedProducer.java at a fixed rate (acks=all, the client's defaults otherwise, as
    kafka-producer-perf-test), one JVM for a whole comparison; `phase(name)` makes the records
    sent from then on count to `name`, once `settle_s` has passed (the records of the switch
    itself, whose latency belongs to both sides, count to neither)."""

    def __init__(self, bootstrap: str, topic: str, mbps: float, record: int, settle_s: float) -> None:
        rps = int(mbps * (1 << 20) / record)
        cmd = kafka_dist.java_command(str(PHASED_PRODUCER), [bootstrap, topic, str(rps), str(record),
                                                              str(int(settle_s * 1000))], jvm_opts=PERF_JVM_OPTS)
        # stderr to a file: the client's log lines over a long run must never fill a pipe nobody reads
        self.stderr = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True)

    def _stderr_tail(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()[-3000:]

    def phase(self, name: str) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"PhasedProducer exited {self.proc.returncode}: {self._stderr_tail()}")
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"phase {name}\n")
        self.proc.stdin.flush()

    def stop(self) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
        """Flush, close; (the windows in order, each phase's windows together)."""
        out, _ = self.proc.communicate("stop\n", timeout=120)
        events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        if self.proc.returncode != 0 or not events or events[-1]["event"] != "done":
            raise RuntimeError(f"PhasedProducer exited {self.proc.returncode}:\n{out[-2000:]}\n{self._stderr_tail()}")
        if events[-1]["errors"]:
            raise RuntimeError(f"PhasedProducer: {events[-1]['errors']} records failed")
        return ([e for e in events if e["event"] == "window"],
                {e["phase"]: e for e in events if e["event"] == "phase"})


class Load(Protocol):
    def run(self, stop: threading.Event) -> float:
        """Load the machine until `stop` is set; MiB got through (0 for a load that reads nothing)."""

    def cancel(self) -> None:
        """Make a run under way end soon (called, again and again, once `stop` is set)."""


_groups = itertools.count()


class SparkScans:
    """One Spark job (`scan_once`, over `mib` MiB) again and again; at the window's end the job
    under way is cancelled. What it got through: with `served` (MiB the servers have sent the
    scans so far, a counter), the counter's rise from the window's start to its end (the first
    cancel); without, the whole jobs done, and the share of the cancelled job's first stage's
    tasks that finished (a task that outlasts the window then counts nothing: a bounded scan's
    128 MiB task at 10 MiB/s does)."""

    def __init__(self, spark: Any, scan_once: Callable[[], object], mib: float,
                 served: Callable[[], float] | None = None) -> None:
        self.spark, self.scan_once, self.mib, self.served = spark, scan_once, mib, served
        self.group = f"bench-load-{next(_groups)}"
        self._served_at_end: float | None = None

    def run(self, stop: threading.Event) -> float:
        sc = self.spark.sparkContext
        sc.setJobGroup(self.group, "a load beside the producer", interruptOnCancel=True)
        self._served_at_end = None
        start = self.served() if self.served is not None else 0.0
        done = 0.0
        while not stop.is_set():
            try:
                self.scan_once()
                done += 1
            except Exception:
                if not stop.is_set():
                    raise
                if self.served is None:  # with a counter, the tasks' progress is not needed
                    done += self._cancelled_share()
        if self.served is not None:
            end = self._served_at_end if self._served_at_end is not None else self.served()
            return end - start
        return done * self.mib

    def cancel(self) -> None:
        if self.served is not None and self._served_at_end is None:
            self._served_at_end = self.served()  # the window's end: the first cancel comes at once
        self.spark.sparkContext.cancelJobGroup(self.group)

    def _cancelled_share(self) -> float:
        tracker = self.spark.sparkContext.statusTracker()
        jobs = tracker.getJobIdsForGroup(self.group)
        info = tracker.getJobInfo(max(jobs)) if jobs else None
        stages = [s for s in (tracker.getStageInfo(i) for i in (info.stageIds if info else [])) if s is not None]
        if not stages:
            return 0.0
        first = min(stages, key=lambda s: s.stageId)
        return float(first.numCompletedTasks / max(first.numTasks, 1))


# Spins until its parent is gone (a bench killed before its finally: bench 28 ran every phase
# beside two loops left over from a bench killed just before it).
_SPIN = "import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n    for _ in range(100_000): pass"


class BusyLoops:
    """A stand-in for a scan's CPU use without its reads: n processes spinning under Spark's
    scheduling policy for the whole window."""

    def __init__(self, n: int) -> None:
        self.n = n

    def run(self, stop: threading.Event) -> float:
        procs = [subprocess.Popen([sys.executable, "-c", _SPIN]) for _ in range(self.n)]
        try:
            for p in procs:  # not preexec_fn: this runs beside other threads (Spark's py4j among them)
                os.sched_setscheduler(p.pid, os.SCHED_IDLE, os.sched_param(0))
            stop.wait()
        finally:
            for p in procs:
                p.kill()
                p.wait()
        return 0.0

    def cancel(self) -> None:
        pass


class Nothing:
    """No load: a second window alone under a load's name, each round, so that the run shows how
    far two windows alike differ (the spread a load's ratio is to be read against)."""

    def run(self, stop: threading.Event) -> float:
        stop.wait()
        return 0.0

    def cancel(self) -> None:
        pass


class Realtime:
    """A load run with every thread of the processes `pids()` names under SCHED_RR for its
    window, back under SCHED_OTHER at its end: a control that shows how much of a producer's
    latency under the load is its servers' threads waiting for a CPU. A waking real-time thread
    goes at once to the CPU running the lowest class of work (here Spark's SCHED_IDLE), and one
    left waiting is pushed there; a waking SCHED_OTHER thread can wait behind another on its
    own CPU while the other runs SCHED_IDLE work."""

    def __init__(self, inner: Load, pids: Callable[[], list[int]]) -> None:
        self.inner, self.pids = inner, pids

    def run(self, stop: threading.Event) -> float:
        set_realtime(self.pids(), True)
        try:
            return self.inner.run(stop)
        finally:
            set_realtime(self.pids(), False)  # threads started in the window among them

    def cancel(self) -> None:
        self.inner.cancel()


class _Runner:
    """A load in a thread of its own for one window."""

    def __init__(self, load: Load) -> None:
        self.load, self.stop = load, threading.Event()
        self.mib = 0.0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="bench-load", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.mib = self.load.run(self.stop)
        except BaseException as e:  # re-raised in the bench's thread by finish()
            self.error = e

    def alive(self) -> bool:
        return self.thread.is_alive()

    def finish(self) -> float:
        self.stop.set()
        while self.thread.is_alive():
            self.load.cancel()  # again: a job started just as the window ended is cancelled too
            self.thread.join(0.5)
        if self.error is not None:
            raise self.error
        return self.mib


def add_window_args(ap: argparse.ArgumentParser, rounds: int) -> None:
    """The options interleaved_p99 reads: the producer's rate and the windows' shape."""
    ap.add_argument("--producer-mbps", type=float, default=20.0)
    ap.add_argument("--window-s", type=float, default=12.0,
                    help="seconds of each phase window (alone, or under one load)")
    ap.add_argument("--rounds", type=int, default=rounds,
                    help="rounds of windows (alone, then under each load), each rotated one phase on")
    ap.add_argument("--settle-s", type=float, default=3.0,
                    help="seconds at the start of each window whose records count to no phase")
    ap.add_argument("--producer-warmup-s", type=float, default=30.0,
                    help="seconds the producer runs before the first window (its JVM's JIT compiling)")
    ap.add_argument("--max-stolen", type=float, default=STOLEN_MAX,
                    help="share of the CPU the host may steal in a window that counts to the steal-free p99s")


def interleaved_p99(bootstrap: str, args: argparse.Namespace, record: int, loads: dict[str, Load],
                    servers: Callable[[], list[int]] | None = None) -> dict[str, dict[str, Any]]:
    """The producer's latency alone and during each load, in one run of PhasedProducer: after
    --producer-warmup-s, --rounds rounds of a window alone then a window under each load in
    turn, each round rotated one phase on; a load runs in a thread of its own from its window's
    start and is stopped at its end (a scan under way cancelled), so every window lasts
    --window-s and a burst of the host's stealing falls on the phases alike. Prints each phase's
    p99 per window with the share of the machine's CPU the host stole in it, and over all its
    windows, with the share of the CPU that was busy, the memory stalls, what kswapd reclaimed,
    DAMON paged out and the disks read, and per window the processes and threads started
    (Spark's Python workers among them); returns each phase's (all windows) numbers, with
    "window_p99_ms", the median of its windows' p99s, "steal_free_p99_ms", the same over the
    windows in which the host stole at most --max-stolen of the CPU (nan with fewer than
    MIN_CLEAN of them), and "load_mbps", what the load got through. With `servers` (the server's
    processes, asked for at each window's ends), also how their threads were scheduled in each
    phase: "run_s_per_s", CPU seconds run a second, "wait_s_per_s", seconds spent runnable but
    not running a second (summed over threads: the scheduling delay the server's requests met),
    and "migrations_per_s", moves between CPUs a second."""
    prod = PhasedProducer(bootstrap, "load", args.producer_mbps, record, args.settle_s)
    cpu: dict[str, list[int]] = {}
    stalls: dict[str, list[int]] = {}
    memory: dict[str, list[str]] = {}  # per window: kswapd's and DAMON's reclaim, disk reads, processes started
    stolen_in: dict[str, list[float]] = {}  # per window: the share of the CPU the host stole
    runs: dict[str, list[float]] = {}  # MiB the load got through, seconds
    sched: dict[str, list[int]] = {}  # the servers' threads: ns run, ns waited runnable, migrations
    done = False
    try:
        prod.phase("warm-up")
        time.sleep(args.producer_warmup_s)  # the JVM's JIT compiling (see spark_scan's module doc)
        phases: list[tuple[str, Load | None]] = [(ALONE, None), *loads.items()]
        for r in range(args.rounds):
            # Rotated: a drift over the run (the memory settling after the page-cache fill,
            # the store growing) then falls on every phase alike, not most on the first.
            k = r % len(phases)
            for name, load in phases[k:] + phases[:k]:
                prod.phase(name)
                s0 = thread_scheduling(servers()) if servers is not None else {}
                c0, m0, t0 = cpu_ticks(), memory_stalls(), time.monotonic()
                runner = _Runner(load) if load is not None else None
                while time.monotonic() < t0 + args.window_s and (runner is None or runner.alive()):
                    time.sleep(min(0.5, max(0.0, t0 + args.window_s - time.monotonic())))
                c1, m1, seconds = cpu_ticks(), memory_stalls(), time.monotonic() - t0
                if servers is not None:
                    sched[name] = [a + b for a, b in zip(sched.get(name, [0, 0, 0]),
                                                         scheduling_between(s0, thread_scheduling(servers())))]
                prod.phase(STOPPING)
                mib = runner.finish() if runner is not None else 0.0
                acc = runs.setdefault(name, [0.0, 0.0])
                acc[0] += mib
                acc[1] += seconds
                memory.setdefault(name, []).append(
                    f"{(m1[2] - m0[2]) * PAGE >> 20}/{(m1[6] - m0[6]) >> 20}/{(m1[3] - m0[3]) >> 10}/{m1[5] - m0[5]}")
                stolen_in.setdefault(name, []).append((c1[1] - c0[1]) / max(c1[2] - c0[2], 1))
                for total, now, before in ((cpu, c1, c0), (stalls, m1, m0)):
                    total[name] = [a + b - c for a, b, c in zip(total.get(name, [0] * len(now)), now, before)]
        prod.phase("end")
        done = True
    finally:
        if not done:
            prod.proc.kill()
    windows, by_phase = prod.stop()
    for name, ph in by_phase.items():
        if name not in cpu:
            continue
        busy, stolen, total_ticks = cpu[name]
        ph["busy"], ph["stolen"] = busy / max(total_ticks, 1), stolen / max(total_ticks, 1)
        ph["load_mbps"] = runs[name][0] / runs[name][1]
        mine = [w for w in windows if w["phase"] == name]
        # The typical window's p99: one burst of the host's stealing (or of anything else that
        # is not the load's doing) moves the p99 over all windows, and not this.
        ph["window_p99_ms"] = statistics.median(w["p99_ms"] for w in mine)
        # The same over the windows in which the host stole little: its stealing is not the
        # load's doing, and a burst of it on the windows alone makes a load look cheap.
        with_stolen = list(zip(mine, stolen_in[name]))  # each window with the CPU the host stole in it
        clean = [w["p99_ms"] for w, s in with_stolen if s <= args.max_stolen]
        ph["clean_windows"] = len(clean)
        ph["steal_free_p99_ms"] = statistics.median(clean) if len(clean) >= MIN_CLEAN else float("nan")
        per_window = ", ".join(f"{w['p99_ms']} ({s:.0%})" for w, s in with_stolen)
        reclaims, compactions, stolen_pages, read_kib, ticks, _, damon = stalls[name]
        seconds, hz = runs[name][1], os.sysconf("SC_CLK_TCK")
        scheduled = ""
        if name in sched:
            ran, waited, moved = sched[name]
            ph["run_s_per_s"], ph["wait_s_per_s"] = ran / 1e9 / seconds, waited / 1e9 / seconds
            ph["migrations_per_s"] = moved / seconds
            scheduled = (f"; the server's threads ran {ph['run_s_per_s']:.2f} CPU s a second, waited runnable "
                         f"{ph['wait_s_per_s']:.2f} s a second and moved between CPUs {ph['migrations_per_s']:.0f} "
                         f"times a second")
        print(f"  {name}: p99 {ph['p99_ms']} ms over {ph['records']} records, median of the windows' p99s "
              f"{ph['window_p99_ms']} ms, over the {ph['clean_windows']} windows the host stole at most "
              f"{args.max_stolen:.0%} in {ph['steal_free_p99_ms']} ms (p99 in ms, and the CPU the host "
              f"stole, in each window: {per_window}; MiB kswapd reclaimed/MiB DAMON paged out/MiB read from disk/"
              f"processes and threads started in each: {', '.join(memory[name])}; p50 {ph['p50_ms']}, p99.9 {ph['p999_ms']}, "
              f"max {ph['max_ms']} ms); machine CPU {ph['busy']:.0%} busy, {ph['stolen']:.0%} stolen by the host; "
              f"{reclaims} direct reclaims, {compactions} direct compactions; kswapd reclaimed "
              f"{stolen_pages * PAGE / (1 << 20):.0f} MiB with {ticks / hz / seconds:.1%} of a CPU, DAMON "
              f"paged out {damon >> 20} MiB; "
              f"{read_kib / 1024 / seconds:.0f} MiB/s read from disk{scheduled}", flush=True)
    return {name: ph for name, ph in by_phase.items() if name in cpu}

