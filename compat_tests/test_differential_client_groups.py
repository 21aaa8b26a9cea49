"""Differential run with a real client: two confluent-kafka (librdkafka) members of a
cooperative-sticky group, and what the admin API then describes (state, assignor, how the
partitions are spread, committed offsets) on Apache Kafka and on Quire."""

from __future__ import annotations

import time
from typing import Any

import pytest

from compat_tests.support.allowlist import Differences
from compat_tests.support.clients import unique
from compat_tests.support.differential import Observations, run_both
from compat_tests.support.targets import Target
from compat_tests.support.wire import Wire

pytestmark = pytest.mark.compat(suite="differential", client="confluent-kafka")
PARTITIONS = 6


def _describe(admin: Any, group: str) -> Observations:
    g = admin.describe_consumer_groups([group])[group].result(30)
    spread = sorted(len(m.assignment.topic_partitions) for m in g.members)
    return {"state": str(g.state).rsplit(".", 1)[-1], "assignor": g.partition_assignor,
            "members": len(g.members), "spread": spread, "simple": g.is_simple_consumer_group}


def cooperative_sticky_group(bootstrap: str) -> Observations:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic, group = unique("d-coop"), unique("d-coop-g")
    with Wire(bootstrap) as w:
        w.create(topic, partitions=PARTITIONS)
        w.find_coordinator(group)
    prod = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    for i in range(PARTITIONS * 4):
        prod.produce(topic, value=str(i).encode(), partition=i % PARTITIONS)
    assert prod.flush(30) == 0

    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 300}
    members = [Consumer(conf), Consumer(conf)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    out: Observations = {}
    seen: set[tuple[int, int]] = set()
    try:
        for m in members:
            m.subscribe([topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for m in members:
                msg = m.poll(0.1)
                if msg is not None and not msg.error():
                    seen.add((int(msg.partition() or 0), int(msg.offset() or 0)))
            sizes = sorted(len(m.assignment()) for m in members)
            if sizes == [PARTITIONS // 2, PARTITIONS // 2] and len(seen) == PARTITIONS * 4:
                break
        out["consumed_all_once"] = sorted(seen) == [(p, o) for p in range(PARTITIONS) for o in range(4)]
        out["assignment_sizes"] = sorted(len(m.assignment()) for m in members)
        out["disjoint"] = not ({(tp.topic, tp.partition) for tp in members[0].assignment()}
                               & {(tp.topic, tp.partition) for tp in members[1].assignment()})
        out["describe.two_members"] = _describe(admin, group)
        members[0].commit(offsets=[TopicPartition(topic, tp.partition, 4) for tp in members[0].assignment()],
                          asynchronous=False)
        members[1].commit(offsets=[TopicPartition(topic, tp.partition, 4) for tp in members[1].assignment()],
                          asynchronous=False)
        members[1].close()
        # The survivor takes over all partitions incrementally.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(members[0].assignment()) != PARTITIONS:
            members[0].poll(0.1)
        out["survivor_assignment"] = len(members[0].assignment())
        out["describe.one_member"] = _describe(admin, group)
        committed = members[0].committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
        out["committed"] = sorted((tp.partition, tp.offset) for tp in committed)
    finally:
        members[0].close()
    out["describe.after_close"] = _describe(admin, group)
    return out


def test_cooperative_sticky_group(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, cooperative_sticky_group)
