"""What busy CPUs alone do to a producer's p99 on Quire, by the shape of the write path, against
Apache Kafka on the same machine: the control of bench/spark_scan.py (two busy loops under
SCHED_IDLE, which read nothing) taken apart.

For each system, one run of bench/PhasedProducer.java at a fixed rate (acks=all, the client's
defaults otherwise) with windows interleaved as in spark_scan (bench/_phases.py): alone, and
beside two SCHED_IDLE busy loops. The systems, one after another, each on a fresh data dir:

  kafka             Apache Kafka 4.x, single node KRaft (no fdatasync per produce)
  quire_1_bookie    `quire standalone --bookies 1` (E/WQ/AQ 1/1/1: one journal fdatasyncing)
  quire_3_bookies   `quire standalone --bookies 3` (3/3/2, the default the Spark bench runs)
  quire_3_nofsync   the same with `--no-fsync` (UNSAFE, a control only: no journal fdatasync)

The ratio of each is its p99 beside the loops over its p99 alone (medians of the windows'
p99s). Kafka's tells what the loops do to a broker on this machine; one bookie against three,
what the number of journals fdatasyncing on one disk (and of processes to wake) adds; three
without fsync, what the journal's fdatasync adds. In the first run (2 vCPUs): Kafka x1.83 (3 to
5.5 ms, four windows of six at 7 ms or less), one bookie x3.08, three x3.08, three without
fsync x0.82: the loops stretch the fdatasync, not the chain of processes.

Needs compat_tests/install.sh (Kafka's jars). Ends with `BENCH busy_cpus kafka_p99_ratio=<n>
quire_1_bookie_p99_ratio=<n> quire_3_bookies_p99_ratio=<n> quire_3_nofsync_p99_ratio=<n>
kafka_alone_p99_ms=<n> quire_1_bookie_alone_p99_ms=<n> quire_3_bookies_alone_p99_ms=<n>
quire_3_nofsync_alone_p99_ms=<n>`.

Usage: python3 bench/busy_cpus.py [--producer-mbps 20] [--window-s 12] [--rounds 6]
       [--settle-s 3] [--producer-warmup-s 30] [--max-stolen 0.05] [--partitions 8]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._phases import ALONE, BusyLoops, add_window_args, interleaved_p99
from bench.perf_tools import apache_kafka, create_topic
from tests.support.gateway import StandaloneGateway

RECORD = 1024
LOOPS = "two busy loops"


def quire(bookies: int, *extra: str) -> Callable[[Path], AbstractContextManager[str]]:
    @contextmanager
    def run(base: Path) -> Iterator[str]:
        gw = StandaloneGateway(base / "quire", bookies=bookies, log_level="WARNING", extra_args=list(extra)).start()
        try:
            yield gw.bootstrap
        finally:
            gw.stop(timeout=30.0)
    return run


SYSTEMS = {
    "kafka": apache_kafka,
    "quire_1_bookie": quire(1),
    "quire_3_bookies": quire(3),
    "quire_3_nofsync": quire(3, "--no-fsync"),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_window_args(ap, rounds=6)
    ap.add_argument("--partitions", type=int, default=8)
    args = ap.parse_args()
    alone: dict[str, float] = {}
    ratio: dict[str, float] = {}
    for name, system in SYSTEMS.items():
        print(f"{name}: producer at {args.producer_mbps} MB/s, {args.rounds} rounds of {args.window_s:.0f} s windows",
              flush=True)
        with tempfile.TemporaryDirectory(prefix="busy-cpus-") as tmp, system(Path(tmp)) as bootstrap:
            create_topic(bootstrap, "load", args.partitions)
            q = interleaved_p99(bootstrap, args, RECORD, {LOOPS: BusyLoops(2)})
        alone[name] = q[ALONE]["window_p99_ms"]
        ratio[name] = q[LOOPS]["window_p99_ms"] / alone[name] if alone[name] > 0 else float("nan")
        print(f"{name}: p99 alone {alone[name]} ms, beside {LOOPS} {q[LOOPS]['window_p99_ms']} ms "
              f"(x{ratio[name]:.2f})", flush=True)
    print("BENCH busy_cpus " + " ".join(f"{n}_p99_ratio={ratio[n]:.2f}" for n in SYSTEMS) + " "
          + " ".join(f"{n}_alone_p99_ms={alone[n]:.1f}" for n in SYSTEMS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
