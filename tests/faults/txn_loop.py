"""A consume-transform-produce application, as an unchanged confluent-kafka client writes one:
a read_committed consumer (manually assigned, in a group whose offsets the transactions carry)
and a transactional producer. Each transaction attempt consumes a batch of the input, writes one
tagged record per input record (tests/faults/txn_checker.py `encode`) to the same partition of
the output, adds the consumed positions with send_offsets_to_transaction, and commits, or
aborts at random (seeded). After an abort or an abortable error it rewinds to the group's
committed offsets; after a fatal error it makes a new producer (init_transactions fences the old
one and finishes its transaction) and rewinds likewise. The fate of every attempt, as the
application saw it, goes to the checker.

`faults` lets a test act from inside the loop at a chosen point (e.g. SIGKILL the gateway that
coordinates the transactions just before a commit): [(phase, after_inputs, action)], with phase
"produce" (half the batch produced) or "commit" (before commit_transaction); each action runs
once, the first time its phase is reached with at least `after_inputs` inputs committed.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.faults.txn_checker import Attempt, Fate, OutRecord, decode, encode
from tests.faults.workload import QUIET

TIMEOUT = 60.0  # one transactional call (the coordinator may be moving to another gateway)
# librdkafka's send_offsets_to_transaction can block for good, past its timeout, when the group
# coordinator it cached left the cluster's metadata (a SIGKILLed gateway): confluentinc/librdkafka
# issues 5511 and 5456. The application gives such a producer up (a new one with the same
# transactional id fences it) after this long.
SEND_OFFSETS_TIMEOUT, HUNG_AFTER = 20.0, 40.0
# librdkafka's abort_transaction waits out its whole timeout when the messages to purge were in a
# produce retry (e.g. NOT_ENOUGH_REPLICAS while a transaction coordinator moves); called again,
# it purges them at once: a short timeout, and the retry.
ABORT_TIMEOUT = 10.0


class Hung(Exception):
    """A client call did not return (see HUNG_AFTER)."""
PAD = b"x" * 16
# librdkafka's transaction and protocol log on stderr, to see what a stuck producer waits for
DEBUG = {"debug": "eos,protocol,broker", "log_level": 7} if os.environ.get("QUIRE_TXN_LOOP_DEBUG") else {}


def fill_input(bootstrap: str, topic: str, partitions: int, n: int) -> None:
    """Records 0..n-1 (value: the decimal seq), seq in partition seq % partitions."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20,
                  "batch.num.messages": 10000, **QUIET})
    for seq in range(n):
        while True:
            try:
                p.produce(topic, value=b"%d" % seq, partition=seq % partitions)
                break
            except BufferError:
                p.poll(0.1)
    left = p.flush(120)
    assert left == 0, f"{left} input records not delivered"


@dataclass
class TxnLoop:
    bootstrap: str
    input: str
    output: str
    partitions: int
    inputs: int
    seed: int
    txn_id: str = "txn-loop"
    group: str = "txn-loop"
    abort_rate: float = 0.2
    batch: tuple[int, int] = (500, 1000)
    faults: list[tuple[str, int, Callable[[], None]]] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    position: int = 0  # inputs committed, per the last commit or rewind
    producers: int = 0  # producers made (1 + one per fatal error)
    errors: dict[str, int] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)
    failure: BaseException | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.ends = {p: len(range(p, self.inputs, self.partitions)) for p in range(self.partitions)}
        self.lock = threading.Lock()

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:
            self.failure = e
            raise
        finally:
            self.done.set()

    def _error(self, where: str, e: KafkaException) -> KafkaError:
        err: KafkaError = e.args[0]
        key = f"{where}: {err.name()}: {err.str()[:100]}"
        with self.lock:
            self.errors[key] = self.errors.get(key, 0) + 1
        return err

    def _producer(self) -> Producer:
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id,
                      "transaction.timeout.ms": 60000, "message.timeout.ms": 60000, "linger.ms": 5,
                      "topic.metadata.refresh.interval.ms": 2000, **QUIET, **DEBUG})
        self._retry("init_transactions", p.init_transactions, TIMEOUT)
        self.producers += 1
        return p

    def _retry(self, where: str, call: Callable[..., Any], *args: Any, unless_fatal: bool = False) -> Any:
        """A transactional call, again while it fails with a retriable error (a timeout while the
        coordinator moves), or with any error but a fatal one if `unless_fatal`."""
        deadline = time.monotonic() + 180.0
        while True:
            try:
                return call(*args)
            except KafkaException as e:
                err = self._error(where, e)
                again = not err.fatal() if unless_fatal else err.retriable()
                if not again or time.monotonic() > deadline:
                    raise
                if unless_fatal:
                    time.sleep(0.2)  # e.g. NOT_COORDINATOR: librdkafka looks the coordinator up again

    def _bounded(self, where: str, call: Callable[..., Any], *args: Any) -> None:
        """_retry on a thread of its own, given up (Hung) after HUNG_AFTER seconds."""
        failed: list[BaseException] = []

        def run() -> None:
            try:
                self._retry(where, call, *args)
            except BaseException as e:
                failed.append(e)

        t = threading.Thread(target=run, name=f"txn-loop-{where}", daemon=True)
        t.start()
        t.join(HUNG_AFTER)
        if t.is_alive():
            key = f"{where}: hung for {HUNG_AFTER:.0f} s"
            with self.lock:
                self.errors[key] = self.errors.get(key, 0) + 1
            raise Hung(where)
        if failed:
            raise failed[0]

    def _rewind(self, consumer: Consumer) -> dict[int, int]:
        """Positions from the group's committed offsets (stable ones: read_committed asks for them)."""
        tps = [TopicPartition(self.input, p) for p in range(self.partitions)]
        got: list[TopicPartition] = self._retry("committed", consumer.committed, tps, TIMEOUT,
                                                  unless_fatal=True)
        pos = {tp.partition: max(tp.offset, 0) for tp in got}
        consumer.assign([TopicPartition(self.input, p, pos[p] if pos[p] > 0 else OFFSET_BEGINNING)
                         for p in range(self.partitions)])
        self.position = sum(pos.values())
        return pos

    def _phase(self, phase: str) -> None:
        for i, (name, after, action) in enumerate(self.faults):
            if name == phase and self.position >= after:
                del self.faults[i]
                action()
                return

    def _consume(self, consumer: Consumer, pos: dict[int, int], n: int) -> list[Any]:
        """Up to n input records from pos on (fewer at the end of the input)."""
        got: list[Any] = []
        while len(got) < n and any(pos[p] < self.ends[p] for p in pos):
            for m in consumer.consume(n - len(got), 1.0):
                if m.error() is not None:
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        key = f"consume: {m.error().name()}"
                        self.errors[key] = self.errors.get(key, 0) + 1
                    continue
                p, o = m.partition(), m.offset()
                if o != pos[p]:  # a message from before a rewind would be a client bug: say so
                    raise AssertionError(f"input p{p}: offset {o} consumed at position {pos[p]}")
                pos[p] = o + 1
                got.append(m)
        return got

    def _run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "enable.auto.offset.store": False, "auto.offset.reset": "earliest",
                             "topic.metadata.refresh.interval.ms": 2000, **QUIET})
        producer = self._producer()
        pos = self._rewind(consumer)
        try:
            while any(pos[p] < self.ends[p] for p in pos):
                attempt = Attempt(len(self.attempts) + 1, Fate.ABORTED)
                self.attempts.append(attempt)
                abort = self.rng.random() < self.abort_rate
                start = dict(pos)
                try:
                    producer.begin_transaction()
                    msgs = self._consume(consumer, pos, self.rng.randint(*self.batch))
                    for i, m in enumerate(msgs):
                        p = m.partition()
                        while True:
                            try:
                                producer.produce(self.output, value=encode(int(m.value()), attempt.id, PAD),
                                                 partition=p)
                                break
                            except BufferError:
                                producer.poll(0.1)
                        attempt.produced[p] = attempt.produced.get(p, 0) + 1
                        if i == len(msgs) // 2:
                            self._phase("produce")
                    offsets = [TopicPartition(self.input, p, o) for p, o in pos.items() if o != start[p]]
                    self._bounded("send_offsets_to_transaction", producer.send_offsets_to_transaction,
                                  offsets, consumer.consumer_group_metadata(), SEND_OFFSETS_TIMEOUT)
                    if abort:
                        attempt.how = "random abort"
                        self._retry("abort_transaction", producer.abort_transaction, ABORT_TIMEOUT)
                        pos = self._rewind(consumer)
                        continue
                    self._phase("commit")
                    attempt.fate = Fate.UNKNOWN
                    self._retry("commit_transaction", producer.commit_transaction, TIMEOUT)
                    attempt.fate = Fate.COMMITTED
                    self.position = sum(pos.values())
                except Hung:
                    attempt.how = "send_offsets_to_transaction hung: new producer"
                    producer = self._producer()  # the hung one is left to its thread, fenced
                    pos = self._rewind(consumer)
                except KafkaException as e:
                    err = self._error("transaction", e)
                    attempt.how = f"{err.name()} ({'fatal' if err.fatal() else 'abortable' if err.txn_requires_abort() else 'other'})"
                    if err.txn_requires_abort() and not err.fatal():
                        try:
                            self._retry("abort_transaction", producer.abort_transaction, ABORT_TIMEOUT)
                            attempt.fate = Fate.ABORTED  # a commit, if asked for, did not happen
                        except KafkaException as e2:
                            self._error("abort after error", e2)
                            producer = self._new_producer(producer)
                    else:
                        producer = self._new_producer(producer)
                    pos = self._rewind(consumer)
        finally:
            producer.flush(10)
            consumer.close()

    def _new_producer(self, old: Producer) -> Producer:
        old.purge()
        old.flush(0)
        return self._producer()


def read_output(bootstrap: str, topic: str, partitions: int, isolation: str, *,
                until: Callable[[], dict[int, int] | None], timeout: float = 300.0) -> list[list[OutRecord]]:
    """Every record of each partition, from its start, as a consumer with this isolation level
    sees them; until `until()` names each partition's end offset (the high watermark once the
    writer is done) and the consumer reached it there. Tails the topic while `until()` is None."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txn-read-{isolation}",
                  "isolation.level": isolation, "enable.auto.commit": False, "enable.partition.eof": True,
                  "fetch.max.bytes": 8 << 20, "topic.metadata.refresh.interval.ms": 2000, **QUIET})
    out: list[list[OutRecord]] = [[] for _ in range(partitions)]
    at_end: dict[int, int] = {}  # partition -> offset of its last end-of-partition event
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    deadline = time.monotonic() + timeout
    try:
        while True:
            for m in c.consume(5000, 0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_end[m.partition()] = m.offset()
                    continue
                p = m.partition()
                out[p].append(decode(m.offset(), m.value()))
                at_end.pop(p, None)
            ends = until()
            if ends is not None and all(at_end.get(p, -1) >= ends[p] for p in range(partitions)):
                return out
            if time.monotonic() > deadline:
                print(f"{isolation} reader: not at the end within {timeout} s: at {at_end}, ends {ends}", flush=True)
                return out
    finally:
        c.close()


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-read-watermarks", **QUIET})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
    finally:
        c.close()
