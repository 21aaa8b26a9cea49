"""Full scans on Spark (local[2]) of one topic of 1 KiB records, in the same run:

  (a) `format("quire")`: tasks read ledgers straight from the bookies of `quire standalone
      --bookies 3` (no gateway on the read path)
  (b) Spark's own Kafka source (spark-sql-kafka-0-10) through the Quire gateway
  (c) Spark's own Kafka source from Apache Kafka 4.x (single node KRaft)

Each scan is a count and a hash aggregation over value length (one Spark job). Each path first
scans a small topic (Spark's first job of a kind pays for JIT, class loading and Python worker
start), then the big one twice; the faster scan counts, as the machine may be shared. Per path
it prints the CPU seconds per GiB of Spark (driver JVM and Python workers), of Quire (gateway
and bookies) and of Kafka. The topics are filled with kafka-producer-perf-test.

Spark (its JVM and the Python workers it forks) runs under SCHED_IDLE, standing in for Spark on
machines of its own: it gets only the CPU nothing else here wants. Nice 19 is not that: under
Linux's EEVDF scheduler a nice-19 task that holds a CPU still delays a waking nice-0 task, and
Quire's write path is a chain of wake-ups (producer, gateway, bookies, their journal threads).

Then a producer at a fixed rate (--producer-mbps) on Quire, alone and under loads. The producer
is bench/PhasedProducer.java (acks=all, the client's defaults otherwise, latency from send() to
its callback, as kafka-producer-perf-test measures it), one JVM for the whole comparison, whose
windows are interleaved: after --producer-warmup-s (its JIT), --rounds rounds of one window per
phase, each round starting one phase later than the last. A load runs in a thread of its own
from its window's start and is stopped at its end (a scan under way is cancelled), so every
window lasts --window-s; the records of a window's first --settle-s, and those sent while a
load is being stopped, count to no phase. Interleaving, rather than a run per phase, because
the p99 alone drifts run to run on this machine (JIT, the store growing, memory, the host)
several-fold; many short windows, because the host steals CPU in bursts of 10 to 30 s.

A phase's p99 is the median of its windows' p99s, and a load's ratio is its p99 over the p99
alone; the p99 over all of a phase's windows is printed beside it. One burst of the host's
stealing, or one window of anything else, moves the p99 over all windows: in one run two
windows alone (112 and 89 ms, against 8-19 ms for the other eight) took the ratio during scans
from x2.0 (medians) to x1.44. Each window's p99 is printed with the share of the CPU the host
stole in it, and each phase with how busy the CPU was, the kernel's direct reclaims and
compactions, what kswapd and DAMON reclaimed, and the disk reads. The host's stealing is not the
load's doing either: in bench 33 the five windows alone in which it stole 17-39% of the CPU had
p99s of 25-92 ms against 7-10 ms for the others, which made the scans look cheap (x1.46 where
the quiet windows said about x2.5). So each phase also has a steal-free p99, the median over
only its windows in which the host stole at most --max-stolen of the CPU.

The loads: direct scans (a) with the defaults (beside the standalone's bookies, each task leaves
25% of the CPU idle: `quire.cpuHeadroom`, pipeline/pacing.py); unpaced (quire.cpuHeadroom=0,
also timed alone, as unpaced_direct_MBps); and unpaced but bounded with
`quire.maxBytesPerSecond` (--scan-mbps-per-task, 10 MiB/s a task; 50, the default before bench
43, did not bind: unpaced, the scans read 81 MB/s beside the producer in bench 43, less than two
tasks at 50 MiB/s may).
What the direct scans read in a window is what the bookies sent as background range reads in it
(their Prometheus counter, read at the window's ends): counted by finished tasks, as the Kafka
source's scans still are, a bounded task that outlasts the window counted nothing (bench 42 said
0 MB/s), and bench 42 counted the unpaced scans at 37 MB/s. Two SCHED_IDLE busy loops that
read nothing (the scans' CPU without their reads); and, where the bench may use SCHED_RR (root or
an RLIMIT_RTPRIO), the unpaced scans and the two loops with every thread of Quire
(gateway, bookies) under SCHED_RR for the window. The real-time controls tell a write path that
waits for a CPU from one slowed by the scans' work: a waking real-time thread goes at once to
the CPU running the lowest class of work, and one left waiting is pushed there, where a
waiting normal thread stays behind the one on its CPU while the other CPU runs SCHED_IDLE work.
Switched per window here, SCHED_RR is what quire.realtime.priority=1 (off by default) gives the
servers from their start (quire/realtime.py; README, "Spark").

Two more things each round, to read the ratios by. A second window alone ("alone again"): how
far two windows alike differ in this run, the spread a load's ratio stands against (bench 41:
9.0 and 11.5 ms, x1.28). And in every phase's line, how the kernel scheduled Quire's threads
(gateway and bookies, from /proc/PID/task/TID/schedstat and sched): CPU seconds run a second,
seconds waited runnable a second (woken or preempted, queued on a CPU but not running), and
moves between CPUs a second. Beside SCHED_IDLE work the kernel all but stops moving them: in
bench 41, 461 moves a second alone, 58 during the direct scans and 29 beside the busy loops, as
a CPU that runs only SCHED_IDLE work never looks for waiting threads to take (for the kernel it
goes idle only when it has nothing at all to run). Under SCHED_RR they moved about 1,700-1,800
times a second, and waited runnable 0.44 s a second during the scans and 0.27 s beside the
loops, against 0.96 and 0.82 s without it (0.74 s alone).

The producer's topic has --producer-partitions partitions (8, like the scanned one: on one, the
client's 16 KiB batches, at most 5 in flight, cap it at 5 x 16 KiB per fsynced quorum write).
Before it starts, the bench fills the page cache (a scratch file of the free memory and 1 GiB
more; --no-fill-memory to skip): the comparison writes 50-60 GB of replicas, and a page cache
that fills during it slows the later windows. Not where a DAMON pageout scheme runs (it drops
page cache untouched for a minute): there the cache never fills, and DAMON dropping the
filler's pages made the first rounds spike in every phase. Quire's store is removed once Quire
is measured (the disk need not hold it and the peer's), and the bench will not start without room
for the rest at its peak (disk_needed_gib: 66 GiB with the defaults, and the filler where it
fills). The peer: the same producer on Apache Kafka, alone, during scans (c) of Kafka, and beside
the same two SCHED_IDLE busy loops (what the busy-loop control does to a broker on this machine
that does not fdatasync per produce). Last,
`quire migrate` copies Kafka's topic into a fresh `quire standalone --bookies 3 --import-enable`
(MB/s, and its tasks' time fetching from Kafka and importing into Quire). Targets: direct >=
kafka; producer p99 during the scan <= 1.5x alone.

Needs compat_tests/install.sh (Kafka's jars, Spark's Kafka connector) and the [spark] extra.
Ends with `BENCH spark_scan direct_MBps=<n> via_gateway_MBps=<n> kafka_MBps=<n>
producer_p99_ratio=<n> migrate_MBps=<n> producer_pooled_p99_ratio=<n>
producer_steal_free_p99_ratio=<n> bounded_p99_ratio=<n> unpaced_direct_MBps=<n>
unpaced_p99_ratio=<n> busy_loops_p99_ratio=<n>
rr_p99_ratio=<n> rr_busy_loops_p99_ratio=<n>
producer_alone_cpu_busy_pct=<n> alone_again_p99_ratio=<n> wait_alone_s_per_s=<n>
wait_scans_s_per_s=<n> migrations_alone_per_s=<n> migrations_scans_per_s=<n>
kafka_producer_p99_ratio=<n> kafka_busy_loops_p99_ratio=<n>
kafka_steal_free_p99_ratio=<n>` (producer_p99_ratio: during the scans (a), medians of the
windows' p99s; producer_pooled_p99_ratio: the same over all windows;
producer_steal_free_p99_ratio: the same medians over only the windows in which the host stole
at most --max-stolen (5%) of the CPU, nan with fewer than three such windows on a side;
bounded_p99_ratio: during the bounded scans; unpaced_direct_MBps and unpaced_p99_ratio:
the scan with quire.cpuHeadroom=0, alone and during the producer; busy_loops_p99_ratio: the
control; rr_p99_ratio and rr_busy_loops_p99_ratio: the real-time controls, nan where left out;
producer_alone_cpu_busy_pct, how busy the machine's CPU was during the windows alone;
alone_again_p99_ratio, the second window alone's p99 over the first's; wait_*_s_per_s and
migrations_*_per_s, Quire's threads' seconds waited runnable and moves between CPUs a second,
alone and during the direct scans (a);
kafka_producer_p99_ratio and kafka_busy_loops_p99_ratio, the peer's ratios during scans (c) and
beside the two busy loops; kafka_steal_free_p99_ratio, its ratio during scans over the windows
the host stole little in).

Usage: python3 bench/spark_scan.py [--mb 2048] [--partitions 8] [--producer-mbps 20] [--window-s 12]
       [--rounds 8] [--settle-s 3] [--producer-warmup-s 30] [--producer-partitions 8]
       [--max-stolen 0.05] [--scan-mbps-per-task 10]
       [--no-fill-memory]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._bookies import process_tree
from bench._machine import (
    damon_pageout_running,
    free_gib,
    idle_priority,
    normal_priority,
    proc_stats,
    realtime_permitted,
)
from bench._phases import (
    ALONE,
    BusyLoops,
    Load,
    Nothing,
    Realtime,
    SparkScans,
    add_window_args,
    interleaved_p99,
)
from bench.perf_tools import KAFKA_JVM_OPTS, create_topic, producer_perf
from compat_tests.support import kafka_dist
from compat_tests.support.apache_kafka import start_apache_kafka
from compat_tests.support.spark import connector_jars, connector_ready
from store.net import free_port_run
from tests.support.gateway import StandaloneGateway
from tests.support.metrics import scrape, value

RECORD = 1024
BOOKIES = 3
UNPACED = "unpaced direct scans"
LOADS = ("direct scans", "bounded direct scans", "busy loops", UNPACED)  # the producer's loads
RR_SCANS = "unpaced direct scans, Quire under SCHED_RR"
RR_LOOPS = "busy loops, Quire under SCHED_RR"
REALTIME = (RR_SCANS, RR_LOOPS)  # the real-time controls, where permitted
ALONE_AGAIN = "alone again"  # a second window alone each round: the spread of the measurement itself
WARM_RECORDS = 20_000  # a small topic each path scans once first: JVM, JIT and Python workers warm


def p99_ratio(q: dict[str, dict[str, Any]], phase: str, key: str = "window_p99_ms") -> float:
    """A phase's p99 over the producer's p99 alone (by default the median of each side's window
    p99s; "p99_ms": over all windows); nan for a phase left out."""
    alone = q[ALONE][key]
    return q[phase][key] / alone if alone > 0 and phase in q else float("nan")


FILL_BEYOND_GIB = 1.0  # fill_page_cache writes this much more than the free memory
STOP_S = 2.0  # about what stopping a window's load adds to the window (a scan cancelled)


def disk_needed_gib(args: argparse.Namespace, phases: int, filler_gib: float) -> float:
    """The most the bench holds on disk at once: both stores' copies of the scanned topic, the
    page-cache filler (filler_gib: 0 when there is none), and what the producer writes to Quire
    (3 replicas) over the warm-up and every window, plus 4 GiB of room; the peer's comparison and
    the migration come after Quire's store is removed."""
    seconds = args.producer_warmup_s + args.rounds * phases * (args.window_s + STOP_S)
    return (4 * args.mb + 3 * args.producer_mbps * seconds) / 1024 + filler_gib + 4


def filler_gib(args: argparse.Namespace) -> float:
    """At most what fill_page_cache will write: the free memory now (more than at the fill, after
    Spark, Kafka and Quire start) and FILL_BEYOND_GIB; 0 where the bench fills nothing."""
    return free_gib() + FILL_BEYOND_GIB if args.fill_memory and not damon_pageout_running() else 0.0


def fill(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    create_topic(bootstrap, topic, partitions)
    return producer_perf(bootstrap, topic, records)["mbps"]


def scan(spark: Any, make_df: Callable[[], Any], records: int) -> float:
    """MB/s of one count + group-by-length job over the whole topic."""
    from pyspark.sql import functions as F

    df = make_df()
    t0 = time.monotonic()
    rows = df.groupBy(F.length("value").alias("n")).count().collect()
    took = time.monotonic() - t0
    got = sum(r["count"] for r in rows)
    if got != records:
        raise RuntimeError(f"scan read {got} records, expected {records}")
    return records * RECORD / (1 << 20) / took


Snapshot = dict[int, tuple[int, int, int]]  # pid: (parent pid, own CPU ticks, reaped children's)


def cpu_snapshot(roots: list[int]) -> Snapshot:
    """These processes and all their descendants, from /proc: each one's parent and CPU ticks
    (user + system), its own and those of the children it reaped."""
    parent: dict[int, int] = {}
    ticks: dict[int, tuple[int, int]] = {}
    for pid, _, fields in proc_stats():
        parent[pid] = int(fields[1])
        ticks[pid] = (int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14]))
    want, out = set(roots), {}
    for pid in ticks:
        p = pid
        while p > 1 and p not in want:
            p = parent.get(p, 0)
        if p in want:
            out[pid] = (parent[pid], *ticks[pid])
    return out


def cpu_between(before: Snapshot, after: Snapshot) -> float:
    """CPU seconds the process tree used between two snapshots. A process gone by `after` took
    its whole time into its parent's reaped-children ticks, if the parent waited for it: that
    much of its time before is taken off again. PySpark's worker daemon ignores SIGCHLD, so the
    time of a Python worker that exits goes nowhere: a plain difference of totals lost all of
    it, and printed negative; here what such a worker used since `before` is lost (it reads low,
    never below zero)."""
    used = 0
    for pid, (_, own, kids) in after.items():
        _, own0, kids0 = before.get(pid, (0, 0, 0))
        used += own + kids - own0 - kids0
    gone: dict[int, int] = {}
    for pid, (ppid, own, kids) in before.items():
        if pid not in after and ppid in after:
            gone[ppid] = gone.get(ppid, 0) + own + kids
    for ppid, t in gone.items():
        reaped = after[ppid][2] - before.get(ppid, (0, 0, 0))[2]
        used -= min(t, max(0, reaped))
    return used / os.sysconf("SC_CLK_TCK")


def measured_scan(name: str, spark: Any, make_df: Callable[[], Any], records: int,
                  groups: dict[str, list[int]], warm: Callable[[], Any]) -> float:
    """The faster of two scans after a warm-up one, printing CPU s/GiB per process group."""
    scan(spark, warm, WARM_RECORDS)
    best, cpu = 0.0, {}
    for _ in range(2):
        before = {g: cpu_snapshot(pids) for g, pids in groups.items()}
        mbps = scan(spark, make_df, records)
        if mbps > best:
            best, cpu = mbps, {g: cpu_between(before[g], cpu_snapshot(pids)) for g, pids in groups.items()}
    gib = records * RECORD / (1 << 30)
    where = ", ".join(f"{g} {v / gib:.1f}" for g, v in cpu.items())
    print(f"{name}: {best:.1f} MB/s (CPU s/GiB: {where}; load {os.getloadavg()[0]:.1f})", flush=True)
    return best


def fill_page_cache(path: Path, beyond_gib: float) -> float:
    """Write (and sync) a scratch file of the machine's free memory and `beyond_gib` more,
    kept until the bench ends: the page cache full and the kernel reclaiming, as on a server
    that has run a while, so that every producer window meets the memory state of the first.
    GiB written."""
    chunk = bytes(64 << 20)
    # never the disk's last GiBs: on a machine with more memory than disk to spare, a fuller disk
    # would fail the stores, not measure them
    room = shutil.disk_usage(path.parent).free - (4 << 30)
    todo = min(int((free_gib() + beyond_gib) * (1 << 30)), max(room, 0))
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while written < todo:
            written += os.write(fd, chunk)
            os.fdatasync(fd)  # clean pages: reclaim drops them without writing them first
    finally:
        os.close(fd)
    return written / (1 << 30)


def migrate_mbps(spark: Any, kafka: str, data_dir: Path) -> float:
    """`quire migrate` of the scan topic from Kafka into a fresh standalone, MiB/s (printing the
    job's summary: records, task time fetching and importing)."""
    import io

    from pipeline.migrate.job import Options, migrate_round

    gw = StandaloneGateway(data_dir, bookies=BOOKIES, log_level="WARNING", extra_args=["--import-enable"]).start()
    try:
        summary = migrate_round(spark, Options(kafka, gw.bootstrap, topics=["scan"], groups=[]), gw.bootstrap,
                                io.StringIO())
    finally:
        gw.stop(timeout=30.0)
    for line in summary.lines():
        print(f"migrate: {line}", flush=True)
    return summary.bytes / (1 << 20) / summary.seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=2048, help="topic size, MiB")
    ap.add_argument("--partitions", type=int, default=8)
    add_window_args(ap, rounds=8)  # 8 phases: 10 rounds would need 79 GiB of disk
    ap.add_argument("--producer-partitions", type=int, default=8,
                    help="partitions of the producer's topic (one: its 16 KiB batches, 5 in flight, cap it at "
                         "5 x 16 KiB per fsynced quorum write's latency)")
    ap.add_argument("--fill-memory", action=argparse.BooleanOptionalAction, default=True,
                    help="fill the page cache before the producer starts (see the module doc)")
    ap.add_argument("--scan-mbps-per-task", type=int, default=10,
                    help="quire.maxBytesPerSecond of the bounded scans during the producer, MiB/s")
    args = ap.parse_args()
    if not connector_ready():
        print("Spark's Kafka connector is missing: run compat_tests/install.sh", file=sys.stderr)
        return 2
    kafka_dist.ensure_installed()
    phases = 2 + len(LOADS) + (len(REALTIME) if realtime_permitted() else 0)
    filler = filler_gib(args)
    need, free = disk_needed_gib(args, phases, filler), shutil.disk_usage(tempfile.gettempdir()).free / (1 << 30)
    if free < need:
        with_filler = f" (with a {filler:.0f} GiB page-cache filler: see --no-fill-memory)" if filler else ""
        print(f"the bench holds up to {need:.0f} GiB on disk at once{with_filler} and {tempfile.gettempdir()} has "
              f"{free:.0f} GiB free: free some, or run fewer --rounds", file=sys.stderr)
        return 2
    from pyspark.sql import SparkSession

    import pipeline

    records = args.mb * (1 << 20) // RECORD
    print(f"{records} records x {RECORD} B on {args.partitions} partitions; Spark local[2]", flush=True)
    # Spark (its JVM and the Python workers it forks) under SCHED_IDLE, standing in for Spark on
    # machines of its own: Quire, Kafka and the producers here keep the CPU they need.
    idle_priority()
    spark = (SparkSession.builder.master("local[2]").appName("spark-scan")
             .config("spark.jars", ",".join(connector_jars())).config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    normal_priority()  # this thread's later children alone; the JVM keeps SCHED_IDLE
    spark.sparkContext.setLogLevel("ERROR")
    pipeline.register(spark)

    def kafka_df(bootstrap: str, topic: str = "scan") -> Callable[[], Any]:
        return lambda: (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                        .option("subscribe", topic).option("startingOffsets", "earliest").load())

    nan = float("nan")
    ratio = pooled_ratio = bounded_ratio = cpu_ratio = again_ratio = rr_ratio = rr_cpu_ratio = alone_busy = nan
    unpaced_ratio = nan
    kafka_ratio = kafka_cpu_ratio = wait_alone = wait_scans = moves_alone = moves_scans = nan
    spark_pid = int(spark.sparkContext._gateway.jvm.java.lang.ProcessHandle.current().pid())
    with tempfile.TemporaryDirectory(prefix="spark-scan-") as tmp:
        metrics_port = free_port_run(1 + BOOKIES)  # the gateway's, then each bookie's
        gw = StandaloneGateway(Path(tmp) / "quire", bookies=BOOKIES, log_level="WARNING",
                               extra_args=["--metrics", f"127.0.0.1:{metrics_port}"]).start()

        def bookies_sent_mib() -> float:
            """MiB the bookies have sent as background range reads (the direct scans') since they started."""
            return sum(value(scrape(metrics_port + 1 + i), "quire_bookie_background_read_bytes_total")
                       for i in range(BOOKIES)) / (1 << 20)

        kafka_node = start_apache_kafka(Path(tmp) / "kafka", jvm_opts=KAFKA_JVM_OPTS)
        try:
            groups = {"spark": [spark_pid], "quire": [gw.pid], "kafka": [kafka_node.pid]}
            kafka_bs = kafka_node.bootstrap
            print(f"quire fill: {fill(gw.bootstrap, 'scan', args.partitions, records):.1f} MB/s", flush=True)
            print(f"kafka fill: {fill(kafka_bs, 'scan', args.partitions, records):.1f} MB/s", flush=True)
            fill(gw.bootstrap, "warm", args.partitions, WARM_RECORDS)
            fill(kafka_bs, "warm", args.partitions, WARM_RECORDS)
            data_dir = str(gw.data_dir)

            def quire_df(topic: str = "scan", **opts: str) -> Callable[[], Any]:
                return lambda: (spark.read.format("quire").option("quire.meta", data_dir)
                                .option("subscribe", topic).options(**opts).load())

            # the defaults: beside the standalone's bookies, each task leaves the default CPU headroom
            direct = measured_scan("(a) format(quire), from bookies", spark, quire_df(), records, groups,
                                   quire_df("warm"))
            unpaced = {"quire.cpuHeadroom": "0"}
            direct_unpaced = measured_scan("(a) unpaced (quire.cpuHeadroom=0)", spark, quire_df(**unpaced), records,
                                           groups, quire_df("warm", **unpaced))
            via = measured_scan("(b) Spark Kafka source via the gateway", spark, kafka_df(gw.bootstrap), records,
                                groups, kafka_df(gw.bootstrap, "warm"))
            kafka = measured_scan("(c) Spark Kafka source from Apache Kafka", spark, kafka_df(kafka_bs), records,
                                  groups, kafka_df(kafka_bs, "warm"))
            create_topic(gw.bootstrap, "load", args.producer_partitions)
            bounded = args.scan_mbps_per_task * (1 << 20)
            if args.fill_memory and damon_pageout_running():
                # DAMON drops the filler's pages a minute after the fill, up to 128 MiB a second,
                # for minutes: in bench 25 (and 26) the windows of the first rounds spiked in every
                # phase (DAMON paging out 250-380 MiB in each), and the page cache never fills.
                print("no page-cache fill: DAMON's pageout scheme keeps the page cache from filling here, "
                      "and would spend the first rounds dropping the filler's pages", flush=True)
            elif args.fill_memory:
                gib = fill_page_cache(Path(tmp) / "page-cache-filler", FILL_BEYOND_GIB)
                print(f"page cache filled with {gib:.1f} GiB of a scratch file: {free_gib():.1f} GiB free", flush=True)

            mb = records * RECORD / (1 << 20)
            print(f"producer at {args.producer_mbps} MB/s on Quire, {args.rounds} rounds of {args.window_s:.0f} s windows "
                  f"(the first {args.settle_s:.0f} s of each left out):", flush=True)

            def unpaced_scan() -> float:
                return scan(spark, quire_df(**unpaced), records)

            loads: dict[str, Load] = {ALONE_AGAIN: Nothing(), **dict(zip(LOADS, (
                SparkScans(spark, lambda: scan(spark, quire_df(), records), mb, bookies_sent_mib),
                SparkScans(spark, lambda: scan(spark, quire_df(**unpaced, **{"quire.maxBytesPerSecond": str(bounded)}),
                                               records), mb, bookies_sent_mib),
                BusyLoops(2),
                SparkScans(spark, unpaced_scan, mb, bookies_sent_mib),
            ), strict=True))}

            def quire_pids() -> list[int]:
                return process_tree(gw.pid)

            if realtime_permitted():  # the controls with Quire's threads under SCHED_RR (module doc)
                loads[RR_SCANS] = Realtime(SparkScans(spark, unpaced_scan, mb, bookies_sent_mib), quire_pids)
                loads[RR_LOOPS] = Realtime(BusyLoops(2), quire_pids)
            else:
                print("not permitted to use SCHED_RR (root or an RLIMIT_RTPRIO): the real-time controls are left out",
                      flush=True)
            q = interleaved_p99(gw.bootstrap, args, RECORD, loads, quire_pids)
            ratio, bounded_ratio, cpu_ratio, unpaced_ratio, rr_ratio, rr_cpu_ratio = (
                p99_ratio(q, k) for k in (*LOADS, *REALTIME))
            pooled_ratio = p99_ratio(q, "direct scans", "p99_ms")
            clean_ratio = p99_ratio(q, "direct scans", "steal_free_p99_ms")
            alone_busy = q[ALONE]["busy"]
            again_ratio = p99_ratio(q, ALONE_AGAIN)
            wait_alone, wait_scans = q[ALONE]["wait_s_per_s"], q["direct scans"]["wait_s_per_s"]
            moves_alone, moves_scans = q[ALONE]["migrations_per_s"], q["direct scans"]["migrations_per_s"]

            def p99s(k: str) -> str:
                return f"{q[k]['window_p99_ms']} ms ({q[k]['p99_ms']} ms over all windows)"

            print(f"producer p99, the median of the windows': alone {p99s(ALONE)}; during direct scans with the "
                  f"defaults ({q['direct scans']['load_mbps']:.0f} MB/s) {p99s('direct scans')}, x{ratio:.2f} "
                  f"(x{pooled_ratio:.2f} over all windows); during direct scans bounded to {args.scan_mbps_per_task} "
                  f"MB/s a task ({q['bounded direct scans']['load_mbps']:.0f} MB/s) {p99s('bounded direct scans')} "
                  f"(x{bounded_ratio:.2f}); during two busy loops under SCHED_IDLE that read nothing "
                  f"{p99s('busy loops')} (x{cpu_ratio:.2f}); during unpaced direct scans "
                  f"({q[UNPACED]['load_mbps']:.0f} MB/s) {p99s(UNPACED)} (x{unpaced_ratio:.2f}); over the windows "
                  f"in which the host stole at most {args.max_stolen:.0%} of the CPU ({q[ALONE]['clean_windows']} "
                  f"alone, {q['direct scans']['clean_windows']} during direct scans): alone "
                  f"{q[ALONE]['steal_free_p99_ms']} ms, during the scans {q['direct scans']['steal_free_p99_ms']} ms "
                  f"(x{clean_ratio:.2f})", flush=True)
            print(f"two windows alike: the second window alone each round {p99s(ALONE_AGAIN)} (x{again_ratio:.2f}, "
                  f"the spread of the measurement itself)", flush=True)
            if RR_SCANS in q:
                print(f"with Quire's threads under SCHED_RR: during unpaced direct scans "
                      f"({q[RR_SCANS]['load_mbps']:.0f} MB/s) {p99s(RR_SCANS)} (x{rr_ratio:.2f}); "
                      f"during two busy loops {p99s(RR_LOOPS)} (x{rr_cpu_ratio:.2f})", flush=True)
            # The comparison wrote about 20 MB/s x 3 replicas for its whole length (50-60 GB): the
            # disk here holds that once, not twice, nor with the peer's and the migration's data
            # beside it. Quire is done with once it is measured.
            gw.stop(timeout=30.0)
            shutil.rmtree(gw.data_dir, ignore_errors=True)
            # The peer: the same producer on Apache Kafka, alone and during Spark's Kafka source
            # scanning Kafka (c), Spark under the same policy: how far a full scan on this machine
            # moves a Kafka producer's p99, the yardstick for producer_p99_ratio.
            create_topic(kafka_bs, "load", args.producer_partitions)
            print("the same producer on Apache Kafka:", flush=True)
            k = interleaved_p99(kafka_bs, args, RECORD, {
                "Kafka source scans": SparkScans(spark, lambda: scan(spark, kafka_df(kafka_bs), records), mb),
                "busy loops": BusyLoops(2)}, lambda: process_tree(kafka_node.pid))
            kafka_ratio, kafka_cpu_ratio = p99_ratio(k, "Kafka source scans"), p99_ratio(k, "busy loops")
            kafka_clean_ratio = p99_ratio(k, "Kafka source scans", "steal_free_p99_ms")
            print(f"Apache Kafka: producer p99, the median of the windows', alone {k[ALONE]['window_p99_ms']} ms; "
                  f"during Spark Kafka source scans of it ({k['Kafka source scans']['load_mbps']:.0f} MB/s) "
                  f"{k['Kafka source scans']['window_p99_ms']} ms (x{kafka_ratio:.2f}; over all windows "
                  f"x{p99_ratio(k, 'Kafka source scans', 'p99_ms'):.2f}); during two busy loops under SCHED_IDLE "
                  f"{k['busy loops']['window_p99_ms']} ms (x{kafka_cpu_ratio:.2f}; Quire's: x{cpu_ratio:.2f}); "
                  f"over the windows the host stole at most {args.max_stolen:.0%} in, during the scans "
                  f"x{kafka_clean_ratio:.2f} (Quire's: x{clean_ratio:.2f})",
                  flush=True)
            if alone_busy > 0.8:
                print(f"the producer alone kept the machine's CPU {alone_busy:.0%} busy: with no headroom left, "
                      f"its p99 measures the machine more than the scan (try a lower --producer-mbps)", flush=True)
            migrate = migrate_mbps(spark, kafka_bs, Path(tmp) / "migrated")
        finally:
            gw.stop(timeout=30.0)
            kafka_node.stop()
    spark.stop()
    print(f"direct/kafka: {direct / kafka if kafka > 0 else nan:.2f} (target >= 1.00); "
          f"producer p99 ratio {ratio:.2f} (target <= 1.50; Apache Kafka's, the same way: {kafka_ratio:.2f})")
    print(f"BENCH spark_scan direct_MBps={direct:.2f} via_gateway_MBps={via:.2f} kafka_MBps={kafka:.2f} "
          f"producer_p99_ratio={ratio:.2f} migrate_MBps={migrate:.2f} producer_pooled_p99_ratio={pooled_ratio:.2f} "
          f"producer_steal_free_p99_ratio={clean_ratio:.2f} "
          f"bounded_p99_ratio={bounded_ratio:.2f} "
          f"unpaced_direct_MBps={direct_unpaced:.2f} unpaced_p99_ratio={unpaced_ratio:.2f} "
          f"busy_loops_p99_ratio={cpu_ratio:.2f} "
          f"rr_p99_ratio={rr_ratio:.2f} rr_busy_loops_p99_ratio={rr_cpu_ratio:.2f} "
          f"producer_alone_cpu_busy_pct={alone_busy * 100:.0f} alone_again_p99_ratio={again_ratio:.2f} "
          f"wait_alone_s_per_s={wait_alone:.2f} wait_scans_s_per_s={wait_scans:.2f} "
          f"migrations_alone_per_s={moves_alone:.0f} migrations_scans_per_s={moves_scans:.0f} "
          f"kafka_producer_p99_ratio={kafka_ratio:.2f} kafka_busy_loops_p99_ratio={kafka_cpu_ratio:.2f} "
          f"kafka_steal_free_p99_ratio={kafka_clean_ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
