"""Catch-up read benchmark: a confluent-kafka producer writes --gb GiB of 1 KiB records
(acks=all, 3 partitions), then one consumer (assign, no group) reads everything back from
offset 0, against `quire standalone` with 1 bookie and with 3 bookies and, in the same run,
against a single-node KRaft Apache Kafka (the version compat_tests/support/kafka_dist pins).

Quire's entry cache holds the last 256 MiB a partition owner appended, so with 1 GiB produced
the consumer reads at least three quarters of the data from the bookies: the catch-up path.
Apache Kafka reads its segments through the page cache, as it would in production.

Usage: python3 bench/fetch_catchup.py [--gb 1.0] [--partitions 3] [--no-kafka] [--only 1,3]
Ends with: BENCH fetch_catchup quire_1b_MBps=<n> quire_3b_MBps=<n> kafka_MBps=<n>
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(1, str(ROOT))

import produce_consume as pc  # noqa: E402

KAFKA_JVM_OPTS = ("-Xms1g", "-Xmx1g", "-XX:+UseG1GC")
ENTRY_CACHE_MIB = 256


def measure(name: str, bootstrap: str, messages: int, partitions: int) -> float:
    """Produce, then time the catch-up consume; returns consume MB/s."""
    pc.create_topic(bootstrap, partitions)
    produce_s, _ = pc.produce(bootstrap, messages, partitions)
    mb = messages * pc.VALUE_SIZE / 1e6
    consume_s = pc.consume(bootstrap, messages, partitions)
    print(f"{name:9s} produce {mb / produce_s:7.1f} MB/s ({produce_s:5.1f} s) | "
          f"catch-up consume {mb / consume_s:7.1f} MB/s ({consume_s:5.1f} s)", flush=True)
    return mb / consume_s


def quire(work: Path, bookies: int, messages: int, partitions: int) -> float:
    server = pc.start_quire(work, bookies=bookies)
    try:
        return measure(f"quire-{bookies}b", server.bootstrap, messages, partitions)
    finally:
        server.stop()
        shutil.rmtree(work / f"quire-{server.port}", ignore_errors=True)


def kafka(work: Path, messages: int, partitions: int) -> float:
    from compat_tests.support import kafka_dist
    from compat_tests.support.apache_kafka import start_apache_kafka

    broker = start_apache_kafka(work / "kafka", jvm_opts=KAFKA_JVM_OPTS)
    try:
        return measure(f"kafka-{kafka_dist.kafka_version()}", broker.bootstrap, messages, partitions)
    finally:
        broker.stop()
        shutil.rmtree(work / "kafka", ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=1.0, help="GiB to produce and read back")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--no-kafka", action="store_true")
    ap.add_argument("--only", default="1,3", help="bookie counts to run Quire with")
    args = ap.parse_args()
    messages = int(args.gb * (1 << 30)) // pc.VALUE_SIZE
    if args.gb * 1024 < 2 * ENTRY_CACHE_MIB:
        print(f"note: under {2 * ENTRY_CACHE_MIB} MiB, much of the read is served by the entry cache")

    work = Path(tempfile.mkdtemp(prefix="quire-catchup-"))
    nan = float("nan")
    results: dict[str, float] = {"quire_1b": nan, "quire_3b": nan, "kafka": nan}
    started = time.monotonic()
    try:
        for n in (int(x) for x in args.only.split(",") if x):
            results[f"quire_{n}b"] = quire(work, n, messages, args.partitions)
        if not args.no_kafka:
            results["kafka"] = kafka(work, messages, args.partitions)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.gb} GiB per target, {time.monotonic() - started:.0f} s in all")
    print(f"BENCH fetch_catchup quire_1b_MBps={results['quire_1b']:.1f} "
          f"quire_3b_MBps={results['quire_3b']:.1f} kafka_MBps={results['kafka']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
