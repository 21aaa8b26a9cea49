"""A compact pass of the Python clients (kafka-python, aiokafka, confluent-kafka) through the
harness, so they appear in the compat table next to the others: keyed messages with headers
produced and read back in order with their offsets, then a group that consumes, commits, and
resumes from its committed offsets."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from compat_tests.support.clients import create_topic, unique
from compat_tests.support.targets import Target

PARTITIONS = 3
N = 12  # messages per partition and phase
CLIENTS = ["kafka-python", "aiokafka", "confluent-kafka"]
Row = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes]]]


def expected(phase: str, p: int, start: int = 0) -> list[Row]:
    return [
        (p, start + i, f"{phase}{p}".encode(), f"{phase}-{p}-{i}".encode(), [("i", str(i).encode())])
        for i in range(N)
    ]


# -- producing ------------------------------------------------------------------------------------

def produce(client: str, bootstrap: str, topic: str, phase: str) -> list[tuple[int, int]]:
    """N keyed messages with a header to each partition; returns the acknowledged offsets."""
    items = [(p, f"{phase}{p}".encode(), f"{phase}-{p}-{i}".encode(), [("i", str(i).encode())])
             for p in range(PARTITIONS) for i in range(N)]
    if client == "kafka-python":
        from kafka import KafkaProducer

        kp = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        futs = [kp.send(topic, key=k, value=v, partition=p, headers=h) for p, k, v, h in items]
        acks = [(md.partition, md.offset) for md in (f.get(timeout=30) for f in futs)]
        kp.close()
        return acks
    if client == "aiokafka":
        async def go() -> list[tuple[int, int]]:
            from aiokafka import AIOKafkaProducer

            ap = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
            await ap.start()
            try:
                out = []
                for p, k, v, h in items:
                    md = await ap.send_and_wait(topic, key=k, value=v, partition=p, headers=h)
                    out.append((md.partition, md.offset))
                return out
            finally:
                await ap.stop()

        return asyncio.run(go())
    from confluent_kafka import Producer

    delivered_acks: list[tuple[int, int]] = []

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        delivered_acks.append((msg.partition(), msg.offset()))

    cp = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for p, k, v, h in items:
        cp.produce(topic, key=k, value=v, partition=p, headers=list(h), on_delivery=delivered)
    assert cp.flush(30) == 0
    return delivered_acks


# -- consuming in a group -------------------------------------------------------------------------

def consume_group(client: str, bootstrap: str, topic: str, group: str, n: int) -> list[Row]:
    """Subscribe in `group`, read n messages, commit synchronously, leave."""
    deadline = time.monotonic() + 60
    rows: list[Row] = []
    if client == "kafka-python":
        from kafka import KafkaConsumer

        kc = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                           enable_auto_commit=False)
        while len(rows) < n and time.monotonic() < deadline:
            for records in kc.poll(timeout_ms=500).values():
                rows += [(r.partition, r.offset, r.key, r.value, list(r.headers)) for r in records]
        kc.commit()
        kc.close()
        return rows
    if client == "aiokafka":
        async def go() -> list[Row]:
            from aiokafka import AIOKafkaConsumer

            ac = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                  auto_offset_reset="earliest", enable_auto_commit=False)
            await ac.start()
            try:
                while len(rows) < n and time.monotonic() < deadline:
                    for records in (await ac.getmany(timeout_ms=500)).values():
                        rows.extend((r.partition, r.offset, r.key, r.value, list(r.headers)) for r in records)
                await ac.commit()
            finally:
                await ac.stop()
            return rows

        return asyncio.run(go())
    from confluent_kafka import Consumer

    cc = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                   "enable.auto.commit": False})
    cc.subscribe([topic])
    while len(rows) < n and time.monotonic() < deadline:
        m = cc.poll(0.5)
        if m is None:
            continue
        assert not m.error(), m.error()
        rows.append((m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or [])))  # type: ignore[arg-type]
    cc.commit(asynchronous=False)
    cc.close()
    return rows


def committed(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in tps}


def by_partition(rows: list[Row]) -> dict[int, list[Row]]:
    return {p: [r for r in rows if r[0] == p] for p in range(PARTITIONS)}


@pytest.mark.parametrize("client", [pytest.param(c, marks=pytest.mark.compat(suite="groups", client=c)) for c in CLIENTS])
@pytest.mark.parametrize("target", ["standalone", "cluster"], indirect=True)
def test_produce_then_group_consume_commit_and_resume(target: Target, client: str) -> None:
    topic, group = unique(f"py-{client}"), unique(f"py-{client}-g")
    create_topic(target.bootstrap, topic, partitions=PARTITIONS)
    acks = produce(client, target.bootstrap, topic, "a")
    assert sorted(acks) == [(p, o) for p in range(PARTITIONS) for o in range(N)]

    first = by_partition(consume_group(client, target.bootstrap, topic, group, PARTITIONS * N))
    assert first == {p: expected("a", p) for p in range(PARTITIONS)}
    assert committed(target.bootstrap, topic, group) == {p: N for p in range(PARTITIONS)}

    # The same group resumes after its commit: only the second phase's messages.
    produce(client, target.bootstrap, topic, "b")
    second = by_partition(consume_group(client, target.bootstrap, topic, group, PARTITIONS * N))
    assert second == {p: expected("b", p, start=N) for p in range(PARTITIONS)}
    assert committed(target.bootstrap, topic, group) == {p: 2 * N for p in range(PARTITIONS)}
