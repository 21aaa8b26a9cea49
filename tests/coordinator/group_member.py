"""A consumer-group member in its own process, for the real-client group tests.

    python -m tests.coordinator.group_member --client {kafka-python,aiokafka,confluent}
        --bootstrap HOST:PORT --topic T --group G [--strategy roundrobin] [--instance ID]
        [--protocol consumer]   (confluent: KIP-848's group.protocol=consumer)

Prints one line per event, flushed: `ASSIGN p,p,...` whenever its assignment changes (after a
rebalance), `MSG partition offset` per record processed (a commit follows each poll's records
synchronously, so a record is printed before its offset is committed), `READY` once started;
confluent also prints `STATS heartbeats=n rebalances=n join_state=s` from librdkafka's statistics.
SIGTERM closes the consumer cleanly (leaving the group); SIGKILL is a crash.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from typing import Any

stop = False


def out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _on_term(*_: Any) -> None:
    global stop
    stop = True


def show(parts: set[int]) -> None:
    out("ASSIGN " + ",".join(str(p) for p in sorted(parts)))


def run_kafka_python(a: argparse.Namespace) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    owned: set[int] = set()
    assignors = {"roundrobin": RoundRobinPartitionAssignor, "range": RangePartitionAssignor}

    class L(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            owned.difference_update(tp.partition for tp in revoked)

        def on_partitions_assigned(self, assigned: Any) -> None:
            owned.clear()
            owned.update(tp.partition for tp in assigned)
            show(owned)

    c = KafkaConsumer(
        bootstrap_servers=a.bootstrap,
        group_id=a.group,
        client_id="kp-member",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=a.session_ms,
        heartbeat_interval_ms=500,
        partition_assignment_strategy=[assignors[a.strategy]],
        group_instance_id=a.instance,
    )
    c.subscribe([a.topic], listener=L())
    out("READY")
    while not stop:
        batch = c.poll(timeout_ms=200)
        if not batch:
            continue
        commit = {}
        for tp, recs in batch.items():
            for r in recs:
                out(f"MSG {tp.partition} {r.offset}")
            commit[TopicPartition(tp.topic, tp.partition)] = __import__("kafka").OffsetAndMetadata(
                recs[-1].offset + 1, "", -1
            )
        try:
            c.commit(commit)
        except Exception as e:  # a rebalance raced the commit: the records will come again
            out(f"COMMITFAIL {type(e).__name__}")
    c.close()


def run_aiokafka(a: argparse.Namespace) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.structs import OffsetAndMetadata

    assignors = {"roundrobin": RoundRobinPartitionAssignor, "range": RangePartitionAssignor}

    class L(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        async def on_partitions_assigned(self, assigned: Any) -> None:
            show({tp.partition for tp in assigned})

    async def main() -> None:
        c = AIOKafkaConsumer(
            bootstrap_servers=a.bootstrap,
            group_id=a.group,
            client_id="aio-member",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=a.session_ms,
            heartbeat_interval_ms=500,
            partition_assignment_strategy=(assignors[a.strategy],),
            group_instance_id=a.instance,
        )
        await c.start()
        c.subscribe([a.topic], listener=L())
        out("READY")
        try:
            while not stop:
                batch = await c.getmany(timeout_ms=200)
                commit = {}
                for tp, recs in batch.items():
                    for r in recs:
                        out(f"MSG {tp.partition} {r.offset}")
                    commit[TopicPartition(tp.topic, tp.partition)] = OffsetAndMetadata(recs[-1].offset + 1, "")
                if commit:
                    try:
                        await c.commit(commit)
                    except Exception as e:
                        out(f"COMMITFAIL {type(e).__name__}")
        finally:
            await c.stop()

    asyncio.run(main())


def run_confluent(a: argparse.Namespace) -> None:
    from confluent_kafka import Consumer, TopicPartition

    owned: set[int] = set()

    def on_stats(raw: str) -> None:
        # Heartbeats sent, and rebalances gone through: what a test needs to tell "nothing
        # happened" from "nothing happened yet" without waiting for a duration.
        s = json.loads(raw)
        cgrp = s.get("cgrp") or {}
        beats = sum(int((b.get("req") or {}).get("Heartbeat", 0)) for b in (s.get("brokers") or {}).values())
        out(f"STATS heartbeats={beats} rebalances={cgrp.get('rebalance_cnt', 0)} join_state={cgrp.get('join_state', '')}")

    conf = {
        "bootstrap.servers": a.bootstrap,
        "group.id": a.group,
        "client.id": "ck-member",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": 2000,
        # librdkafka 2.16 race: a ListOffsets reply that comes back after a pause/resume of the
        # partition is outdated, and the offset-query timer it leaves fires later on the active
        # partition, resetting it to auto.offset.reset (records consumed again). The reply waits
        # behind the connection's long-poll Fetch (one request at a time, as in Kafka), so a
        # short fetch wait keeps that window small.
        "fetch.wait.max.ms": 100,
        "statistics.interval.ms": 200,
        "stats_cb": on_stats,
    }
    if a.protocol == "consumer":
        # KIP-848: the broker assigns and sets the session and heartbeat interval.
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": a.session_ms, "heartbeat.interval.ms": 500,
                     "partition.assignment.strategy": a.strategy})
    if a.instance:
        conf["group.instance.id"] = a.instance
    c = Consumer(conf)
    cooperative = a.strategy == "cooperative-sticky" or a.protocol == "consumer"

    def on_assign(consumer: Any, parts: list[Any]) -> None:
        if not cooperative:
            owned.clear()
        owned.update(p.partition for p in parts)
        show(owned)

    def on_revoke(consumer: Any, parts: list[Any]) -> None:
        owned.difference_update(p.partition for p in parts)
        if cooperative:
            out("REVOKE " + ",".join(str(p.partition) for p in sorted(parts, key=lambda p: p.partition)))

    c.subscribe([a.topic], on_assign=on_assign, on_revoke=on_revoke)
    out("READY")
    while not stop:
        msgs = c.consume(100, 0.2)
        last: dict[int, int] = {}
        for m in msgs:
            if m.error():
                continue
            out(f"MSG {m.partition()} {m.offset()}")
            last[m.partition()] = m.offset()
        if last:
            try:
                c.commit(offsets=[TopicPartition(a.topic, p, o + 1) for p, o in last.items()], asynchronous=False)
            except Exception as e:
                out(f"COMMITFAIL {type(e).__name__}")
    c.close()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--client", required=True, choices=["kafka-python", "aiokafka", "confluent"])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--strategy", default="roundrobin")
    p.add_argument("--instance", default=None)
    p.add_argument("--session-ms", type=int, default=6000)
    p.add_argument("--protocol", default="classic", choices=["classic", "consumer"])
    a = p.parse_args()
    signal.signal(signal.SIGTERM, _on_term)
    {"kafka-python": run_kafka_python, "aiokafka": run_aiokafka, "confluent": run_confluent}[a.client](a)
    out("CLOSED")


if __name__ == "__main__":
    main()
