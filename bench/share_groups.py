"""Share groups (KIP-932) benchmark: one partition of --records 1 KiB records, read by Java
KafkaShareConsumers (the compat harness's `share-bench`, all consumers in one JVM, implicit
acknowledgement) that spend --work-us per record, 1, 4 and 8 consumers (each count a new share
group from the earliest offset) against `quire standalone --bookies 3` and, in the same run,
8 consumers against a single-node KRaft Apache Kafka (the version compat_tests/support/kafka_dist
pins). Plus the ack-to-redelivery latency after RELEASE (the harness's `share-redelivery`: one
explicit-mode consumer releases every first delivery and times its return), on Quire.

Throughput is distinct records per second from the first delivery to the last.

Usage: python3 bench/share_groups.py [--records 200000] [--work-us 1000] [--max-poll 100] [--counts 1 4 8]
       [--redelivery 2000] [--no-kafka] [--profile]
Ends with: BENCH share_groups quire_1=<rec/s> quire_8=<rec/s> kafka_8=<rec/s> scale_8=<n>
           redelivery_p99_ms=<n>
"""

from __future__ import annotations

import argparse
import pstats
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(1, str(ROOT))

import produce_consume as pc  # noqa: E402

from compat_tests.support.java_harness import one, run_harness  # noqa: E402

KAFKA_JVM_OPTS = ("-Xms1g", "-Xmx1g", "-XX:+UseG1GC")
COUNTS = (1, 4, 8)


def load(bootstrap: str, records: int) -> None:
    """The one-partition topic pc.TOPIC with `records` 1 KiB records, in batches of the Java
    producer's default batch.size (librdkafka's 1 MB batches would make every share fetch
    acquire ~970 records at once: brokers acquire whole batches, so a few consumers would hold
    the partition's whole in-flight limit while the others wait)."""
    pc.create_topic(bootstrap, 1)
    pc.produce(bootstrap, records, 1, extra={"batch.size": 16384})


def throughput(bootstrap: str, consumers: int, args: argparse.Namespace) -> float:
    """Records per second of `consumers` share consumers in a new group reading every record."""
    ev = one(run_harness("share-bench", timeout=args.timeout, bootstrap=bootstrap, topic=pc.TOPIC,
                         group=f"bench-{uuid.uuid4().hex[:8]}", reset="earliest", consumers=consumers,
                         count=args.records, work_us=args.work_us, max_poll=args.max_poll,
                         timeout_ms=int(args.timeout * 1000) - 10_000), "throughput")
    rate = ev["records"] / (ev["elapsed_ms"] / 1000)
    if ev.get("duplicates"):
        print(f"  duplicate deliveries (offset:consumer#count@ms first,second): {ev['duplicates'][:20]}", flush=True)
    print(f"  {consumers} consumer(s): {rate:.0f} rec/s ({ev['records']} records, "
          f"{ev['deliveries']} deliveries, {ev['elapsed_ms'] / 1000:.1f} s)", flush=True)
    return float(rate)


def redelivery_ms(bootstrap: str, count: int) -> list[float]:
    ev = one(run_harness("share-redelivery", timeout=180, bootstrap=bootstrap, topic=pc.TOPIC,
                         group=f"redeliver-{uuid.uuid4().hex[:8]}", reset="earliest", count=count), "redelivery")
    return [float(x) for x in ev["latencies_ms"]]


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def quire(work: Path, args: argparse.Namespace) -> tuple[dict[int, float], list[float]]:
    prof = work / "gateway.prof" if args.profile else None
    server = pc.start_quire(work, bookies=3, profile_to=prof)
    try:
        load(server.bootstrap, args.records)
        print("quire:", flush=True)
        rates = {n: throughput(server.bootstrap, n, args) for n in args.counts}
        lat = redelivery_ms(server.bootstrap, args.redelivery) if args.redelivery else []
    finally:
        server.stop()
    if prof is not None:
        print("\nprofile of the quire standalone process, by own time:")
        pstats.Stats(str(prof)).sort_stats("tottime").print_stats(args.profile_top)
    return rates, lat


def kafka(work: Path, args: argparse.Namespace) -> dict[int, float]:
    from compat_tests.support.apache_kafka import start_apache_kafka

    broker = start_apache_kafka(work / "kafka", jvm_opts=KAFKA_JVM_OPTS)
    try:
        load(broker.bootstrap, args.records)
        print("kafka:", flush=True)
        return {n: throughput(broker.bootstrap, n, args) for n in sorted({8, *args.kafka_consumers})}
    finally:
        broker.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--work-us", type=int, default=1000, help="time each consumer spends per record")
    # Not Kafka's 500: 8 consumers x 500 acquired records exceed group.share.partition.max.record.locks
    # (2000), so at most 4 would work at a time, on Kafka as on Quire.
    ap.add_argument("--max-poll", type=int, default=100, help="max.poll.records")
    ap.add_argument("--redelivery", type=int, default=2000, help="records released and timed (0: skip)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per consumer run")
    ap.add_argument("--counts", type=int, nargs="+", default=list(COUNTS), help="consumer counts on quire")
    ap.add_argument("--no-kafka", action="store_true")
    ap.add_argument("--kafka-consumers", type=int, nargs="*", default=[], help="consumer counts on Kafka besides 8")
    ap.add_argument("--profile", action="store_true", help="run the standalone under cProfile")
    ap.add_argument("--profile-top", type=int, default=30)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="quire-bench-"))
    try:
        q, lat = quire(work, args)
        k8 = float("nan") if args.no_kafka else kafka(work, args)[8]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    p50, p99 = (pct(lat, 0.5), pct(lat, 0.99)) if lat else (float("nan"),) * 2
    print(f"redelivery after RELEASE ({len(lat)} records): p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    if not {1, 8} <= q.keys():
        print(f"quire: {q}")
        return 0
    scale = q[8] / q[1]
    print(f"scale 8/1 on quire: {scale:.2f}; quire/kafka at 8: {q[8] / k8:.2f}")
    print(f"BENCH share_groups quire_1={q[1]:.0f} quire_8={q[8]:.0f} kafka_8={k8:.0f} scale_8={scale:.2f} "
          f"redelivery_p99_ms={p99:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
