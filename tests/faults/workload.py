"""The fault runs' client workload (confluent-kafka, each client on its own thread).

- Producers: idempotent, acks=all, round-robin over the partitions at a target rate. Every
  value starts with a unique id (producer index, sequence number); acknowledgements are kept as
  (offset, id, time) per partition, in the order they arrive.
- Group consumers: subscribe in one group and auto-commit their positions.
- An offset monitor: reads the group's committed offsets (OffsetFetch, outside the group) every
  second and records any that moved backwards.
- read_back(): after the run, every partition from its start to its high watermark.
"""

from __future__ import annotations

import threading
import time
from array import array
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ID_BASE = 10**12  # id = producer * ID_BASE + sequence
PAD = b"." * 80  # values of ~100 bytes
QUIET = {"log_level": 2}  # librdkafka: no per-reconnect lines (the nemesis makes thousands)


def make_id(producer: int, seq: int) -> int:
    return producer * ID_BASE + seq


def parse_id(value: bytes | None) -> int:
    if not value:
        return -1
    head = value.split(b"|", 1)[0]
    try:
        return int(head)
    except ValueError:
        return -1


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=-1)])
    futures[topic].result(60)


@dataclass
class Acks:
    """Acknowledgements of one partition, in arrival order."""

    offsets: array[int] = field(default_factory=lambda: array("q"))
    ids: array[int] = field(default_factory=lambda: array("q"))
    times: array[float] = field(default_factory=lambda: array("d"))


class Workload:
    def __init__(self, bootstrap: str, topic: str, partitions: int, *, rate: float, producers: int = 2,
                 consumers: int = 2, group: str = "chaos") -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.rate = rate  # messages a second, all producers together
        self.group = group
        self.lock = threading.Lock()
        self.acks = [Acks() for _ in range(partitions)]
        self.sent = 0
        self.failed = 0
        self.failures: dict[str, int] = {}
        self.consumed = 0
        self.consumer_errors: dict[str, int] = {}
        self.committed: dict[int, int] = {}
        self.commit_regressions: list[str] = []
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.in_flight_left = 0
        self._threads = [threading.Thread(target=self._produce, args=(i, producers), daemon=True,
                                          name=f"producer-{i}") for i in range(producers)]
        self._consumer_threads = [threading.Thread(target=self._consume, args=(i,), daemon=True,
                                                   name=f"consumer-{i}") for i in range(consumers)]
        self._consumer_threads.append(threading.Thread(target=self._monitor_offsets, daemon=True,
                                                       name="offset-monitor"))

    def start(self) -> None:
        for t in self._threads + self._consumer_threads:
            t.start()

    def stop_producers(self, timeout: float = 300.0) -> None:
        self.stop_producing.set()
        for t in self._threads:
            t.join(timeout)

    def stop_consumers(self, timeout: float = 60.0) -> None:
        self.stop_consuming.set()
        for t in self._consumer_threads:
            t.join(timeout)

    @property
    def acked(self) -> int:
        with self.lock:
            return sum(len(a.ids) for a in self.acks)

    # -- producing --------------------------------------------------------------------------------

    def _produce(self, index: int, producers: int) -> None:
        p = Producer({
            "bootstrap.servers": self.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 10,
            "message.timeout.ms": 600000,  # keep retrying through outages: a failure is a finding
            "topic.metadata.refresh.interval.ms": 2000,
            "queue.buffering.max.messages": 20000,
            **QUIET,
        })

        def on_delivery(err: Any, msg: Any) -> None:
            now = time.monotonic()
            if err is not None:
                with self.lock:
                    self.failed += 1
                    key = str(err)[:120]
                    self.failures[key] = self.failures.get(key, 0) + 1
                return
            offset = msg.offset()
            with self.lock:
                a = self.acks[msg.partition()]
                # librdkafka reports some deliveries as persisted without an offset: -1.
                a.offsets.append(-1 if offset is None else offset)
                a.ids.append(parse_id(msg.value()))
                a.times.append(now)

        per_thread = self.rate / producers
        seq = 0
        start = time.monotonic()
        while not self.stop_producing.is_set():
            due = int((time.monotonic() - start) * per_thread) - seq
            if due <= 0:
                p.poll(0.01)
                continue
            for _ in range(min(due, 500)):
                part = (seq * producers + index) % self.partitions
                value = b"%d|%s" % (make_id(index, seq), PAD)
                try:
                    p.produce(self.topic, value=value, partition=part, on_delivery=on_delivery)
                except BufferError:
                    p.poll(0.1)
                    break
                seq += 1
                with self.lock:
                    self.sent += 1
            p.poll(0)
        left = p.flush(300)
        with self.lock:
            self.in_flight_left += left

    # -- consuming ---------------------------------------------------------------------------------

    def _consume(self, index: int) -> None:
        c = Consumer({
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 1000,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "topic.metadata.refresh.interval.ms": 2000,
            **QUIET,
        })
        c.subscribe([self.topic])
        try:
            while not self.stop_consuming.is_set():
                msgs = c.consume(500, 0.5)
                n = 0
                for m in msgs:
                    if (err := m.error()) is not None:
                        if err.code() != KafkaError._PARTITION_EOF:
                            key = str(err)[:120]
                            with self.lock:
                                self.consumer_errors[key] = self.consumer_errors.get(key, 0) + 1
                        continue
                    n += 1
                if n:
                    with self.lock:
                        self.consumed += n
        finally:
            c.close()

    def _monitor_offsets(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False,
                      **QUIET})
        parts = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        try:
            while not self.stop_consuming.wait(1.0):
                try:
                    got = c.committed(parts, timeout=5)
                except Exception:
                    continue
                for tp in got:
                    if tp.error is not None or tp.offset < 0:
                        continue
                    with self.lock:
                        before = self.committed.get(tp.partition)
                        if before is not None and tp.offset < before:
                            self.commit_regressions.append(
                                f"partition {tp.partition}: committed offset {before} -> {tp.offset}")
                        self.committed[tp.partition] = max(tp.offset, before or 0)
        finally:
            c.close()


def read_back(bootstrap: str, topic: str, partitions: int, timeout: float = 180.0) -> list[tuple[array[int], array[int]]]:
    """Every partition from its first offset to its high watermark: per partition (offsets, ids)."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "chaos-read-back",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "fetch.max.bytes": 8 << 20,
        **QUIET,
    })
    out: list[tuple[array[int], array[int]]] = [(array("q"), array("q")) for _ in range(partitions)]
    deadline = time.monotonic() + timeout
    ends = {}
    for p in range(partitions):
        _, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        ends[p] = hi
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    pos = {p: -1 for p in range(partitions)}
    try:
        while any(pos[p] + 1 < ends[p] for p in range(partitions)):
            if time.monotonic() > deadline:
                # What could not be read counts as lost (the checker's examples say where).
                print(f"read-back incomplete after {timeout} s: at {pos}, ends {ends}", flush=True)
                break
            for m in c.consume(5000, 1.0):
                if m.error():
                    continue
                part, o = m.partition(), m.offset()
                if part is None or o is None:
                    continue
                out[part][0].append(o)
                out[part][1].append(parse_id(m.value()))
                pos[part] = max(pos[part], o)
    finally:
        c.close()
    return out
