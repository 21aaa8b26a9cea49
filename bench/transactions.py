"""Transactional producer throughput and commit latency: the Java KafkaProducer 4.4.0 (the compat
harness's `txn bench` mode) writing 1 KiB records, acks=all, in transactions of 1,000 records, on

- Quire: `quire standalone --bookies 3` (E=WQ=3, AQ=2), transactional and, in the same run,
  non-transactional (idempotent) for the ratio;
- Apache Kafka 4.4: single node KRaft, transactional.

The commit latency is commitTransaction's alone (the transaction's records are flushed first).
Targets: Quire transactional >= 0.8x Quire non-transactional, commit p99 < 50 ms. Ends with
`BENCH transactions quire_txn_MBps=<n> quire_plain_MBps=<n> kafka_txn_MBps=<n> commit_p99_ms=<n>`
(commit_p99_ms: Quire's; MB = 2^20 bytes).

Usage: python3 bench/transactions.py [--records 60000] [--txn-size 1000] [--partitions 3] [--only quire,kafka]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.perf_tools import apache_kafka, create_topic, quire  # noqa: E402
from compat_tests.support import kafka_dist  # noqa: E402
from compat_tests.support.java_harness import one, run_harness  # noqa: E402

WARMUP_RECORDS = 10000


def run(bootstrap: str, topic: str, records: int, txn_size: int, partitions: int) -> dict[str, Any]:
    create_topic(bootstrap, topic, partitions)
    return one(run_harness("txn", mode="bench", bootstrap=bootstrap, topic=topic, count=records,
                           txn=f"bench-{topic}", timeout=900, **{"txn.size": txn_size}), "bench")


def show(name: str, r: dict[str, Any]) -> None:
    commit = (f", commit p50 {r['commit_p50_ms']:.1f} ms p99 {r['commit_p99_ms']:.1f} ms over {r['transactions']}"
              if r["transactions"] else "")
    print(f"{name:>12}: {r['mbps']:8.2f} MB/s ({r['records']} records in {r['seconds']:.1f} s{commit})", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=60000)
    ap.add_argument("--txn-size", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--only", default="quire,kafka")
    args = ap.parse_args()
    kafka_dist.ensure_installed()
    wanted = {n.strip() for n in args.only.split(",") if n.strip()}
    print(f"KafkaProducer {kafka_dist.kafka_version()}: {args.records} records x 1024 B, acks=all, "
          f"transactions of {args.txn_size}, {args.partitions} partitions", flush=True)
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-txn-") as tmp:
        if "quire" in wanted:
            work = Path(tmp) / "quire"
            work.mkdir()
            with quire(work) as bootstrap:
                run(bootstrap, "warmup", WARMUP_RECORDS, args.txn_size, args.partitions)
                # alternate so that neither mode gets the warmer half of the run
                for name, txn_size in (("quire_plain", 0), ("quire_txn", args.txn_size)):
                    results[name] = run(bootstrap, name.replace("_", "-"), args.records, txn_size, args.partitions)
                    show(name, results[name])
        if "kafka" in wanted:
            work = Path(tmp) / "kafka"
            work.mkdir()
            with apache_kafka(work) as bootstrap:
                run(bootstrap, "warmup", WARMUP_RECORDS, args.txn_size, args.partitions)
                results["kafka_txn"] = run(bootstrap, "kafka-txn", args.records, args.txn_size, args.partitions)
                show("kafka_txn", results["kafka_txn"])

    def mbps(name: str) -> float:
        return float(results[name]["mbps"]) if name in results else float("nan")

    qt, qp, kt = mbps("quire_txn"), mbps("quire_plain"), mbps("kafka_txn")
    p99 = float(results["quire_txn"]["commit_p99_ms"]) if "quire_txn" in results else float("nan")
    ratio = qt / qp if qp > 0 else float("nan")
    print(f"quire txn/plain: {ratio:.2f} (target >= 0.80); quire commit p99 {p99:.1f} ms (target < 50); "
          f"quire/kafka txn: {qt / kt if kt > 0 else float('nan'):.2f}")
    print(f"BENCH transactions quire_txn_MBps={qt:.2f} quire_plain_MBps={qp:.2f} kafka_txn_MBps={kt:.2f} "
          f"commit_p99_ms={p99:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
