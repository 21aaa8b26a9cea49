"""Round trips with unchanged clients (confluent-kafka, kafka-python, aiokafka) through a
standalone gateway: keys, null values, headers, every codec, CreateTime and LogAppendTime,
empty and 1 MiB values, MESSAGE_TOO_LARGE; consumers without a group (assign + seek)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTP
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTP

from tests.gateway.test_produce_raw import create_topic
from tests.support.gateway import StandaloneGateway

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def messages(n: int) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    out: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
    for i in range(n):
        key = None if i % 7 == 3 and i % 5 != 2 else b"key-%d" % i
        value = None if i % 5 == 2 else b"value-%d-" % i + b"x" * (i % 50)
        headers = [(f"h{j}", b"hv%d" % (i + j)) for j in range(i % 3)]
        out.append((key, value, headers))
    return out


def confluent_consume(bootstrap: str, topic: str, n: int, start: int = 0, **conf: Any) -> list[Any]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False, **conf})
    try:
        c.assign([TopicPartition(topic, 0, start)])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            got.append(m)
        return got
    finally:
        c.close()


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_round_trip(module_standalone: StandaloneGateway, codec: str) -> None:
    bs = module_standalone.bootstrap
    topic = f"cf-{codec}"
    create_topic(bs, topic)
    msgs = messages(60)
    p = Producer({"bootstrap.servers": bs, "compression.type": codec, "linger.ms": 5, "acks": "all"})
    errors: list[Any] = []
    for k, v, h in msgs:
        p.produce(
            topic,
            key=k,
            value=v,
            headers=h,
            timestamp=1_700_000_000_000,
            on_delivery=lambda e, m: errors.append(e) if e else None,
        )
    assert p.flush(30) == 0 and not errors
    got = confluent_consume(bs, topic, len(msgs))
    assert [m.offset() for m in got] == list(range(len(msgs)))
    assert [(m.key(), m.value(), m.headers() or []) for m in got] == msgs
    assert {m.timestamp() for m in got} == {(1, 1_700_000_000_000)}  # CreateTime kept


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd", None])
def test_kafka_python_round_trip(module_standalone: StandaloneGateway, codec: str | None) -> None:
    bs = module_standalone.bootstrap
    topic = f"kp-{codec}"
    create_topic(bs, topic)
    msgs = messages(40)
    prod = KafkaProducer(bootstrap_servers=bs, compression_type=codec, linger_ms=5, acks="all")
    futs = [prod.send(topic, key=k, value=v, headers=h, partition=0) for k, v, h in msgs]
    offsets = [f.get(timeout=30).offset for f in futs]
    prod.close()
    assert offsets == list(range(len(msgs)))
    cons = KafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False)
    try:
        tp = KpTP(topic, 0)
        cons.assign([tp])
        cons.seek(tp, 5)
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < len(msgs) - 5 and time.monotonic() < deadline:
            for recs in cons.poll(timeout_ms=500).values():
                got.extend(recs)
    finally:
        cons.close()
    assert [r.offset for r in got] == list(range(5, len(msgs)))
    assert [(r.key, r.value, list(r.headers)) for r in got] == msgs[5:]


async def test_aiokafka_round_trip(module_standalone: StandaloneGateway) -> None:
    bs = module_standalone.bootstrap
    topic = "aio-rt"
    create_topic(bs, topic)
    msgs = messages(30)
    prod = AIOKafkaProducer(bootstrap_servers=bs, compression_type="gzip", acks="all")
    await prod.start()
    try:
        metas = [await prod.send_and_wait(topic, key=k, value=v, headers=h, partition=0) for k, v, h in msgs]
    finally:
        await prod.stop()
    assert [m.offset for m in metas] == list(range(len(msgs)))
    cons = AIOKafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False)
    await cons.start()
    try:
        tp = AioTP(topic, 0)
        cons.assign([tp])
        cons.seek(tp, 0)
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < len(msgs) and time.monotonic() < deadline:
            for recs in (await cons.getmany(timeout_ms=500)).values():
                got.extend(recs)
    finally:
        await cons.stop()
    assert [r.offset for r in got] == list(range(len(msgs)))
    assert [(r.key, r.value, list(r.headers)) for r in got] == msgs


def test_log_append_time(module_standalone: StandaloneGateway) -> None:
    bs = module_standalone.bootstrap
    create_topic(bs, "lat", **{"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    p = Producer({"bootstrap.servers": bs, "compression.type": "lz4"})
    for i in range(10):
        p.produce("lat", value=b"%d" % i, timestamp=1000)
    assert p.flush(30) == 0
    got = confluent_consume(bs, "lat", 10)
    after = int(time.time() * 1000)
    for m in got:
        ts_type, ts = m.timestamp()
        assert ts_type == 2 and before - 1000 <= ts <= after + 1000  # TIMESTAMP_LOG_APPEND_TIME


def test_empty_and_large_values(module_standalone: StandaloneGateway) -> None:
    bs = module_standalone.bootstrap
    create_topic(bs, "big", **{"max.message.bytes": str(3 << 20)})
    mib = bytes(range(256)) * 4096
    p = Producer({"bootstrap.servers": bs, "message.max.bytes": 4 << 20})
    p.produce("big", value=b"")
    p.produce("big", value=mib)
    p.produce("big", key=b"k", value=None)
    assert p.flush(30) == 0
    got = confluent_consume(
        bs, "big", 3, **{"fetch.max.bytes": 1 << 20, "max.partition.fetch.bytes": 1 << 19}
    )
    assert [m.value() for m in got] == [b"", mib, None]
    # the default limit (1048588 bytes) refuses a batch holding a 1 MiB value
    create_topic(bs, "small")
    p = Producer({"bootstrap.servers": bs, "message.max.bytes": 4 << 20})
    errs: list[Any] = []
    p.produce("small", value=mib + b"!" * 100, on_delivery=lambda e, m: errs.append(e))
    p.flush(30)
    assert len(errs) == 1 and errs[0] is not None and errs[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    kp = KafkaProducer(bootstrap_servers=bs, max_request_size=4 << 20)
    with pytest.raises(Exception, match=r"MessageSizeTooLarge|MESSAGE_TOO_LARGE|too large"):
        kp.send("small", value=mib + b"!" * 100, partition=0).get(timeout=30)
    kp.close()


def test_idempotent_confluent_producer(module_standalone: StandaloneGateway) -> None:
    bs = module_standalone.bootstrap
    create_topic(bs, "idem", partitions=2)
    p = Producer(
        {
            "bootstrap.servers": bs,
            "enable.idempotence": True,
            "linger.ms": 2,
            "max.in.flight.requests.per.connection": 5,
        }
    )
    for i in range(500):
        p.produce("idem", value=b"%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    for part in (0, 1):
        c = Consumer({"bootstrap.servers": bs, "group.id": "unused", "enable.auto.commit": False})
        c.assign([TopicPartition("idem", part, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 250 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        c.close()
        assert got == [b"%d" % i for i in range(part, 500, 2)]
