"""A share group's dead-letter topic whose partition another gateway owns (ZooKeeper, 3 bookies,
2 gateways): the source partition's owner forwards the dead-letter record to the owner of the
dead-letter partition as a Produce, and archives the source record after that."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gateway.cluster import leases
from kafka_wire.messages.create_topics import CreateTopicsRequest
from kafka_wire.messages.fetch import FetchRequest
from kafka_wire.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kafka_wire.messages.metadata import MetadataRequest
from kafka_wire.messages.produce import ProduceRequest
from kafka_wire.messages.share_acknowledge import ShareAcknowledgeRequest
from kafka_wire.records import NewRecord, build_batch, iter_batches
from store.meta.factory import open_meta
from tests.gateway.test_share_failover_cluster import acquired, call, eventually, fetch
from tests.support.cluster import GatewayProc

pytestmark = pytest.mark.slow

TOPIC, GROUP, DLQ = "share-failover", "share-failover-g", "dlq.share-failover"  # fetch() names GROUP
REJECT = 3


async def test_dead_letters_go_to_another_gateway(zookeeper: Any, bookie_cluster: Any, tmp_path: Path) -> None:
    url = zookeeper.url()
    await bookie_cluster(3, url)
    gateways = {n: GatewayProc(n, url, tmp_path / f"gateway-{n}.log") for n in (1, 2)}
    meta = open_meta(url, session_timeout=5.0)
    await meta.start()
    try:
        for g in gateways.values():
            g.start()
        for g in gateways.values():
            await asyncio.to_thread(g.wait_ready)
        any_gw = gateways[1].address
        C = CreateTopicsRequest
        created = await asyncio.to_thread(call, any_gw, 19, 7, C(
            topics=[C.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=-1)], timeout_ms=30000))
        tid = created.topics[0].topic_id

        async def owner_of(topic: str, topic_id: Any) -> int | None:
            await asyncio.to_thread(call, any_gw, 3, 12, MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=topic)]))
            return await leases.lease_holder(meta, topic_id, 0)

        src_owner = await eventually(lambda: owner_of(TOPIC, tid), "the source partition owned")
        other = 2 if src_owner == 1 else 1
        created = await asyncio.to_thread(call, any_gw, 19, 7, C(topics=[C.CreatableTopic(
            name=DLQ, num_partitions=-1, replication_factor=-1,
            assignments=[C.CreatableReplicaAssignment(partition_index=0, broker_ids=[other])])], timeout_ms=30000))
        assert created.topics[0].error_code == 0
        dlq_id = created.topics[0].topic_id
        assert await eventually(lambda: owner_of(DLQ, dlq_id), "the dead-letter partition owned") == other

        saddr = gateways[src_owner].address
        recs = [NewRecord(b"k%d" % i, b"v%d" % i, (), 0) for i in range(3)]
        r = await asyncio.to_thread(call, saddr, 0, 9, ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[
            ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=build_batch(recs))])]))
        assert r.responses[0].partition_responses[0].error_code == 0
        R = IncrementalAlterConfigsRequest
        r = await asyncio.to_thread(call, any_gw, 44, 1, R(resources=[R.AlterConfigsResource(
            resource_type=32, resource_name=GROUP, configs=[
                R.AlterableConfig(name=k, config_operation=0, value=v) for k, v in (
                    ("share.auto.offset.reset", "earliest"), ("errors.deadletterqueue.topic.name", DLQ),
                    ("errors.deadletterqueue.copy.record.enable", "true"))])]))
        assert r.responses[0].error_code == 0

        assert acquired(await asyncio.to_thread(call, saddr, 78, 2, fetch(tid, "m1", 0, 10))) == [(0, 2, 1)]
        A = ShareAcknowledgeRequest
        done = await asyncio.to_thread(call, saddr, 79, 2, A(
            group_id=GROUP, member_id="m1", share_session_epoch=1, topics=[A.AcknowledgeTopic(
                topic_id=tid, partitions=[A.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                    A.AcknowledgementBatch(first_offset=0, last_offset=2, acknowledge_types=[1, REJECT, 1])])])]))
        assert done.responses[0].partitions[0].error_code == 0

        async def dead_letters() -> list[Any] | None:
            fp = FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
            resp = await asyncio.to_thread(call, gateways[other].address, 1, 12, FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_id=0, session_epoch=-1,
                topics=[FetchRequest.FetchTopic(topic=DLQ, partitions=[fp])]))
            p = resp.responses[0].partitions[0]
            if p.error_code or not p.records:
                return None
            return [r for b in iter_batches(bytes(p.records)) for r in b.records()]

        [rec] = await eventually(dead_letters, "the dead-letter record on the other gateway")
        headers = dict(rec.headers)
        assert (rec.key, rec.value) == (b"k1", b"v1")
        assert (headers["__dlq.errors.topic"], headers["__dlq.errors.offset"]) == (TOPIC.encode(), b"1")
    finally:
        for g in gateways.values():
            g.kill()
        await meta.close()
