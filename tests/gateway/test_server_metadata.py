"""Metadata through each client library and raw requests across versions: brokers, leaders,
topic ids, auto-creation and Kafka's per-topic errors."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

from kafka_wire.errors import ErrorCode
from kafka_wire.messages.metadata import MetadataRequest, MetadataResponse
from tests.support.gateway import RawKafka, StandaloneGateway

pytestmark = pytest.mark.timeout(120)
Req = MetadataRequest.MetadataRequestTopic


def _meta(gw: StandaloneGateway, version: int, req: MetadataRequest) -> MetadataResponse:
    with RawKafka(gw.bootstrap) as c:
        resp = c.request(3, version, req)
    assert isinstance(resp, MetadataResponse)
    return resp


@pytest.fixture(scope="module")
def created(module_standalone: StandaloneGateway) -> str:
    admin = AdminClient({"bootstrap.servers": module_standalone.bootstrap})
    admin.create_topics([NewTopic("md-three", 3, 1)])["md-three"].result(15)
    return "md-three"


def test_raw_versions(module_standalone: StandaloneGateway, created: str) -> None:
    for v in range(0, 14):
        topics = [Req(name=created)] if v < 10 else [Req(name=created, topic_id=uuid.UUID(int=0))]
        resp = _meta(module_standalone, v, MetadataRequest(topics=topics, allow_auto_topic_creation=v < 4))
        assert [(b.node_id, b.host, b.port) for b in resp.brokers] == [
            (1, "127.0.0.1", module_standalone.port)
        ]
        (t,) = resp.topics
        assert (t.error_code, t.name) == (0, created), v
        assert sorted(p.partition_index for p in t.partitions) == [0, 1, 2]
        for p in t.partitions:
            assert p.error_code in (0, ErrorCode.LEADER_NOT_AVAILABLE)
            if p.error_code == 0:
                assert (p.leader_id, p.replica_nodes, p.isr_nodes) == (1, [1], [1])
        if v >= 1:
            assert resp.controller_id == 1
        if v >= 2:
            assert resp.cluster_id and len(resp.cluster_id) == 22
        if v >= 10:
            assert t.topic_id != uuid.UUID(int=0)


def test_all_none_and_by_id(module_standalone: StandaloneGateway, created: str) -> None:
    v0_all = _meta(module_standalone, 0, MetadataRequest(topics=[]))
    assert created in {t.name for t in v0_all.topics}  # v0: empty list means all topics
    assert _meta(module_standalone, 1, MetadataRequest(topics=[])).topics == []  # v1+: none
    all_ = _meta(module_standalone, 12, MetadataRequest(topics=None))
    tid = next(t.topic_id for t in all_.topics if t.name == created)
    by_id = _meta(module_standalone, 12, MetadataRequest(topics=[Req(topic_id=tid, name=None)]))
    assert [(t.name, t.topic_id, t.error_code) for t in by_id.topics] == [(created, tid, 0)]
    unknown = uuid.uuid4()
    miss = _meta(module_standalone, 12, MetadataRequest(topics=[Req(topic_id=unknown, name=None)]))
    assert [(t.topic_id, t.error_code) for t in miss.topics] == [(unknown, ErrorCode.UNKNOWN_TOPIC_ID)]


def test_errors_and_auto_creation(module_standalone: StandaloneGateway) -> None:
    gw = module_standalone
    no_create = _meta(
        gw,
        8,
        MetadataRequest(
            topics=[Req(name="md-absent"), Req(name="bad name!")], allow_auto_topic_creation=False
        ),
    )
    assert [(t.name, t.error_code) for t in no_create.topics] == [
        ("md-absent", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("bad name!", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    bad = _meta(gw, 8, MetadataRequest(topics=[Req(name="bad name!")], allow_auto_topic_creation=True))
    assert [(t.name, t.error_code) for t in bad.topics] == [("bad name!", ErrorCode.INVALID_TOPIC_EXCEPTION)]
    created = _meta(gw, 8, MetadataRequest(topics=[Req(name="md-auto")], allow_auto_topic_creation=True))
    (t,) = created.topics
    assert (t.name, t.error_code, len(t.partitions)) == ("md-auto", 0, 1)  # num.partitions=1
    again = _meta(gw, 1, MetadataRequest(topics=[Req(name="md-auto"), Req(name="md-auto")]))
    assert [x.name for x in again.topics] == ["md-auto"]


def test_kafka_python_sees_partitions_and_auto_creates(
    module_standalone: StandaloneGateway, created: str
) -> None:
    consumer = KafkaConsumer(bootstrap_servers=module_standalone.bootstrap)
    try:
        assert created in consumer.topics()
        assert consumer.partitions_for_topic(created) == {0, 1, 2}
    finally:
        consumer.close()
    producer = KafkaProducer(bootstrap_servers=module_standalone.bootstrap, max_block_ms=15000)
    try:
        assert producer.partitions_for("md-kp-auto") == {0}
    finally:
        producer.close()


def test_confluent_metadata(module_standalone: StandaloneGateway, created: str) -> None:
    admin = AdminClient({"bootstrap.servers": module_standalone.bootstrap})
    md = admin.list_topics(timeout=15)
    assert md.cluster_id and md.controller_id == 1
    assert [(b.id, b.host, b.port) for b in md.brokers.values()] == [(1, "127.0.0.1", module_standalone.port)]
    t = admin.list_topics(topic=created, timeout=15).topics[created]
    assert t.error is None and sorted(t.partitions) == [0, 1, 2]


def test_aiokafka_metadata(module_standalone: StandaloneGateway, created: str) -> None:
    async def go() -> tuple[set[str], set[int] | None]:
        consumer = AIOKafkaConsumer(bootstrap_servers=module_standalone.bootstrap)
        producer = AIOKafkaProducer(bootstrap_servers=module_standalone.bootstrap)
        await consumer.start()
        await producer.start()
        try:
            return await consumer.topics(), await producer.partitions_for(created)
        finally:
            await consumer.stop()
            await producer.stop()

    topics, parts = asyncio.run(go())
    assert created in topics and parts == {0, 1, 2}
