"""Memory soak: pushes --gb GB through --topics topics of a real `quire standalone --bookies 3`
(default entry cache) with confluent-kafka producers (acks=all) and consumers reading as data
arrives, and prints the RSS (VmRSS) of the gateway process and of each bookie child every few
seconds and at the end. The gateway's RSS must stay bounded by its configuration (entry cache
and buffers), not grow with the data that passed through it or with the number of topics.

Message sizes: 90% uniform in 1-16 KiB, 10% uniform in 256 KiB-1 MiB. Two consumers (assign,
half of the topics each): one tails the topics while they are written (entry cache reads), the
other starts once everything is written (catch-up reads from the bookies).

Usage: python3 bench/soak_memory.py [--gb 5] [--topics 500] [--interval 5] [--cache-mb N]
Ends with: BENCH soak_memory gateway_rss_max_MB=<n> bookie_rss_max_MB=<n> data_GB=<n>
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _bookies import free_port  # noqa: E402
from produce_consume import Server  # noqa: E402

MAX_MESSAGE = 1 << 20
CONSUMERS = 2


def rss_mb(pid: int) -> float:
    """VmRSS of a process in MB (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        out += [int(c) for c in task.read_text().split()]
    return sorted(out)


class Sizes:
    """Message values: slices of one random buffer (values need not differ, sizes do)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.pool = os.urandom(MAX_MESSAGE)

    def next(self) -> bytes:
        if self.rng.random() < 0.9:
            n = self.rng.randint(1 << 10, 16 << 10)
        else:
            n = self.rng.randint(256 << 10, MAX_MESSAGE)
        start = self.rng.randint(0, MAX_MESSAGE - n)
        return self.pool[start : start + n]


class Progress:
    def __init__(self) -> None:
        self.produced = 0
        self.consumed = 0
        self.lock = threading.Lock()
        self.errors: list[str] = []

    def add_consumed(self, n: int) -> None:
        with self.lock:
            self.consumed += n


def create_topics(bootstrap: str, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for i in range(0, len(names), 100):
        futs = admin.create_topics([NewTopic(n, num_partitions=1, replication_factor=1) for n in names[i : i + 100]])
        for fut in futs.values():
            try:
                fut.result(60)
            except KafkaException as e:
                if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise


def produce(bootstrap: str, topics: list[str], total: int, prog: Progress, seed: int) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "message.max.bytes": 2 * MAX_MESSAGE,
            "queue.buffering.max.kbytes": 65536,
        }
    )
    sizes = Sizes(seed)

    def report(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            prog.errors.append(str(err))

    rng = random.Random(seed + 1)
    sent = 0
    while sent < total:
        value = sizes.next()
        while True:
            try:
                producer.produce(rng.choice(topics), value=value, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        sent += len(value)
        with prog.lock:
            prog.produced += len(value)
    left = producer.flush(600)
    if left:
        prog.errors.append(f"{left} messages undelivered")


def consume(bootstrap: str, topics: list[str], prog: Progress, stop: threading.Event) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "soak",  # assign() with no commits: the group id is only required
            "enable.auto.commit": False,
            "fetch.max.bytes": 16 << 20,
            "max.partition.fetch.bytes": 2 * MAX_MESSAGE,
            "queued.max.messages.kbytes": 65536,
        }
    )
    consumer.assign([TopicPartition(t, 0, 0) for t in topics])
    try:
        while not stop.is_set():
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    prog.add_consumed(len(m.value() or b""))
                elif m.error().code() != KafkaError._PARTITION_EOF:
                    prog.errors.append(str(m.error()))
    finally:
        consumer.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=5.0, help="data to push through, GB (default 5)")
    ap.add_argument("--topics", type=int, default=500, help="topics, one partition each (default 500)")
    ap.add_argument("--producers", type=int, default=2, help="producer threads (default 2)")
    ap.add_argument("--interval", type=float, default=5.0, help="seconds between RSS lines (default 5)")
    ap.add_argument("--cache-mb", type=int, default=None, help="gateway entry cache (default: quire's)")
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="quire-soak-"))
    port = free_port()
    cmd = [sys.executable, "-m", "quire", "standalone", "--data-dir", str(work / "data"), "--port", str(port),
           "--bookies", "3", "--message-max-bytes", str(4 * MAX_MESSAGE),
           "--metrics", "127.0.0.1:0"]  # metrics on, as by default, on free ports  # fmt: skip
    if args.cache_mb is not None:
        cmd += ["--cache-mb", str(args.cache_mb)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    server = Server("quire", cmd, port, work / "quire.log", env=env)
    gw_max = bk_max = 0.0
    try:
        bootstrap = server.bootstrap
        topics = [f"soak-{i}" for i in range(args.topics)]
        create_topics(bootstrap, topics)
        total = int(args.gb * 1e9)
        prog = Progress()
        stop = threading.Event()
        per = (total + args.producers - 1) // args.producers
        producers = [
            threading.Thread(target=produce, args=(bootstrap, topics, per, prog, i), daemon=True)
            for i in range(args.producers)
        ]
        consumers = [
            threading.Thread(target=consume, args=(bootstrap, topics[i::CONSUMERS], prog, stop), daemon=True)
            for i in range(CONSUMERS)
        ]
        start = time.monotonic()
        # The first consumer tails the topics as they are written (reads from the entry cache);
        # the second starts once everything is written (catch-up reads from the bookies).
        for t in [*producers, consumers[0]]:
            t.start()

        def sample(tag: str) -> None:
            nonlocal gw_max, bk_max
            gw = rss_mb(server.proc.pid)
            bks = [rss_mb(c) for c in children(server.proc.pid)]
            gw_max = max(gw_max, gw)
            bk_max = max([bk_max, *bks])
            print(
                f"{tag} t={time.monotonic() - start:6.0f}s produced={prog.produced / 1e9:.2f}GB "
                f"consumed={prog.consumed / 1e9:.2f}GB gateway_rss={gw:.0f}MB "
                f"bookies_rss={'/'.join(f'{b:.0f}' for b in bks)}MB",
                flush=True,
            )

        next_at = time.monotonic()
        deadline = None
        while True:
            if time.monotonic() >= next_at:
                sample("RSS")
                next_at += args.interval
            if server.proc.poll() is not None:
                raise RuntimeError(f"quire exited; see {work / 'quire.log'}")
            if prog.errors:
                raise RuntimeError(f"client errors: {prog.errors[:3]}")
            if not any(t.is_alive() for t in producers):
                if deadline is None:
                    deadline = time.monotonic() + 900
                    for t in consumers[1:]:
                        t.start()
                if prog.consumed >= prog.produced or time.monotonic() > deadline:
                    break
            time.sleep(0.2)
        stop.set()
        for t in consumers:
            t.join(30)
        sample("END")
        if prog.consumed < prog.produced:
            raise RuntimeError(f"consumed {prog.consumed} of {prog.produced} bytes")
        elapsed = time.monotonic() - start
        print(f"pushed {prog.produced / 1e9:.2f} GB through {args.topics} topics in {elapsed:.0f} s "
              f"({prog.produced / 1e6 / elapsed:.0f} MB/s), all consumed")  # fmt: skip
        print(
            f"BENCH soak_memory gateway_rss_max_MB={gw_max:.0f} bookie_rss_max_MB={bk_max:.0f} "
            f"data_GB={prog.produced / 1e9:.2f}"
        )
    finally:
        server.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
