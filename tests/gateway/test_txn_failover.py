"""Transaction coordinator failover: ZooKeeper + a bookie + two `quire gateway` processes. A
confluent-kafka transactional producer commits one transaction and leaves a second open; the
gateway coordinating its transactional id is SIGKILLed. A new producer with the same id
initializes on the survivor (which replays the shard of `__transaction_state`, aborts the open
transaction under a bumped epoch and writes its markers to partitions that may have moved too)
and commits: read_committed sees both committed transactions, never the open one."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from kafka_wire.messages.find_coordinator import FindCoordinatorRequest
from tests.gateway.test_groups_failover import Gateway
from tests.support.gateway import RawKafka

pytestmark = pytest.mark.slow
TOPIC, TXN_ID, PARTITIONS = "txn-fo", "txn-fo-id", 4


def txn_coordinator_port(address: str) -> int:
    with RawKafka(address) as raw:
        for _ in range(100):
            r: Any = raw.request(10, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=[TXN_ID]))
            if r.coordinators[0].error_code == 0:
                return int(r.coordinators[0].port)
            time.sleep(0.2)
    raise AssertionError("no transaction coordinator found")


def first_producer(bootstrap: str) -> Any:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN_ID})
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(10):
        p.produce(TOPIC, value=f"c1-{i}".encode(), partition=i % PARTITIONS)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(5):
        p.produce(TOPIC, value=f"open-{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(60) == 0  # written, never committed
    return p


def second_producer(bootstrap: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN_ID})
    p.init_transactions(120)  # retried until the survivor coordinates the id and aborted the open one
    p.begin_transaction()
    for i in range(3):
        p.produce(TOPIC, value=f"c2-{i}".encode(), partition=i % PARTITIONS)
    p.commit_transaction(60)


def read_committed(bootstrap: str, expected: int) -> list[str]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-fo-reader", "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        got: list[str] = []
        for _ in range(600):
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value().decode())
            if len(got) >= expected and all(
                    c.position([TopicPartition(TOPIC, p)])[0].offset >= c.get_watermark_offsets(
                        TopicPartition(TOPIC, p), cached=False)[1] for p in range(PARTITIONS)):
                return got
        return got
    finally:
        c.close()


async def test_transactions_survive_coordinator_crash(zookeeper: Any, bookie_cluster: Any, tmp_path: Path) -> None:
    url = zookeeper.url()
    await bookie_cluster(1, url)
    gws = [Gateway(1, url, tmp_path / "gw1.log"), Gateway(2, url, tmp_path / "gw2.log")]
    try:
        for g in gws:
            await asyncio.to_thread(g.wait_ready)
        bootstrap = ",".join(g.address for g in gws)
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        await asyncio.to_thread(first_producer, bootstrap)
        port = await asyncio.to_thread(txn_coordinator_port, gws[0].address)
        victim = next(g for g in gws if g.port == port)
        survivor = next(g for g in gws if g is not victim)
        victim.kill()
        await asyncio.to_thread(second_producer, survivor.address)
        got = await asyncio.to_thread(read_committed, survivor.address, 13)
        assert sorted(got) == sorted([f"c1-{i}" for i in range(10)] + [f"c2-{i}" for i in range(3)])
    finally:
        for g in gws:
            g.kill()
