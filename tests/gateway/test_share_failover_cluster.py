"""A share-partition's owner SIGKILLed on a cluster (ZooKeeper, 3 bookies, 2 gateways) while a
share consumer holds records and has acknowledgements in flight: the survivor takes the
partition over from the cursor's ledger; nothing whose acknowledgement was answered is
delivered again, every record not acknowledged is, with its delivery count carried over."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from gateway.cluster import leases
from kafka_wire.messages.create_topics import CreateTopicsRequest
from kafka_wire.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kafka_wire.messages.metadata import MetadataRequest
from kafka_wire.messages.produce import ProduceRequest
from kafka_wire.messages.share_acknowledge import ShareAcknowledgeRequest
from kafka_wire.messages.share_fetch import ShareFetchRequest
from kafka_wire.records import NewRecord, build_batch
from store.meta.factory import open_meta
from tests.support.cluster import GatewayProc
from tests.support.gateway import RawKafka

pytestmark = pytest.mark.slow

TOPIC, GROUP = "share-failover", "share-failover-g"
BATCHES, PER_BATCH = 20, 3
ACCEPT = 1


def call(address: str, api_key: int, version: int, body: Any) -> Any:
    with RawKafka(address) as conn:
        return conn.request(api_key, version, body)


def fetch(tid: uuid.UUID, member: str, epoch: int, max_records: int) -> ShareFetchRequest:
    F = ShareFetchRequest
    return F(group_id=GROUP, member_id=member, share_session_epoch=epoch, max_wait_ms=0, min_bytes=1,
             max_records=max_records, batch_size=max_records,
             topics=[F.FetchTopic(topic_id=tid, partitions=[F.FetchPartition(partition_index=0)])])


def ack(tid: uuid.UUID, member: str, epoch: int, first: int, last: int) -> ShareAcknowledgeRequest:
    A = ShareAcknowledgeRequest
    return A(group_id=GROUP, member_id=member, share_session_epoch=epoch, topics=[A.AcknowledgeTopic(
        topic_id=tid, partitions=[A.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
            A.AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=[ACCEPT])])])])


def acquired(resp: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in resp.responses for p in t.partitions for a in p.acquired_records]


async def eventually(check: Any, what: str, within: float = 60.0) -> Any:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        got = await check()
        if got:
            return got
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what}: not within {within} s")
        await asyncio.sleep(0.1)


async def test_share_partition_survives_its_owner(zookeeper: Any, bookie_cluster: Any, tmp_path: Path) -> None:
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
        created = await asyncio.to_thread(call, any_gw, 19, 7, CreateTopicsRequest(
            topics=[CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=-1)],
            timeout_ms=30000))
        assert created.topics[0].error_code == 0
        tid = created.topics[0].topic_id

        async def owner() -> int | None:
            # Metadata asks a gateway to lead the partition; the lease says who does.
            await asyncio.to_thread(call, any_gw, 3, 12, MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)]))
            return await leases.lease_holder(meta, tid, 0)

        victim = await eventually(owner, "the partition owned")
        survivor = 2 if victim == 1 else 1
        vaddr, saddr = gateways[victim].address, gateways[survivor].address
        for i in range(BATCHES):
            recs = [NewRecord(None, f"v{i * PER_BATCH + j}".encode(), (), 0) for j in range(PER_BATCH)]
            part = ProduceRequest.PartitionProduceData(index=0, records=build_batch(recs))
            r = await asyncio.to_thread(call, vaddr, 0, 9, ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[
                ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[part])]))
            assert r.responses[0].partition_responses[0].error_code == 0
        R = IncrementalAlterConfigsRequest
        r = await asyncio.to_thread(call, any_gw, 44, 1, R(resources=[R.AlterConfigsResource(
            resource_type=32, resource_name=GROUP, configs=[
                R.AlterableConfig(name="share.auto.offset.reset", config_operation=0, value="earliest")])]))
        assert r.responses[0].error_code == 0

        total = BATCHES * PER_BATCH
        with RawKafka(vaddr) as c1:
            held = acquired(c1.request(78, 2, fetch(tid, "m1", 0, 30)))
            assert held == [(0, 29, 1)]
            done: Any = c1.request(79, 2, ack(tid, "m1", 1, 0, 14))
            assert done.responses[0].partitions[0].error_code == 0
            # One more acknowledgement sent, its answer never read: the owner dies now.
            c1.send_raw(c1.frame(79, 2, ack(tid, "m1", 2, 15, 19))[1])
            gateways[victim].kill()

        async def fetched_by_survivor() -> list[tuple[int, int, int]] | None:
            resp = await asyncio.to_thread(call, saddr, 78, 2, fetch(tid, "m2", 0, total))
            errors = [p.error_code for t in resp.responses for p in t.partitions]
            if resp.error_code or any(errors) or not acquired(resp):
                return None
            return acquired(resp)

        again = await eventually(fetched_by_survivor, "the survivor serving the share-partition")
        counts = {o: c for f, la, c in again for o in range(f, la + 1)}
        assert not set(counts) & set(range(15)), "acknowledged records came again"
        # Everything not acknowledged comes, held ones for the second time.
        assert set(range(20, total)) <= set(counts)
        assert all(counts[o] == (2 if o < 30 else 1) for o in counts), counts
        # The in-flight acknowledgement either landed before the kill or its records come again.
        assert set(counts) & set(range(15, 20)) in (set(), set(range(15, 20)))
    finally:
        for g in gateways.values():
            g.kill()
        await meta.close()
