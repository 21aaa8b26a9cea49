"""The hooks between partition owners and transaction coordinators, in process: the produce
path's verification of transactional batches (services.txn_verifier, Kafka's error mapping,
transaction.partition.verification.enable) and marker_writer, the MarkerWriter a coordinator on
this gateway gets injected."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from coordinator.group.config import OFFSETS_TOPIC
from coordinator.group.coordinator import GroupCoordinator
from coordinator.group.group import OffsetAndMetadata
from coordinator.share.config import ShareConfig
from gateway.context import RequestContext
from gateway.coordinator_shards import PartitionShardLog
from gateway.errors import KafkaApiError
from gateway.groups import GroupCoordinators
from gateway.handlers.produce import handle_produce
from gateway.partition.log import PartitionLog
from gateway.partition.lookup import TopicCache
from gateway.partition.markers import marker_writer, write_marker
from gateway.topics.registry import TopicInfo
from kafka_log.txn import MarkerWriter
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.produce import ProduceRequest
from store.meta.api import MetaStore
from store.meta.factory import open_meta
from tests.coordinator.helpers import FAST
from tests.gateway.test_partition_log import REPL, open_log
from tests.gateway.test_partition_txn import tbatch
from tests.store.managed.fakes import FakeLedgerClient


@pytest.fixture
async def plog(tmp_path: Path) -> AsyncIterator[PartitionLog]:
    m: MetaStore = open_meta(f"embedded://{tmp_path / 'meta'}")
    await m.start()
    p = await open_log(m, FakeLedgerClient())
    try:
        yield p
    finally:
        await p.close()
        await m.close()


class Verifier:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int, str, int, bool]] = []
        self.answer = ErrorCode.NONE

    async def __call__(self, txn_id: str, pid: int, epoch: int, partitions: set[tuple[str, int]],
                       add: bool) -> dict[tuple[str, int], ErrorCode]:
        self.calls.extend((txn_id, pid, epoch, topic, partition, add) for topic, partition in sorted(partitions))
        return dict.fromkeys(partitions, self.answer)


def services(p: PartitionLog, verifier: Verifier, *, verify: bool = True) -> Any:
    two = dataclasses.replace(p.topic, partitions=2)  # partition 1 is owned elsewhere

    async def get_topic(name: str) -> TopicInfo | None:
        return two if name == p.topic.name else None

    async def get_log(info: TopicInfo, partition: int) -> PartitionLog:
        if partition != 0:
            raise KafkaApiError(int(ErrorCode.NOT_LEADER_OR_FOLLOWER), "elsewhere")
        return p

    return SimpleNamespace(
        topics=SimpleNamespace(get=get_topic), partitions=SimpleNamespace(get=get_log), groups=None,
        config=SimpleNamespace(transaction_partition_verification=verify), txn_verifier=verifier,
    )


async def produce(svc: Any, data: bytearray, *, version: int = 9, txn_id: str | None = "tx") -> tuple[int, int]:
    part = ProduceRequest.PartitionProduceData(index=0, records=bytes(data))
    req = ProduceRequest(transactional_id=txn_id, acks=-1, timeout_ms=10_000,
                         topic_data=[ProduceRequest.TopicProduceData(name="t", partition_data=[part])])
    ctx = RequestContext(0, version, 1, "t", f"test:{version}", svc)
    resp = await handle_produce(ctx, memoryview(bytearray(req.encode(version))))
    assert resp is not None
    r = resp.responses[0].partition_responses[0]
    return r.error_code, r.base_offset


async def test_first_batch_of_a_transaction_is_verified(plog: PartitionLog) -> None:
    v = Verifier()
    svc = services(plog, v)
    v.answer = ErrorCode.INVALID_TXN_STATE  # not added to the transaction (TV1)
    assert await produce(svc, tbatch(1, pid=5, seq=0)) == (ErrorCode.INVALID_TXN_STATE, -1)
    assert v.calls == [("tx", 5, 0, "t", 0, False)] and plog.high_watermark == 0
    for code in (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                 ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NETWORK_EXCEPTION):
        v.answer = code  # retriable for every client
        assert (await produce(svc, tbatch(1, pid=5, seq=0)))[0] == ErrorCode.NOT_ENOUGH_REPLICAS
    # Kafka 4.4's mapping by Produce version
    cases = [(ErrorCode.PRODUCER_FENCED, 9, ErrorCode.INVALID_PRODUCER_EPOCH),
             (ErrorCode.TRANSACTION_ABORTABLE, 10, ErrorCode.INVALID_TXN_STATE),
             (ErrorCode.TRANSACTION_ABORTABLE, 11, ErrorCode.TRANSACTION_ABORTABLE),
             (ErrorCode.CONCURRENT_TRANSACTIONS, 12, ErrorCode.CONCURRENT_TRANSACTIONS),
             (ErrorCode.INVALID_PRODUCER_EPOCH, 12, ErrorCode.INVALID_PRODUCER_EPOCH)]
    for answer, version, expected in cases:
        v.answer = answer
        assert (await produce(svc, tbatch(1, pid=5, seq=0), version=version))[0] == expected, (answer, version)
    v.answer = ErrorCode.NONE
    assert await produce(svc, tbatch(1, pid=5, seq=0)) == (0, 0)
    # inside the open transaction no more questions
    n = len(v.calls)
    assert await produce(svc, tbatch(1, pid=5, seq=1)) == (0, 1)
    assert len(v.calls) == n
    # non-transactional batches never ask
    assert await produce(svc, tbatch(1, pid=6, seq=0, transactional=False), txn_id=None) == (0, 2)
    assert len(v.calls) == n
    # Produce v12+ (TV2): the coordinator is asked to add the partition
    assert await produce(svc, tbatch(1, pid=7, seq=0), version=12) == (0, 3)
    assert v.calls[-1] == ("tx", 7, 0, "t", 0, True)
    # a transactional batch without a transactional id
    assert (await produce(svc, tbatch(1, pid=8, seq=0), txn_id=None))[0] == ErrorCode.INVALID_TXN_STATE


async def test_verification_can_be_disabled(plog: PartitionLog) -> None:
    v = Verifier()
    v.answer = ErrorCode.INVALID_TXN_STATE
    assert await produce(services(plog, v, verify=False), tbatch(1, pid=5, seq=0)) == (0, 0)
    assert v.calls == []


async def test_marker_writer(plog: PartitionLog) -> None:
    svc = services(plog, Verifier())
    write: MarkerWriter = marker_writer(svc.topics, svc.partitions, svc.groups)
    assert await produce(services(plog, Verifier()), tbatch(2, pid=5, seq=0)) == (0, 0)
    assert plog.last_stable_offset == 0
    assert await write("t", 0, 5, 0, False, 3) == ErrorCode.NONE  # durable on return
    assert (plog.high_watermark, plog.last_stable_offset) == (3, 3)
    assert plog.view.aborted.collect(0, 3) == [(5, 0)]
    assert await write("t", 1, 5, 0, True, 3) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert await write("t", 9, 5, 0, True, 3) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert await write("other", 0, 5, 0, True, 3) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert await write("t", 0, 5, 1, True, 3, transaction_version=2) == ErrorCode.NONE  # bumped epoch
    assert await write("t", 0, 5, 0, True, 3) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert await write("t", 0, 5, 1, True, 2, transaction_version=2) == ErrorCode.TRANSACTION_COORDINATOR_FENCED




async def test_a_marker_during_verification_refuses_the_batch(plog: PartitionLog) -> None:
    class AbortMeanwhile(Verifier):
        async def __call__(self, txn_id: str, pid: int, epoch: int, partitions: set[tuple[str, int]],
                           add: bool) -> dict[tuple[str, int], ErrorCode]:
            await plog.append_marker(pid, epoch, False, 0)  # the coordinator aborted meanwhile
            return await super().__call__(txn_id, pid, epoch, partitions, add)

    v = AbortMeanwhile()
    assert (await produce(services(plog, v), tbatch(1, pid=5, seq=0)))[0] == ErrorCode.INVALID_TXN_STATE
    assert plog.high_watermark == 1 and not plog.producers.in_transaction(5)  # only the marker


async def test_the_partitions_of_a_request_are_verified_together(plog: PartitionLog, tmp_path: Path) -> None:
    """One coordinator question for all the partitions a request opens the transaction on (one
    AddPartitionsToTxn, so one coordinator write under TV2), answered per partition."""
    m: MetaStore = open_meta(f"embedded://{tmp_path / 'meta1'}")
    await m.start()
    two = dataclasses.replace(plog.topic, partitions=2)
    other = await PartitionLog.open(m, FakeLedgerClient(), two, 1, replication=REPL)
    plogs = {0: plog, 1: other}

    class PerPartition(Verifier):
        async def __call__(self, txn_id: str, pid: int, epoch: int, partitions: set[tuple[str, int]],
                           add: bool) -> dict[tuple[str, int], ErrorCode]:
            self.calls.append((txn_id, pid, epoch, "+".join(f"{t}-{p}" for t, p in sorted(partitions)), -1, add))
            return {tp: ErrorCode.INVALID_TXN_STATE if tp[1] == 1 and self.answer else ErrorCode.NONE
                    for tp in partitions}

    async def get_topic(name: str) -> TopicInfo | None:
        return two if name == two.name else None

    async def get_log(info: TopicInfo, partition: int) -> PartitionLog:
        return plogs[partition]

    v = PerPartition()
    svc = SimpleNamespace(topics=SimpleNamespace(get=get_topic), partitions=SimpleNamespace(get=get_log), groups=None,
                          config=SimpleNamespace(transaction_partition_verification=True), txn_verifier=v)

    async def both(seq: int) -> list[tuple[int, int]]:
        parts = [ProduceRequest.PartitionProduceData(index=i, records=bytes(tbatch(1, pid=5, seq=seq)))
                 for i in (0, 1)]
        req = ProduceRequest(transactional_id="tx", acks=-1, timeout_ms=10_000,
                             topic_data=[ProduceRequest.TopicProduceData(name=two.name, partition_data=parts)])
        ctx = RequestContext(0, 12, 1, "t", "test:12", svc)
        resp = await handle_produce(ctx, memoryview(bytearray(req.encode(12))))
        assert resp is not None
        return [(r.error_code, r.base_offset) for r in resp.responses[0].partition_responses]

    try:
        v.answer = ErrorCode.INVALID_TXN_STATE  # partition 1 refused, partition 0 accepted
        assert await both(0) == [(0, 0), (ErrorCode.INVALID_TXN_STATE, -1)]
        assert v.calls == [("tx", 5, 0, f"{two.name}-0+{two.name}-1", -1, True)]
        v.answer = ErrorCode.NONE
        assert await both(1) == [(0, 1), (0, 0)]
        assert len(v.calls) == 2 and v.calls[-1][3] == f"{two.name}-1"  # partition 0 is in the transaction now
    finally:
        await other.close()
        await m.close()


class _GatedShardLog(PartitionShardLog):
    """A shard log whose replay waits for `gate` (a shard caught loading)."""

    def __init__(self, plog: PartitionLog, gate: asyncio.Event) -> None:
        super().__init__(plog, 1 << 20)
        self.gate = gate

    async def replay(self) -> AsyncIterator[bytes]:  # type: ignore[override]
        await self.gate.wait()
        async for chunk in self.plog.replay():
            yield chunk


async def test_an_offsets_marker_waits_for_its_group_shard_to_load(tmp_path: Path) -> None:
    """A COMMIT marker on a __consumer_offsets partition whose group shard is still replaying
    is refused (NOT_LEADER_OR_FOLLOWER: the transaction coordinator retries) and not appended;
    once the shard is loaded it goes in and the transaction's offsets are committed there. (A
    marker appended during the replay was in neither the replay nor the loaded state: the
    offsets stayed pending, and the producer's next ABORT dropped them.)"""
    m: MetaStore = open_meta(f"embedded://{tmp_path / 'meta'}")
    await m.start()
    info = TopicInfo(OFFSETS_TOPIC, uuid.UUID(int=9), 1, {"cleanup.policy": "compact"})
    plog = await open_log(m, FakeLedgerClient(), info)
    try:
        # what the shard's previous owner wrote: offsets in producer 7's open transaction
        before = GroupCoordinator(0, PartitionShardLog(plog, 1 << 20), FAST)
        await before.load()
        tp = ("in", 0)
        offset = OffsetAndMetadata(offset=5, leader_epoch=-1, metadata="", commit_timestamp=1, expire_timestamp=-1)
        assert await before.txn_commit_offsets("g", 7, 0, -1, "", None, {tp: offset}) == {tp: ErrorCode.NONE}
        before.unload()

        async def get_log(t: TopicInfo, partition: int) -> PartitionLog:
            return plog

        async def get_topic(name: str) -> TopicInfo | None:
            return info if name == OFFSETS_TOPIC else None

        gate = asyncio.Event()
        svc: Any = SimpleNamespace(
            config=SimpleNamespace(offsets_topic_partitions=1, group={}, share=ShareConfig(), message_max_bytes=1 << 20),
            meta=m, topics=SimpleNamespace(get=get_topic),
            partitions=SimpleNamespace(get=get_log, log_of=lambda tid, p: plog),
        )

        class Groups(GroupCoordinators):
            def shard_log(self, p: PartitionLog) -> PartitionShardLog:
                return _GatedShardLog(p, gate)

        groups = Groups(svc)
        groups.load_wait_s = 0.05
        topics = TopicCache(svc.topics, svc.partitions)
        end = plog.high_watermark
        assert await write_marker(topics, groups, OFFSETS_TOPIC, 0, 7, 0, True, 3) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert plog.high_watermark == end  # not appended while the shard replays
        gate.set()
        assert await write_marker(topics, groups, OFFSETS_TOPIC, 0, 7, 0, True, 3) == ErrorCode.NONE
        assert plog.high_watermark == end + 1
        shard = await groups.coordinator_of_shard(info, 0)
        assert shard.fetch_offsets("g", [tp], require_stable=True)[1][0].offset == 5
        await groups.close()
    finally:
        await plog.close()
        await m.close()
