"""`df.write.format("quire")`: rows into a topic through a gateway, with Spark's Kafka-sink
options and columns (value; optional key, headers, partition, topic; `topic` option,
`kafka.bootstrap.servers` and any other `kafka.`-prefixed producer setting).

Guarantee: exactly once per run for readers with `isolation.level=read_committed`, including
tasks Spark retries after a failure and speculative attempts. Kafka's own exactly-once pattern
(as Kafka Streams does it):
- each write job (each start of a stream query) has a run id, made on the driver; every
  attempt of one task uses the transactional id `quire-sink-<run>-<partition>` (a stream adds the
  micro-batch id, which its tasks read from Spark's `streaming.sql.batchId` task property:
  `quire-sink-<run>-<batch>-<partition>`), so `init_transactions` fences any
  earlier attempt of the task and aborts its open transaction;
- a task attempt writes its rows in one transaction and commits, in that same transaction, a
  marker offset (on partition 0 of the first row's topic) for the consumer group named like its
  transactional id: the offset is the count of the task's rows committed so far, the metadata
  their digest. Rows and marker become visible together or not at all;
- every attempt, once it has fenced the earlier ones, reads the marker and skips that many rows
  (failing if their digest differs), then writes the rest. A retry of a task whose earlier
  attempt committed everything (it failed after its commit, or it is a speculative twin) writes
  nothing. A committed prefix is no corner case: when a task fails upstream of the writer (a UDF
  raising), Spark ends the writer's input cleanly, so that attempt commits the rows it got.
Only one attempt at a time can commit: a commit needs the attempt unfenced, and an attempt that
starts later reads its marker. Every attempt of a task must get the same rows in the same order
(Spark's own assumption when it recomputes a partition); an attempt that sees otherwise fails.

What it does not give: readers with `read_uncommitted` (the default for most clients) may see
the rows of an aborted attempt; re-running a job (or restarting a stream, which makes a new run
id) writes its rows again; a transaction must end within `transaction.timeout.ms` (15 minutes
here unless `kafka.transaction.timeout.ms` says otherwise, at most the gateway's
`transaction.max.timeout.ms`). The driver deletes a run's marker groups when the job (or the
micro-batch) commits or aborts, best effort: a failure to delete is logged, never fails the job
(left-over groups hold one offset each and can be deleted by name, `quire-sink-<run>-...`)."""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any

from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from pipeline.options import OptionError

FLUSH_TIMEOUT_S = 120.0
TXN_TIMEOUT_MS = "900000"  # Kafka's default transaction.max.timeout.ms: a task may write for long
ADMIN_TIMEOUT_S = 30.0
GROUP_PREFIX = "quire-sink-"
# Set by Spark's micro-batch execution on every task of a batch (StreamExecution.BATCH_ID_KEY).
BATCH_ID_PROPERTY = "streaming.sql.batchId"

log = logging.getLogger(__name__)


def _bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return str(v).encode()


@dataclass
class QuireCommitMessage(WriterCommitMessage):
    """The task's marker group (None when it had no rows), for the driver to delete."""

    group: str | None


class QuireWriter(DataSourceWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        opts = {k.lower(): str(v) for k, v in options.items()}
        bootstrap = opts.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer")
        names = set(schema.names)
        if "value" not in names:
            raise OptionError("Required attribute 'value' not found")
        self.topic = opts.get("topic")
        if self.topic is None and "topic" not in names:
            raise OptionError("topic option required when no 'topic' attribute is present. "
                              "Use the topic option for setting a topic.")
        self.conf: dict[str, str] = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
        self.conf.setdefault("transaction.timeout.ms", TXN_TIMEOUT_MS)
        self.conf.update({"enable.idempotence": "true", "acks": "all"})
        # Made once on the driver and pickled into every task: all attempts of a task share it.
        self.run = uuid.uuid4().hex

    def _task_id(self) -> str:
        """`quire-sink-<run>-<partition>`: the same for every attempt of this task."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            raise RuntimeError("QuireWriter.write runs in a Spark task")
        return f"{GROUP_PREFIX}{self.run}-{ctx.partitionId()}"

    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        return QuireCommitMessage(group=write_task(self._task_id(), self.topic, self.conf, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        delete_marker_groups(self.conf, self.run, messages, listing=False)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        delete_marker_groups(self.conf, self.run, messages, listing=True)


def write_task(txn_id: str, topic_option: str | None, conf: Mapping[str, str], iterator: Iterator[Row]) -> str | None:
    """One task attempt: its rows in one transaction with the marker (offset: rows committed so
    far, metadata: their digest) for group `txn_id`. Rows an earlier attempt committed are
    skipped once their digest matches. Returns the marker group (None: no rows)."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    first = next(iterator, None)
    if first is None:
        return None  # nothing to write, so no earlier attempt wrote anything either
    marker_topic = topic_option or first.asDict().get("topic")
    if not marker_topic:
        raise ValueError("null topic present in the data; use the topic option")

    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer({**conf, "transactional.id": txn_id})
    # The consumer only reads the marker and gives the group's metadata; it never joins the group.
    consumer = Consumer({k: v for k, v in conf.items() if k in _CLIENT_KEYS} | {
        "group.id": txn_id, "enable.auto.commit": "false", "isolation.level": "read_committed"})
    try:
        # Fences every earlier attempt of this task and ends its transaction (aborted unless its
        # commit had begun, which completes first): after this the marker is settled.
        producer.init_transactions(FLUSH_TIMEOUT_S)
        done = consumer.committed([TopicPartition(marker_topic, 0)], timeout=FLUSH_TIMEOUT_S)[0]
        skip = done.offset if done.error is None and done.offset >= 0 else 0
        digest = hashlib.sha256()
        count = 0
        for row in chain([first], iterator):
            d = row.asDict()
            topic = topic_option or d.get("topic")
            if not topic:
                raise ValueError("null topic present in the data; use the topic option")
            kwargs: dict[str, Any] = {"value": _bytes(d.get("value")), "key": _bytes(d.get("key")),
                                      "on_delivery": delivered}
            if d.get("headers"):
                kwargs["headers"] = [(h["key"], _bytes(h["value"])) for h in d["headers"]]
            if d.get("partition") is not None:
                kwargs["partition"] = int(d["partition"])
            _digest(digest, topic, kwargs)
            count += 1
            if count <= skip:
                if count == skip and digest.hexdigest() != done.metadata:
                    raise RuntimeError(_CHANGED)
                continue  # an earlier attempt committed this row
            if count == skip + 1:
                producer.begin_transaction()
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.1)  # the local queue is full: let deliveries drain it
            producer.poll(0)
            if errors:
                break
        if count < skip:
            raise RuntimeError(_CHANGED)
        if count == skip:
            return txn_id  # an earlier attempt committed every row
        left = producer.flush(FLUSH_TIMEOUT_S)
        if errors or left:
            raise RuntimeError(f"writing to Quire failed: {errors[:3] or f'{left} rows unacknowledged'}")
        producer.send_offsets_to_transaction([TopicPartition(marker_topic, 0, count, metadata=digest.hexdigest())],
                                             consumer.consumer_group_metadata(), FLUSH_TIMEOUT_S)
        producer.commit_transaction(FLUSH_TIMEOUT_S)
    except KafkaException as e:
        raise RuntimeError(f"writing to Quire failed: {e}") from e
    finally:
        # No abort on failure: the next attempt's init_transactions aborts it (or the timeout does),
        # and a failed attempt may no longer own the transactional id.
        consumer.close()
    return txn_id


_CHANGED = ("this task's input differs from the rows an earlier attempt committed: the sink's exactly-once "
            "needs every attempt of a task to get the same rows in the same order")


def _digest(h: Any, topic: str, kwargs: Mapping[str, Any]) -> None:
    """Length-prefixed, so that no two different rows feed the same bytes."""
    parts: list[bytes | None] = [topic.encode(), kwargs["key"], kwargs["value"], str(kwargs.get("partition")).encode()]
    for k, v in kwargs.get("headers", ()):
        parts += [k.encode(), v]
    for b in parts:
        h.update(b"\xff" if b is None else len(b).to_bytes(4, "big") + b)


# Settings a Consumer shares with the producer's (connection and security).
_CLIENT_KEYS = frozenset({"bootstrap.servers", "client.id", "security.protocol", "sasl.mechanism", "sasl.mechanisms",
                          "sasl.username", "sasl.password", "ssl.ca.location", "ssl.certificate.location",
                          "ssl.key.location", "ssl.key.password", "ssl.endpoint.identification.algorithm"})


def delete_marker_groups(conf: Mapping[str, str], run: str, messages: Iterable[WriterCommitMessage | None],
                         *, listing: bool) -> None:
    """Best effort, on the driver: the marker groups the tasks report, and with `listing` every
    group named for the run (an aborted job's failed tasks report nothing but may have committed)."""
    try:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({k: v for k, v in conf.items() if k in _CLIENT_KEYS})
        groups = {m.group for m in messages if isinstance(m, QuireCommitMessage) and m.group}
        if listing:
            listed = admin.list_consumer_groups(request_timeout=ADMIN_TIMEOUT_S).result()
            groups |= {g.group_id for g in listed.valid if g.group_id.startswith(f"{GROUP_PREFIX}{run}-")}
        if not groups:
            return
        for gid, fut in admin.delete_consumer_groups(sorted(groups), request_timeout=ADMIN_TIMEOUT_S).items():
            try:
                fut.result()
            except Exception as e:  # best effort: the job's rows are committed
                log.warning("could not delete the sink's marker group %s: %s", gid, e)
    except Exception as e:  # best effort: never fails the job
        log.warning("could not delete the sink's marker groups of run %s: %s", run, e)


class QuireStreamWriter(DataSourceStreamWriter):
    """`writeStream.format("quire")`: each micro-batch's tasks write as a batch job's do, with
    `quire-sink-<run>-<batch>-<partition>` as transactional id and marker group (the run id is
    made when the query starts): exactly once per micro-batch and run for read_committed readers.
    A query restarted from its checkpoint is a new run: Spark replays the micro-batch it had not
    committed, and rows of that batch already committed are written again (at-least-once across
    restarts, as Spark's own Kafka sink)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.batch = QuireWriter(options, schema)

    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch_id = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
        if ctx is None or batch_id is None:
            raise RuntimeError(f"QuireStreamWriter.write runs in a micro-batch task ({BATCH_ID_PROPERTY} unset)")
        txn_id = f"{GROUP_PREFIX}{self.batch.run}-{batch_id}-{ctx.partitionId()}"
        return QuireCommitMessage(group=write_task(txn_id, self.batch.topic, self.batch.conf, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        delete_marker_groups(self.batch.conf, f"{self.batch.run}-{batchId}", messages, listing=False)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        delete_marker_groups(self.batch.conf, f"{self.batch.run}-{batchId}", messages, listing=True)
