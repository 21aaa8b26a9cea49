"""The issue's failover test: ZooKeeper + 4 bookie processes (E=3, WQ=3, AQ=2) + 2 `quire
gateway` processes; an idempotent acks=all producer and an assign-based consumer on 6
partitions; the gateway owning most partitions is SIGKILLed. Clients must carry on through the
survivor within 10 s, and every acknowledged message is consumed exactly once, in order, with
no offset gaps. Also: even ownership, NOT_LEADER_OR_FOLLOWER from the non-owner (raw request),
and the leader epoch bumped with its history served by OffsetForLeaderEpoch."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.cluster import inspect, leases
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.fetch import FetchRequest
from kafka_wire.messages.list_offsets import ListOffsetsRequest
from kafka_wire.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from kafka_wire.messages.produce import ProduceRequest
from store.meta.api import MetaStore
from store.meta.factory import open_meta
from tests.support.cluster import GatewayProc
from tests.support.gateway import RawKafka

pytestmark = pytest.mark.slow

TOPIC = "failover"
PARTITIONS = 6
CARRY_ON_WITHIN = 10.0  # the bound, from the SIGKILL to traffic through the survivor


def kafka_call(address: str, api_key: int, version: int, body: Any) -> Any:
    """One raw request/response on a fresh connection."""
    with RawKafka(address) as conn:
        return conn.request(api_key, version, body)


def list_offsets_error(address: str, partition: int) -> int:
    req = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=TOPIC,
                partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(
                        partition_index=partition, current_leader_epoch=-1, timestamp=-1
                    )
                ],
            )
        ],
    )
    resp = kafka_call(address, 2, 5, req)
    return int(resp.topics[0].partitions[0].error_code)


def leader_hints(address: str, partition: int, topic_id: uuid.UUID) -> list[tuple[int, int, int, int]]:
    """KIP-951 from a non-owner: (error, hinted leader id, hinted leader's port in the node
    endpoints, hinted epoch) of a Fetch v16 and of a Produce v10."""
    fetch = FetchRequest(replica_id=-1, max_bytes=1 << 20, topics=[FetchRequest.FetchTopic(
        topic_id=topic_id, partitions=[FetchRequest.FetchPartition(partition=partition, partition_max_bytes=1024)])])
    produce = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=TOPIC, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=None)])])
    f = kafka_call(address, 1, 16, fetch)
    fp = f.responses[0].partitions[0]
    pr = kafka_call(address, 0, 10, produce)
    pp = pr.responses[0].partition_responses[0]
    out = []
    for err, leader, nodes in ((fp.error_code, fp.current_leader, f.node_endpoints),
                               (pp.error_code, pp.current_leader, pr.node_endpoints)):
        port = next((n.port for n in nodes if n.node_id == leader.leader_id), -1)
        out.append((int(err), int(leader.leader_id), port, int(leader.leader_epoch)))
    return out


def end_offset_for_epoch(address: str, partition: int, epoch: int) -> tuple[int, int, int]:
    """(error, epoch, end offset) from OffsetForLeaderEpoch v3."""
    R = OffsetForLeaderEpochRequest
    req = R(
        replica_id=-1,
        topics=[
            R.OffsetForLeaderTopic(
                topic=TOPIC,
                partitions=[
                    R.OffsetForLeaderPartition(
                        partition=partition, current_leader_epoch=-1, leader_epoch=epoch
                    )
                ],
            )
        ],
    )
    resp = kafka_call(address, 23, 3, req)
    r = resp.topics[0].partitions[0]
    return int(r.error_code), int(r.leader_epoch), int(r.end_offset)


async def holders(meta: MetaStore) -> dict[int, int | None]:
    info = await inspect.describe_topic(meta, TOPIC)
    assert info is not None
    tid = uuid.UUID(hex=info["topic_id"])
    return {p: await leases.lease_holder(meta, tid, p) for p in range(PARTITIONS)}


async def wait_for(check: Any, what: str, within: float = 60.0) -> Any:
    deadline = time.monotonic() + within
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {within} s")
        await asyncio.sleep(0.1)


class Traffic:
    """An idempotent producer and an assign-based consumer, each on its own thread."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.acked: dict[int, list[tuple[int, bytes, float]]] = {p: [] for p in range(PARTITIONS)}
        self.failed: list[str] = []
        self.consumed: dict[int, list[tuple[int, bytes, int | None, float]]] = {
            p: [] for p in range(PARTITIONS)
        }
        self.consumer_errors: list[str] = []
        self.seq = [0] * PARTITIONS
        self.lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _on_delivery(self, err: Any, msg: Any) -> None:
        now = time.monotonic()
        if err is not None:
            self.failed.append(str(err))
            return
        with self.lock:
            self.acked[msg.partition()].append((msg.offset(), msg.value(), now))

    def _produce(self) -> None:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 120000,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        i = 0
        while not self.stop_producing.is_set():
            part = i % PARTITIONS
            value = f"p{part}-{self.seq[part]:08d}".encode()
            try:
                p.produce(TOPIC, value=value, key=b"k", partition=part, on_delivery=self._on_delivery)
                self.seq[part] += 1
                i += 1
            except BufferError:
                p.poll(0.05)
                continue
            if i % PARTITIONS == 0:
                p.poll(0)
                time.sleep(0.005)  # ~1000 messages a second: enough, and cheap on 2 cores
        left = p.flush(120)
        if left:
            self.failed.append(f"{left} messages still in flight after flush")

    def _consume(self) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "failover-test",  # required by librdkafka; offsets are never committed
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "topic.metadata.refresh.interval.ms": 1000,
                "fetch.wait.max.ms": 100,
                **({"debug": os.environ["FAILOVER_DEBUG"]} if os.environ.get("FAILOVER_DEBUG") else {}),
            }
        )
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        try:
            while not self.stop_consuming.is_set():
                msg = c.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        self.consumer_errors.append(str(msg.error()))
                    continue
                with self.lock:
                    self.consumed[msg.partition()].append(
                        (msg.offset(), msg.value(), msg.leader_epoch(), time.monotonic())
                    )
        finally:
            c.close()

    def caught_up(self) -> bool:
        with self.lock:
            for p in range(PARTITIONS):
                if not self.acked[p]:
                    continue
                last = max(o for o, _, _ in self.acked[p])
                if not self.consumed[p] or self.consumed[p][-1][0] < last:
                    return False
        return True


async def test_gateway_failover(zookeeper: Any, bookie_cluster: Any, tmp_path: Path) -> None:
    url = zookeeper.url()
    await bookie_cluster(4, url)
    gateways = {n: GatewayProc(n, url, tmp_path / f"gateway-{n}.log") for n in (1, 2)}
    meta = open_meta(url, session_timeout=5.0)
    await meta.start()
    traffic: Traffic | None = None
    try:
        for g in gateways.values():
            g.start()
        for g in gateways.values():
            await asyncio.to_thread(g.wait_ready)
        await wait_for(lambda: _count_gateways(meta), "both gateways registered")
        bootstrap = ",".join(g.address for g in gateways.values())

        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=-1)])
        await asyncio.to_thread(futures[TOPIC].result, 30)

        topic_id = uuid.UUID((await inspect.describe_topic(meta, TOPIC) or {})["topic_id"])
        # Ownership spreads evenly over the two gateways.
        owners = await wait_for(lambda: _all_held(meta), "every partition owned", within=30)
        load = Counter(owners.values())
        assert load == {1: 3, 2: 3}, owners

        # The non-owner refuses a partition it does not lead; the owner answers.
        for p, node in owners.items():
            other = 2 if node == 1 else 1
            assert (
                await asyncio.to_thread(list_offsets_error, gateways[other].address, p)
                == ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
            assert await asyncio.to_thread(list_offsets_error, gateways[node].address, p) == ErrorCode.NONE
            # KIP-951: its Fetch and Produce answers name the owner and where to reach it
            hints = await asyncio.to_thread(leader_hints, gateways[other].address, p, topic_id)
            for err, leader, port, _epoch in hints:  # the epoch is the lease's, -1 until published
                assert (err, leader, port) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, node, gateways[node].port)

        before = await inspect.describe_topic(meta, TOPIC)
        assert before is not None
        epochs_before = {p["partition"]: p["leader_epoch"] for p in before["partitions"]}

        traffic = Traffic(bootstrap)
        traffic.start()
        await wait_for(
            lambda: _asyncify(lambda: all(len(v) >= 50 for v in traffic.consumed.values())), "traffic flowing"
        )

        victim = max(load, key=lambda n: (load[n], n))
        survivor = 2 if victim == 1 else 1
        moved = sorted(p for p, n in owners.items() if n == victim)
        gateways[victim].kill()
        killed_at = time.monotonic()

        def first_after(rows: list[Any], t_index: int) -> float | None:
            times = [r[t_index] for r in rows if r[t_index] > killed_at]
            return min(times) if times else None

        async def carried_on() -> bool:
            with traffic.lock:
                produced = [first_after(traffic.acked[p], 2) for p in moved]
                consumed = [first_after(traffic.consumed[p], 3) for p in moved]
            return all(t is not None for t in produced + consumed)

        await wait_for(carried_on, "traffic on the moved partitions resumed", within=60)
        with traffic.lock:
            produce_gap = max(first_after(traffic.acked[p], 2) or 0.0 for p in moved) - killed_at
            consume_gap = max(first_after(traffic.consumed[p], 3) or 0.0 for p in moved) - killed_at
        print(f"failover: produce resumed after {produce_gap:.2f} s, consume after {consume_gap:.2f} s")
        assert produce_gap < CARRY_ON_WITHIN, produce_gap
        assert consume_gap < CARRY_ON_WITHIN, consume_gap

        await asyncio.sleep(2.0)  # some more traffic through the survivor alone
        traffic.stop_producing.set()
        await asyncio.to_thread(traffic.threads[0].join, 150)
        await wait_for(lambda: _asyncify(traffic.caught_up), "consumer caught up", within=60)
        traffic.stop_consuming.set()
        await asyncio.to_thread(traffic.threads[1].join, 30)

        # Every acknowledged message consumed exactly once, in order, without offset gaps.
        assert not traffic.failed, traffic.failed[:5]
        for p in range(PARTITIONS):
            acked = {v: o for o, v, _ in traffic.acked[p]}
            assert len(acked) == len(traffic.acked[p]), f"partition {p}: a message acknowledged twice"
            offsets = [o for o, _, _, _ in traffic.consumed[p]]
            values = [v for _, v, _, _ in traffic.consumed[p]]
            assert offsets == list(range(len(offsets))), (
                f"partition {p}: gaps or repeats in {offsets[:20]}..."
            )
            assert len(set(values)) == len(values), f"partition {p}: a message consumed twice"
            assert values == sorted(values), f"partition {p}: out of order"
            by_value = {v: o for o, v, _, _ in traffic.consumed[p]}
            for v, o in acked.items():
                assert by_value.get(v) == o, (
                    f"partition {p}: acked {v!r} at {o}, consumed at {by_value.get(v)}"
                )

        # The survivor owns everything; the moved partitions' epoch was bumped, with history.
        assert await wait_for(lambda: _all_held(meta), "all held") == dict.fromkeys(
            range(PARTITIONS), survivor
        )
        after = await inspect.describe_topic(meta, TOPIC)
        assert after is not None
        for part in after["partitions"]:
            p = part["partition"]
            if p not in moved:
                assert part["leader_epoch"] == epochs_before[p]
                continue
            old, new = epochs_before[p], part["leader_epoch"]
            assert new == old + 1
            assert [e for e, _ in part["epochs"]][-2:] == [old, new]
            new_start = part["epochs"][-1][1]
            # Messages before the new epoch's start carry the old epoch, later ones the new one.
            for o, _, e, _ in traffic.consumed[p]:
                assert e == (old if o < new_start else new), (p, o, e, new_start)
            err, epoch, end = await asyncio.to_thread(
                end_offset_for_epoch, gateways[survivor].address, p, old
            )
            assert (err, epoch, end) == (0, old, new_start)
            err, epoch, end = await asyncio.to_thread(
                end_offset_for_epoch, gateways[survivor].address, p, new
            )
            assert (err, epoch) == (0, new) and end == len(traffic.consumed[p])
    except BaseException:
        with contextlib.suppress(Exception):
            print("lease holders:", await holders(meta))
        if traffic is not None:
            for p in range(PARTITIONS):
                acked, consumed = traffic.acked[p], traffic.consumed[p]
                print(
                    f"partition {p}: acked {len(acked)} (last {acked[-1][:2] if acked else None}), "
                    f"consumed {len(consumed)} (last {consumed[-1][:3] if consumed else None})"
                )
            print("delivery failures:", traffic.failed[:5], "consumer errors:", traffic.consumer_errors[:5])
        for g in gateways.values():
            print(f"--- gateway {g.node_id} output ---\n{g.output()}")
        raise
    finally:
        if traffic is not None:
            traffic.stop_producing.set()
            traffic.stop_consuming.set()
            for t in traffic.threads:
                await asyncio.to_thread(t.join, 30)
        for g in gateways.values():
            g.kill()
        await meta.close()


async def _asyncify(fn: Any) -> Any:
    return fn()


async def _count_gateways(meta: MetaStore) -> bool:
    return len(await inspect.gateways(meta)) == 2


async def _all_held(meta: MetaStore) -> dict[int, int] | None:
    held = await holders(meta)
    if any(v is None for v in held.values()):
        return None
    return {p: v for p, v in held.items() if v is not None}
