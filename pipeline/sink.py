"""`df.write.format("quire")`: rows into a topic through a gateway, with Spark's Kafka-sink
options and columns (value; optional key, headers, partition, topic; `topic` option,
`kafka.bootstrap.servers` and any other `kafka.`-prefixed producer setting).

Guarantee: each task writes with its own idempotent producer (enable.idempotence, acks=all), so
a task attempt never leaves duplicates (its retries of a batch are deduplicated by the
partition owner) and fails unless every row is acknowledged. A task Spark re-runs after a
failure writes its rows again: across task attempts the guarantee is at-least-once, as with
Spark's own Kafka sink."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from pipeline.options import OptionError

FLUSH_TIMEOUT_S = 120.0


def _bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return str(v).encode()


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
        self.conf.update({"enable.idempotence": "true", "acks": "all"})

    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        from confluent_kafka import KafkaException, Producer

        errors: list[str] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(str(err))

        producer = Producer(self.conf)
        try:
            for row in iterator:
                d = row.asDict()
                topic = self.topic or d.get("topic")
                if not topic:
                    raise ValueError("null topic present in the data; use the topic option")
                kwargs: dict[str, Any] = {"value": _bytes(d.get("value")), "key": _bytes(d.get("key")),
                                          "on_delivery": delivered}
                if d.get("headers"):
                    kwargs["headers"] = [(h["key"], _bytes(h["value"])) for h in d["headers"]]
                if d.get("partition") is not None:
                    kwargs["partition"] = int(d["partition"])
                while True:
                    try:
                        producer.produce(topic, **kwargs)
                        break
                    except BufferError:
                        producer.poll(0.1)  # the local queue is full: let deliveries drain it
                producer.poll(0)
                if errors:
                    break
            left = producer.flush(FLUSH_TIMEOUT_S)
        except KafkaException as e:
            raise RuntimeError(f"writing to Quire failed: {e}") from e
        if errors or left:
            raise RuntimeError(f"writing to Quire failed: {errors[:3] or f'{left} rows unacknowledged'}")
        return WriterCommitMessage()


class QuireStreamWriter(DataSourceStreamWriter):
    """`writeStream.format("quire")`: each micro-batch's tasks write as a batch write does (the
    same guarantee: at-least-once when Spark re-runs a task or a micro-batch)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.batch = QuireWriter(options, schema)

    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        return self.batch.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # every row was acknowledged by the gateway when its task ended

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # acknowledged rows stay: nothing to undo without transactions
