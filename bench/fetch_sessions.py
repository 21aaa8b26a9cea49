"""Fetch sessions (KIP-227) benchmark: one consumer of 500 partitions with little traffic (a
producer writes --rate small records per second, spread over the partitions), fetching as the
Java consumer does (Fetch v13 by topic id, max_wait 500 ms, min_bytes 1), once with incremental
sessions and once with sessionless full requests, against `quire standalone --bookies 1` and, in
the same run, a single-node KRaft Apache Kafka (the version compat_tests/support/kafka_dist pins).

Measured per mode over --seconds: fetches per second, bytes per second on the consumer's
connection (requests + responses), and CPU seconds per second of the server (Quire: the
standalone process and its bookies; Kafka: its JVM).

Usage: python3 bench/fetch_sessions.py [--partitions 500] [--seconds 20] [--rate 20] [--no-kafka]
Ends with: BENCH fetch_sessions quire_cpu_s=<n> quire_bytes_per_s=<n> kafka_bytes_per_s=<n>
(with sessions; quire_cpu_s is CPU seconds per second).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(1, str(ROOT))

import _bookies as bk  # noqa: E402
import produce_consume as pc  # noqa: E402

from compat_tests.support.wire import Wire, batch  # noqa: E402
from kafka_wire.errors import ErrorCode  # noqa: E402
from kafka_wire.frames import decode_response  # noqa: E402
from kafka_wire.messages.fetch import FetchRequest as F  # noqa: E402

FETCH_KEY, FETCH_VERSION = 1, 13
KAFKA_JVM_OPTS = ("-Xms1g", "-Xmx1g", "-XX:+UseG1GC")
TOPIC = "sessions"


@dataclass
class Mode:
    fetches_per_s: float
    bytes_per_s: float
    cpu_s_per_s: float
    records: int


class Consumer:
    """A raw fetcher of every partition of TOPIC, with or without an incremental session."""

    def __init__(self, bootstrap: str, topic_id: uuid.UUID, partitions: int, sessions: bool) -> None:
        self.w = Wire(bootstrap)
        self.tid, self.sessions = topic_id, sessions
        self.offsets = dict.fromkeys(range(partitions), 0)
        self.sid, self.epoch = 0, 0
        self.changed: set[int] = set()
        self.bytes = self.fetches = self.records = 0

    def _request(self) -> F:
        full = not self.sessions or self.sid == 0
        parts = self.offsets if full else {p: self.offsets[p] for p in sorted(self.changed)}
        fps = [F.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20) for p, o in parts.items()]
        return F(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=50 << 20,
                 session_id=self.sid, session_epoch=self.epoch if self.sessions else -1,
                 topics=[F.FetchTopic(topic_id=self.tid, partitions=fps)] if fps else [])

    def fetch_once(self) -> None:
        _, data = self.w.raw.frame(FETCH_KEY, FETCH_VERSION, self._request())
        self.w.raw.send_raw(data)
        frame = self.w.raw.recv_frame()
        self.bytes += len(data) + 4 + len(frame)
        self.fetches += 1
        _, resp = decode_response(FETCH_KEY, FETCH_VERSION, frame)
        if resp.error_code in (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH):
            self.sid, self.epoch = 0, 0
            return
        assert resp.error_code == 0, resp.error_code
        self.changed = set()
        for t in resp.responses:
            for p in t.partitions:
                if p.error_code == 0 and p.records:
                    # the next offset: after the last record of the last whole batch
                    data = bytes(p.records)
                    pos, nxt = 0, self.offsets[p.partition_index]
                    while len(data) - pos >= 61:
                        base = int.from_bytes(data[pos:pos + 8], "big")
                        length = int.from_bytes(data[pos + 8:pos + 12], "big")
                        if pos + 12 + length > len(data):
                            break
                        delta = int.from_bytes(data[pos + 23:pos + 27], "big")
                        nxt = base + delta + 1
                        self.records += int.from_bytes(data[pos + 57:pos + 61], "big")
                        pos += 12 + length
                    self.offsets[p.partition_index] = nxt
                    self.changed.add(p.partition_index)
        if self.sessions:
            if self.sid == 0:
                self.sid, self.epoch = resp.session_id, 1 if resp.session_id else 0
            else:
                self.epoch += 1

    def close(self) -> None:
        self.w.close()


def _produce_slowly(bootstrap: str, partitions: int, rate: float, stop: threading.Event) -> None:
    with Wire(bootstrap) as w:
        p = 0
        while not stop.wait(1 / rate):
            w.produce(TOPIC, p, batch(1, size=100))
            p = (p + 7) % partitions


def measure(name: str, bootstrap: str, server_pids: list[int], partitions: int, seconds: float,
            rate: float) -> dict[bool, Mode]:
    with Wire(bootstrap) as w:
        assert w.create_topics((TOPIC, partitions, -1, {}))[TOPIC] == 0
        deadline = time.monotonic() + 300  # 500 partitions open one by one on a loaded machine
        while True:
            try:
                w.wait_leaders(TOPIC, partitions)
                break
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
        tid = w.metadata([TOPIC]).topics[0].topic_id
    out: dict[bool, Mode] = {}
    stop = threading.Event()
    producer = threading.Thread(target=_produce_slowly, args=(bootstrap, partitions, rate, stop), daemon=True)
    producer.start()
    try:
        for sessions in (True, False):
            c = Consumer(bootstrap, tid, partitions, sessions)
            try:
                c.fetch_once()  # the first (full) answer carries every partition: not measured
                c.bytes = c.fetches = c.records = 0
                cpu0 = sum(bk.cpu_seconds(p) for p in _tree(server_pids))
                t0 = time.monotonic()
                while time.monotonic() - t0 < seconds:
                    c.fetch_once()
                elapsed = time.monotonic() - t0
                cpu = sum(bk.cpu_seconds(p) for p in _tree(server_pids)) - cpu0
            finally:
                c.close()
            m = out[sessions] = Mode(c.fetches / elapsed, c.bytes / elapsed, cpu / elapsed, c.records)
            print(f"{name:11s} {'sessions ' if sessions else 'sessionless'}: {m.fetches_per_s:6.1f} fetches/s "
                  f"{m.bytes_per_s:10.0f} bytes/s  cpu {m.cpu_s_per_s:5.3f} s/s  ({m.records} records)", flush=True)
    finally:
        stop.set()
        producer.join()
    return out


def _tree(pids: list[int]) -> list[int]:
    out: list[int] = []
    for p in pids:
        out += bk.process_tree(p)
    return out


def quire(work: Path, args: argparse.Namespace) -> dict[bool, Mode]:
    server = pc.start_quire(work, bookies=1)
    try:
        return measure("quire", server.bootstrap, [server.proc.pid], args.partitions, args.seconds, args.rate)
    finally:
        server.stop()
        shutil.rmtree(work / f"quire-{server.port}", ignore_errors=True)


def kafka(work: Path, args: argparse.Namespace) -> dict[bool, Mode]:
    from compat_tests.support import kafka_dist
    from compat_tests.support.apache_kafka import start_apache_kafka

    broker = start_apache_kafka(work / "kafka", jvm_opts=KAFKA_JVM_OPTS)
    try:
        return measure(f"kafka-{kafka_dist.kafka_version()}", broker.bootstrap, [broker.pid], args.partitions,
                       args.seconds, args.rate)
    finally:
        broker.stop()
        shutil.rmtree(work / "kafka", ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=20.0, help="records produced per second")
    ap.add_argument("--no-kafka", action="store_true")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-fetch-sessions-"))
    try:
        q = quire(work, args)
        k: dict[bool, Any] = {} if args.no_kafka else kafka(work, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    nan = float("nan")
    kb = k[True].bytes_per_s if k else nan
    print(f"quire sessionless: cpu {q[False].cpu_s_per_s:.3f} s/s, {q[False].bytes_per_s:.0f} bytes/s; "
          f"kafka sessionless: {k[False].bytes_per_s if k else nan:.0f} bytes/s")
    print(f"BENCH fetch_sessions quire_cpu_s={q[True].cpu_s_per_s:.3f} quire_bytes_per_s={q[True].bytes_per_s:.0f} "
          f"kafka_bytes_per_s={kb:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
