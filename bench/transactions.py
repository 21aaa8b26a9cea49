"""Transactional producer throughput and commit latency: the Java KafkaProducer 4.4.0 (the compat
harness's `txn bench` mode) writing 1 KiB records, acks=all, in transactions of 1,000 records, on

- Quire: `quire standalone --bookies 3` (E=WQ=3, AQ=2), transactional and, in the same run,
  non-transactional (idempotent) for the ratio;
- Apache Kafka 4.4: single node KRaft, transactional.

Both modes use the same client and settings (idempotence, linger.ms=5, batch.size=64 KiB); the
transactional one ends each transaction with a flush and commitTransaction (which would flush
anyway). The commit latency is commitTransaction's alone. On a shared machine one short run says
little: each system runs `--rounds` rounds, Quire's two modes alternating (plain first in even
rounds, transactional first in odd ones); MB/s is over all rounds (records / seconds), the commit
p99 the highest of the rounds' p99s. Targets: Quire transactional >= 0.8x Quire
non-transactional, commit p99 < 50 ms. Ends with
`BENCH transactions quire_txn_MBps=<n> quire_plain_MBps=<n> kafka_txn_MBps=<n> commit_p99_ms=<n>`
(commit_p99_ms: Quire's; MB = 2^20 bytes).

Usage: python3 bench/transactions.py [--records 60000] [--rounds 3] [--txn-size 1000] [--partitions 3]
                                    [--only quire,kafka]
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
RECORD_SIZE = 1024  # the harness's default value size


def run(bootstrap: str, topic: str, records: int, txn_size: int, partitions: int) -> dict[str, Any]:
    create_topic(bootstrap, topic, partitions)
    return one(run_harness("txn", mode="bench", bootstrap=bootstrap, topic=topic, count=records,
                           txn=f"bench-{topic}", timeout=900, **{"txn.size": txn_size}), "bench")


def combine(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One result over several rounds: MB/s over all of them, the highest commit p99 and p50."""
    records = sum(int(r["records"]) for r in rounds)
    seconds = sum(float(r["seconds"]) for r in rounds)
    return {"records": records, "seconds": seconds, "mbps": records * RECORD_SIZE / (1 << 20) / seconds,
            "transactions": sum(int(r["transactions"]) for r in rounds),
            "commit_p50_ms": max(float(r["commit_p50_ms"]) for r in rounds),
            "commit_p99_ms": max(float(r["commit_p99_ms"]) for r in rounds)}


def show(name: str, r: dict[str, Any]) -> None:
    commit = (f", commit p50 {r['commit_p50_ms']:.1f} ms p99 {r['commit_p99_ms']:.1f} ms over {r['transactions']}"
              if r["transactions"] else "")
    print(f"{name:>12}: {r['mbps']:8.2f} MB/s ({r['records']} records in {r['seconds']:.1f} s{commit})", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=60000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--txn-size", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--only", default="quire,kafka")
    args = ap.parse_args()
    kafka_dist.ensure_installed()
    wanted = {n.strip() for n in args.only.split(",") if n.strip()}
    print(f"KafkaProducer {kafka_dist.kafka_version()}: {args.records} records x {RECORD_SIZE} B, acks=all, "
          f"transactions of {args.txn_size}, {args.partitions} partitions, {args.rounds} rounds", flush=True)
    rounds: dict[str, list[dict[str, Any]]] = {}

    def measure(bootstrap: str, name: str, i: int, txn_size: int) -> None:
        r = run(bootstrap, f"{name.replace('_', '-')}-{i}", args.records, txn_size, args.partitions)
        rounds.setdefault(name, []).append(r)
        show(f"{name} #{i}", r)

    with tempfile.TemporaryDirectory(prefix="bench-txn-") as tmp:
        if "quire" in wanted:
            work = Path(tmp) / "quire"
            work.mkdir()
            with quire(work) as bootstrap:
                run(bootstrap, "warmup", WARMUP_RECORDS, args.txn_size, args.partitions)
                # alternate so that neither mode gets the quieter moments of a shared machine
                modes = [("quire_plain", 0), ("quire_txn", args.txn_size)]
                for i in range(args.rounds):
                    for name, txn_size in modes if i % 2 == 0 else modes[::-1]:
                        measure(bootstrap, name, i, txn_size)
        if "kafka" in wanted:
            work = Path(tmp) / "kafka"
            work.mkdir()
            with apache_kafka(work) as bootstrap:
                run(bootstrap, "warmup", WARMUP_RECORDS, args.txn_size, args.partitions)
                for i in range(args.rounds):
                    measure(bootstrap, "kafka_txn", i, args.txn_size)
    results = {name: combine(rs) for name, rs in rounds.items()}
    for name, r in results.items():
        show(name, r)

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
