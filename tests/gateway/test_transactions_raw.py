"""Transactions, partition side, over the wire: transactional batches (built with kafka_wire,
producer id from InitProducerId), COMMIT/ABORT markers sent as WriteTxnMarkers requests (as a
transaction coordinator does), then read_committed reads by unchanged clients (confluent-kafka,
kafka-python, aiokafka) and raw Fetch/ListOffsets/DescribeProducers; and a SIGKILL of the standalone with
an open and an aborted transaction, rebuilt by the next start."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTP
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from kafka_wire.errors import ErrorCode
from kafka_wire.messages.api_versions import ApiVersionsRequest
from kafka_wire.messages.describe_producers import DescribeProducersRequest
from kafka_wire.messages.fetch import FetchRequest
from kafka_wire.messages.init_producer_id import InitProducerIdRequest
from kafka_wire.messages.list_offsets import ListOffsetsRequest
from kafka_wire.messages.produce import ProduceRequest
from kafka_wire.messages.write_txn_markers import WriteTxnMarkersRequest
from kafka_wire.records import NewRecord, build_batch, iter_batches
from tests.gateway.test_produce_raw import Raw, create_topic
from tests.support.gateway import StandaloneGateway, module_gateway

pytestmark = pytest.mark.timeout(180)
T = 30.0
Marker = WriteTxnMarkersRequest.WritableTxnMarker
MarkerTopic = WriteTxnMarkersRequest.WritableTxnMarkerTopic


@pytest.fixture(scope="module")
def module_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneGateway]:
    """Without partition verification: these transactions are no coordinator's (the markers are
    sent by hand, as a coordinator would), so no coordinator would confirm them."""
    yield from module_gateway(tmp_path_factory, "--no-transaction-partition-verification-enable")


@pytest.fixture
def raw(module_standalone: StandaloneGateway) -> Iterator[Raw]:
    r = Raw(module_standalone.bootstrap)
    yield r
    r.close()


def values_batch(values: list[bytes], *, pid: int = -1, epoch: int = -1, seq: int = -1,
                 transactional: bool = False) -> bytes:
    now = int(time.time() * 1000)
    recs = [NewRecord(None, v, (), now) for v in values]
    return build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional)


def produce(raw: Raw, topic: str, data: bytes, *, txn_id: str | None = None, version: int = 9) -> int:
    part = ProduceRequest.PartitionProduceData(index=0, records=data)
    req = ProduceRequest(transactional_id=txn_id, acks=-1, timeout_ms=30000,
                         topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[part])])
    r = raw.call(req, version).responses[0].partition_responses[0]
    assert r.error_code == 0, r
    return int(r.base_offset)


def markers(raw: Raw, topic: str, pid: int, epoch: int, commit: bool, *, partitions: tuple[int, ...] = (0,),
            coordinator_epoch: int = 0, version: int = 1) -> list[int]:
    req = WriteTxnMarkersRequest(markers=[Marker(
        producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
        topics=[MarkerTopic(name=topic, partition_indexes=list(partitions))])])
    resp = raw.call(req, version)
    (m,) = resp.markers
    assert m.producer_id == pid and m.topics[0].name == topic
    return [p.error_code for p in m.topics[0].partitions]


def fetch_committed(raw: Raw, topic: str, offset: int, isolation: int = 1) -> Any:
    fp = FetchRequest.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=50 << 20, isolation_level=isolation,
                       session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[fp])])
    return raw.call(req, 12).responses[0].partitions[0]


def latest(raw: Raw, topic: str, isolation: int) -> int:
    req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    return int(raw.call(req, 7).topics[0].partitions[0].offset)


def new_pid(raw: Raw) -> int:
    return int(raw.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1), 4).producer_id)


def confluent_values(bootstrap: str, topic: str, until: set[bytes]) -> tuple[list[bytes], int]:
    """What a read_committed confluent consumer reads until it has `until` and reports the end of
    the partition; (values, its position then)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + T
    try:
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191 and until <= set(got):  # _PARTITION_EOF
                    break
                continue
            got.append(m.value())
        pos = c.position([TopicPartition(topic, 0)])[0].offset
        return got, pos
    finally:
        c.close()


def kafka_python_values(bootstrap: str, topic: str, until: set[bytes]) -> list[bytes]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False,
                      consumer_timeout_ms=int(T * 1000))
    tp = KpTopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)
    got: list[bytes] = []
    try:
        for m in c:
            got.append(m.value)
            if until <= set(got):
                break
        return got
    finally:
        c.close()


def aiokafka_values(bootstrap: str, topic: str, until: set[bytes]) -> tuple[list[bytes], int]:
    """(values, position) of a read_committed aiokafka consumer once it has `until`."""

    async def run() -> tuple[list[bytes], int]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             isolation_level="read_committed")
        await c.start()
        try:
            tp = AioTP(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            got: list[bytes] = []
            deadline = time.monotonic() + T
            while not until <= set(got) and time.monotonic() < deadline:
                for recs in (await c.getmany(timeout_ms=500)).values():
                    got.extend(r.value for r in recs)
            return got, await c.position(tp)
        finally:
            await c.stop()

    return asyncio.run(run())


def test_markers_and_read_committed_clients(module_standalone: StandaloneGateway, raw: Raw) -> None:
    bootstrap, topic = module_standalone.bootstrap, "txn-raw"
    versions = raw.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3).api_keys
    assert [(k.min_version, k.max_version) for k in versions if k.api_key == 27] == [(1, 2)]  # as Kafka 4.4
    create_topic(bootstrap, topic)
    pid = new_pid(raw)
    assert produce(raw, topic, values_batch([b"plain-0"])) == 0
    a = produce(raw, topic, values_batch([b"abort-1", b"abort-2"], pid=pid, epoch=0, seq=0, transactional=True),
                txn_id="tx")
    assert markers(raw, topic, pid, 0, commit=False) == [0]
    produce(raw, topic, values_batch([b"commit-1"], pid=pid, epoch=0, seq=2, transactional=True), txn_id="tx")
    assert markers(raw, topic, pid, 0, commit=True, version=2) == [0]
    open_at = produce(raw, topic, values_batch([b"open-1"], pid=pid, epoch=0, seq=3, transactional=True),
                      txn_id="tx")
    after = produce(raw, topic, values_batch([b"plain-after"]))
    hw = after + 1
    # partitions this gateway does not have: Kafka's per-partition errors
    assert markers(raw, topic, pid, 0, commit=True, partitions=(7,)) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    # a stale producer epoch (TV1: older than the last seen) and a fenced coordinator epoch
    pid2 = new_pid(raw)
    produce(raw, topic, values_batch([b"x"], pid=pid2, epoch=5, seq=0, transactional=True), txn_id="tx2")
    assert markers(raw, topic, pid2, 4, commit=False) == [ErrorCode.INVALID_PRODUCER_EPOCH]
    assert markers(raw, topic, pid2, 5, commit=False, coordinator_epoch=3) == [0]
    assert markers(raw, topic, pid2, 5, commit=False, coordinator_epoch=2) == [ErrorCode.TRANSACTION_COORDINATOR_FENCED]
    hw += 2

    # raw read_committed: stops at the open transaction, lists the aborted one
    p = fetch_committed(raw, topic, 0)
    assert (p.error_code, p.high_watermark, p.last_stable_offset) == (0, hw, open_at)
    assert [(t.producer_id, t.first_offset) for t in p.aborted_transactions] == [(pid, a)]
    offsets = [o for b in iter_batches(bytes(p.records)) for o in range(b.base_offset, b.last_offset + 1)]
    assert offsets == list(range(open_at))
    # read_uncommitted: everything, no aborted list, the LSO still reported
    p = fetch_committed(raw, topic, 0, isolation=0)
    assert (p.last_stable_offset, p.aborted_transactions) == (open_at, None)
    assert (latest(raw, topic, 1), latest(raw, topic, 0)) == (open_at, hw)
    dp = raw.call(DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(
        name=topic, partition_indexes=[0])]), 0).topics[0].partitions[0].active_producers
    assert {s.producer_id: s.current_txn_start_offset for s in dp}[pid] == open_at

    # unchanged clients: aborted records never, committed ones yes, nothing past the open one
    got, pos = confluent_values(bootstrap, topic, {b"plain-0", b"commit-1"})
    assert got == [b"plain-0", b"commit-1"] and pos == open_at
    assert kafka_python_values(bootstrap, topic, {b"plain-0", b"commit-1"}) == [b"plain-0", b"commit-1"]
    assert aiokafka_values(bootstrap, topic, {b"plain-0", b"commit-1"}) == ([b"plain-0", b"commit-1"], open_at)

    # the open transaction commits: the rest becomes visible
    assert markers(raw, topic, pid, 0, commit=True) == [0]
    everything = {b"plain-0", b"commit-1", b"open-1", b"plain-after"}
    got, _ = confluent_values(bootstrap, topic, everything)
    assert got == [b"plain-0", b"commit-1", b"open-1", b"plain-after"]
    assert kafka_python_values(bootstrap, topic, everything) == [b"plain-0", b"commit-1", b"open-1", b"plain-after"]
    assert aiokafka_values(bootstrap, topic, everything)[0] == [b"plain-0", b"commit-1", b"open-1", b"plain-after"]
    assert latest(raw, topic, 1) == latest(raw, topic, 0)


def test_transactions_survive_sigkill(standalone_factory: Any) -> None:
    standalone = standalone_factory(extra_args=["--no-transaction-partition-verification-enable"])
    topic = "txn-kill"
    create_topic(standalone.bootstrap, topic)
    raw = Raw(standalone.bootstrap)
    try:
        pid = new_pid(raw)
        produce(raw, topic, values_batch([b"plain-0"]))
        a = produce(raw, topic, values_batch([b"abort-1"], pid=pid, epoch=0, seq=0, transactional=True), txn_id="t")
        assert markers(raw, topic, pid, 0, commit=False) == [0]
        open_at = produce(raw, topic, values_batch([b"open-1"], pid=pid, epoch=0, seq=1, transactional=True),
                          txn_id="t")
        produce(raw, topic, values_batch([b"plain-after"]))
    finally:
        raw.close()
    standalone.kill()
    standalone.start()
    raw = Raw(standalone.bootstrap)
    try:
        p = fetch_committed(raw, topic, 0)
        assert (p.high_watermark, p.last_stable_offset) == (open_at + 2, open_at)
        assert [(t.producer_id, t.first_offset) for t in p.aborted_transactions] == [(pid, a)]
        # the producer goes on where it was: its sequence continues, its transaction commits
        produce(raw, topic, values_batch([b"open-2"], pid=pid, epoch=0, seq=2, transactional=True), txn_id="t")
        assert markers(raw, topic, pid, 0, commit=True) == [0]
        got, _ = confluent_values(standalone.bootstrap, topic, {b"open-2"})
        assert got == [b"plain-0", b"open-1", b"plain-after", b"open-2"]
    finally:
        raw.close()
