"""PartitionLog over real bookie processes: an owner change while the old owner is still
writing (its ledger gets fenced), then the new owner rebuilds offsets, indexes and producer
state from the recovered tail."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from gateway.errors import KafkaApiError
from gateway.partition.log import PartitionLog
from gateway.topics.registry import TopicInfo
from kafka_log.index import P_COUNT
from kafka_log.view import batch_offsets
from kafka_wire.errors import ErrorCode
from kafka_wire.records import NewRecord, build_batch
from store.ledger.client import LedgerClient
from store.meta.factory import open_meta
from tests.support.bookies import BookieCluster

pytestmark = pytest.mark.slow


def batch(n: int, *, pid: int = -1, seq: int = -1) -> bytearray:
    recs = [NewRecord(b"k", b"v" * 100, (), 1000 + i) for i in range(n)]
    return bytearray(
        build_batch(recs, producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq)
    )


async def test_owner_change_over_real_bookies(bookie_cluster: BookieCluster, tmp_path: Path) -> None:
    url = f"embedded://{tmp_path / 'meta'}"
    await bookie_cluster(1, url)
    metas = [open_meta(url), open_meta(url)]
    for m in metas:
        await m.start()
    clients = [LedgerClient(metas[0]), LedgerClient(metas[1])]
    topic = TopicInfo("real", uuid.UUID(int=1), 1, {})
    try:
        a = await PartitionLog.open(metas[0], clients[0], topic, 0, replication=(1, 1, 1))
        futs = [
            a.append(
                memoryview(batch(2, pid=9, seq=2 * i)),
                api_version=9,
                max_message_bytes=1 << 20,
                log_append_time=False,
            )
            for i in range(50)
        ]
        assert [(await f).base_offset for f in futs] == list(range(0, 100, 2))
        b = await PartitionLog.open(metas[1], clients[1], topic, 0, replication=(1, 1, 1))
        assert (b.leader_epoch, b.high_watermark) == (1, 100)
        assert b.ml.ledgers[0].props[P_COUNT] == "50"
        with pytest.raises(KafkaApiError) as ei:
            await a.append(
                memoryview(batch(1)), api_version=9, max_message_bytes=1 << 20, log_append_time=False
            )
        assert ei.value.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        got = await b.read(37, 1 << 20)
        assert batch_offsets(bytes(got[0]))[0] == 36
        assert sum(batch_offsets(bytes(x))[1] - batch_offsets(bytes(x))[0] + 1 for x in got) == 64
        dup = await b.append(
            memoryview(batch(2, pid=9, seq=98)),
            api_version=9,
            max_message_bytes=1 << 20,
            log_append_time=False,
        )
        assert dup.base_offset == 98
        assert b.end_offset_for_epoch(0) == (0, 100)
        await b.close()
        with pytest.raises(KafkaApiError):
            await a.read(0, 100)
        await a.close()
    finally:
        for c in clients:
            await c.close()
        for m in metas:
            await m.close()
