"""PartitionLog over the in-memory ledger client and an embedded metadata store: offsets,
reads, indexes across ledgers, owner changes, DeleteRecords, timestamps, leader epochs."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.errors import KafkaApiError
from gateway.partition.log import PartitionLog
from gateway.partition.producer_ids import ProducerIdAllocator
from gateway.topics.registry import TopicInfo
from kafka_log.index import P_COUNT, P_FIRST
from kafka_log.view import batch_offsets
from kafka_wire.errors import ErrorCode
from kafka_wire.records import NewRecord, RecordBatch, TimestampType, build_batch, iter_batches
from store.ledger.errors import LedgerError
from store.managed.metadata import LedgerInfo
from store.meta.api import MetaStore
from store.meta.factory import open_meta
from tests.store.managed.fakes import FakeLedgerClient
from tests.support.clock import FakeClock
from tests.support.wait import eventually

REPL = (1, 1, 1)


@pytest.fixture
async def meta(tmp_path: Path) -> AsyncIterator[MetaStore]:
    m = open_meta(f"embedded://{tmp_path / 'meta'}")
    await m.start()
    try:
        yield m
    finally:
        await m.close()


def topic(**configs: str) -> TopicInfo:
    return TopicInfo("t", uuid.UUID(int=7), 1, dict(configs))


def batch(
    n: int = 1, *, ts: int = 1000, pid: int = -1, epoch: int = -1, seq: int = -1, value: bytes = b"v"
) -> bytearray:
    recs = [NewRecord(f"k{i}".encode(), value, (), ts + i) for i in range(n)]
    return bytearray(build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq))


async def produce(p: PartitionLog, data: bytearray, *, max_bytes: int = 1 << 20, lat: bool = False) -> int:
    res = await p.append(memoryview(data), api_version=9, max_message_bytes=max_bytes, log_append_time=lat)
    return res.base_offset


async def open_log(meta: MetaStore, client: FakeLedgerClient, t: TopicInfo | None = None) -> PartitionLog:
    return await PartitionLog.open(meta, client, t or topic(), 0, replication=REPL)


def offsets_of(bufs: list[bytes | memoryview]) -> list[int]:
    out = []
    for b in bufs:
        data = bytes(b)
        if len(data) >= 61 and len(data) == RecordBatch(data).size:
            base, last = batch_offsets(data)
            out.extend(range(base, last + 1))
    return out


async def test_offsets_are_dense_and_reads_return_stored_batches(meta: MetaStore) -> None:
    client = FakeLedgerClient()
    p = await open_log(meta, client)
    assert (p.leader_epoch, p.high_watermark, p.log_start_offset) == (0, 0, 0)
    bases = [await produce(p, batch(n)) for n in (1, 3, 2, 5)]
    assert bases == [0, 1, 4, 6]
    assert p.high_watermark == 11
    got = await p.read(0, 1 << 20)
    assert offsets_of(got) == list(range(11))
    for b in got:
        rb = RecordBatch(b)
        rb.validate(from_client=False)
        assert rb.partition_leader_epoch == 0
    # from the middle of a batch: that whole batch comes first
    assert offsets_of(await p.read(5, 1 << 20))[0] == 4
    assert await p.read(11, 1 << 20) == []
    with pytest.raises(KafkaApiError) as ei:
        await p.read(12, 1 << 20)
    assert ei.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    await p.close()


async def test_read_limits_follow_kafka(meta: MetaStore) -> None:
    p = await open_log(meta, FakeLedgerClient())
    sizes = []
    for _ in range(4):
        data = batch(1, value=b"x" * 100)
        sizes.append(len(data))
        await produce(p, data)
    # the first batch is returned whole even when larger than the limit (KIP-74)
    got = await p.read(0, 10)
    assert [len(b) for b in got] == [sizes[0]]
    # ... but not when another partition already filled the response
    got = await p.read(0, 10, min_one=False)
    assert [len(b) for b in got] == [10] and offsets_of(got) == []
    # whole batches, then the cut start of the next one
    got = await p.read(0, sizes[0] + sizes[1] + 20)
    assert [len(b) for b in got] == [sizes[0], sizes[1], 20]
    assert offsets_of(got) == [0, 1]
    await p.close()


async def test_rollover_indexes_and_reopen(meta: MetaStore) -> None:
    client = FakeLedgerClient()
    t = topic(**{"segment.bytes": "400"})
    p = await open_log(meta, client, t)
    for i in range(30):
        assert await produce(p, batch(2, ts=10_000 + 10 * i)) == 2 * i
    await p.ml.flush()  # the last rollover
    assert len(p.ml.ledgers) > 3

    def indexes_persisted() -> bool:  # in the background, after each rollover
        finished = [li for li in p.ml.ledgers[:-1] if li.entries]
        return bool(finished) and all(P_FIRST in li.props for li in finished[:-1])

    await eventually(indexes_persisted)
    for off in (0, 1, 17, 33, 59):
        got = await p.read(off, 1)
        assert off in offsets_of(got)
    await p.close()
    p2 = await open_log(meta, client, t)
    assert p2.leader_epoch == 1
    assert p2.high_watermark == 60
    assert client.reads <= 2 + len(p2.ml.ledgers)  # no recovery scan of indexed ledgers
    for off in (0, 25, 59):
        assert off in offsets_of(await p2.read(off, 1))
    assert await produce(p2, batch(1)) == 60
    assert p2.epoch_for_offset(59) == 0 and p2.epoch_for_offset(60) == 1
    assert p2.end_offset_for_epoch(0) == (0, 60)
    assert p2.end_offset_for_epoch(1) == (1, 61)
    assert p2.end_offset_for_epoch(5) == (-1, -1)
    await p2.close()


async def test_owner_change_without_close_rebuilds_from_the_tail(meta: MetaStore) -> None:
    client = FakeLedgerClient()
    p = await open_log(meta, client)
    lost: list[bool] = []
    p.add_lost_listener(lambda: lost.append(True))
    for i in range(5):
        await produce(p, batch(2, pid=42, epoch=0, seq=2 * i))
    # a second owner takes over while the first still thinks it owns the partition
    p2 = await open_log(meta, client)
    assert p2.leader_epoch == 1
    assert p2.high_watermark == 10
    assert offsets_of(await p2.read(0, 1 << 20)) == list(range(10))
    # producer state was replayed: a resend of the last batch is a duplicate with its offset
    assert await produce(p2, batch(2, pid=42, epoch=0, seq=8)) == 8
    assert await produce(p2, batch(2, pid=42, epoch=0, seq=10)) == 10
    # the old owner is fenced
    with pytest.raises(KafkaApiError) as ei:
        await produce(p, batch(1))
    assert ei.value.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert lost == [True]
    # the rebuilt index was persisted for the recovered ledger
    first = p2.ml.ledgers[0]
    assert first.props[P_COUNT] == "5" and first.props[P_FIRST] == "0"
    await p2.close()


async def test_idempotent_sequences(meta: MetaStore) -> None:
    p = await open_log(meta, FakeLedgerClient())
    assert await produce(p, batch(3, pid=1, epoch=0, seq=0)) == 0
    assert await produce(p, batch(1, pid=1, epoch=0, seq=3)) == 3
    # duplicates of any of the last five batches get their original offsets, nothing appended
    assert await produce(p, batch(3, pid=1, epoch=0, seq=0)) == 0
    assert p.high_watermark == 4

    async def err(data: bytearray) -> int:
        with pytest.raises(KafkaApiError) as ei:
            await produce(p, data)
        return ei.value.error_code

    assert await err(batch(1, pid=1, epoch=0, seq=7)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert await err(batch(1, pid=1, epoch=1, seq=5)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert await produce(p, batch(1, pid=1, epoch=1, seq=0)) == 4  # new epoch restarts at 0
    assert await err(batch(1, pid=1, epoch=0, seq=4)) == ErrorCode.INVALID_PRODUCER_EPOCH
    # an unknown producer may start at any sequence (Kafka 4.x)
    assert await produce(p, batch(1, pid=2, epoch=3, seq=77)) == 5
    # a duplicate of a batch still in flight waits for it and shares its answer
    f1 = p.append(
        memoryview(batch(1, pid=2, epoch=3, seq=78)),
        api_version=9,
        max_message_bytes=1 << 20,
        log_append_time=False,
    )
    f2 = p.append(
        memoryview(batch(1, pid=2, epoch=3, seq=78)),
        api_version=9,
        max_message_bytes=1 << 20,
        log_append_time=False,
    )
    assert (await f1).base_offset == (await f2).base_offset == 6
    assert {(x.producer_id, x.producer_epoch, x.last_sequence) for x in p.active_producers()} == {
        (1, 1, 0),
        (2, 3, 78),
    }
    await p.close()
    # the snapshot written at close restores the state
    p2 = await open_log(meta, p.ml.client)  # type: ignore[arg-type]
    assert await produce(p2, batch(1, pid=2, epoch=3, seq=78)) == 6
    assert await produce(p2, batch(1, pid=2, epoch=3, seq=79)) == 7
    await p2.close()


async def test_bad_batches(meta: MetaStore) -> None:
    p = await open_log(meta, FakeLedgerClient())
    data = batch(1, value=b"x" * 200)
    with pytest.raises(KafkaApiError) as ei:
        await produce(p, data, max_bytes=100)
    assert ei.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    data[-1] ^= 0xFF
    with pytest.raises(KafkaApiError) as ei:
        await produce(p, data)
    assert ei.value.error_code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(KafkaApiError) as ei:
        await produce(p, bytearray())
    assert ei.value.error_code == ErrorCode.INVALID_RECORD
    assert p.high_watermark == 0
    await p.close()


async def test_log_append_time_and_timestamp_lookups(meta: MetaStore) -> None:
    p = await open_log(meta, FakeLedgerClient(), topic(**{"segment.bytes": "300"}))
    for i in range(10):
        await produce(p, batch(3, ts=1000 * (i + 1)))  # record timestamps 1000i+1000 .. +2
    assert await p.offset_for_timestamp(0) == (1000, 0)
    assert await p.offset_for_timestamp(5001) == (5001, 13)
    assert await p.offset_for_timestamp(5003) == (6000, 15)
    assert await p.offset_for_timestamp(99_999) is None
    assert await p.max_timestamp() == (10_002, 29)
    base = await produce(p, batch(2, ts=5), lat=True)
    stored = bytes((await p.read(base, 1 << 20))[0])
    rb = RecordBatch(stored)
    rb.validate(from_client=False)  # CRC recomputed
    assert rb.timestamp_type == TimestampType.LOG_APPEND_TIME and rb.max_timestamp > 10**12
    assert await p.offset_for_timestamp(10**12) == (rb.max_timestamp, base)
    await p.close()


async def test_delete_records(meta: MetaStore) -> None:
    client = FakeLedgerClient()
    t = topic(**{"segment.bytes": "200"})
    p = await open_log(meta, client, t)
    for _ in range(20):
        await produce(p, batch(2))
    await p.ml.flush()  # the last rollover
    ledgers_before = len(p.ml.ledgers)
    assert await p.delete_records(25) == 25
    assert p.log_start_offset == 25
    assert len(p.ml.ledgers) < ledgers_before
    with pytest.raises(KafkaApiError) as ei:
        await p.read(24, 1 << 20)
    assert ei.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    got = offsets_of(await p.read(25, 1 << 20))
    assert got[0] == 24 and got[-1] == 39  # the batch holding 25 starts at 24
    with pytest.raises(KafkaApiError) as ei:
        await p.delete_records(41)
    assert ei.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert await p.delete_records(3) == 25  # never moves back
    await p.close()
    p2 = await open_log(meta, client, t)
    assert (p2.log_start_offset, p2.high_watermark) == (25, 40)
    assert await p2.delete_records(-1) == 40
    assert p2.log_start_offset == 40
    assert await p2.read(40, 100) == []
    assert await produce(p2, batch(1)) == 40
    await p2.close()


async def test_waiters_are_woken_by_appends(meta: MetaStore) -> None:
    p = await open_log(meta, FakeLedgerClient())
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    p.add_waiter(fut)
    assert not fut.done()
    await produce(p, batch(1))
    assert fut.done()
    await p.close()


async def test_retention_from_topic_config_keeps_closed_ledgers(meta: MetaStore) -> None:
    # Kafka consumers hold no cursors: only retention.ms/bytes may delete ledgers
    client = FakeLedgerClient()
    p = await open_log(meta, client, topic(**{"segment.bytes": "200"}))
    for _ in range(10):
        await produce(p, batch(1))
    await p.ml.flush()  # the last rollover
    assert len([li for li in p.ml.ledgers if li.entries]) > 1
    await p.ml.trim()
    assert p.log_start_offset == 0 and offsets_of(await p.read(0, 1 << 20))[:1] == [0]
    await p.close()


async def test_producer_id_blocks_are_unique(meta: MetaStore) -> None:
    a, b = ProducerIdAllocator(meta, block_size=3), ProducerIdAllocator(meta, block_size=3)
    ids = [await a.next(), await b.next(), await a.next(), await a.next(), await a.next(), await b.next()]
    assert len(set(ids)) == 6
    assert ids[:2] == [0, 3]


def test_stored_batches_concatenate() -> None:
    data = bytes(batch(2)) + bytes(batch(1))
    assert len(list(iter_batches(data))) == 2


async def test_age_rollover_persists_the_finished_index(meta: MetaStore) -> None:
    client = FakeLedgerClient()
    clock = FakeClock()
    p = await PartitionLog.open(meta, client, topic(**{"segment.ms": "20"}), 0, replication=REPL, clock=clock)
    for _ in range(3):
        await produce(p, batch(2))
    await clock.advance(0.01)
    await p.ml.flush()
    assert len(p.ml.ledgers) == 1  # younger than segment.ms: not rolled
    await clock.advance(0.1)  # the age timer rolls the ledger; no further append arrives

    def finished() -> list[LedgerInfo]:
        return [li for li in p.ml.ledgers[:-1] if li.entries]

    await eventually(lambda: bool(finished()) and P_COUNT in finished()[0].props)
    done = finished()
    assert done[0].props[P_COUNT] == "3" and done[0].props[P_FIRST] == "0"
    reads = client.reads
    await p.close()
    p2 = await open_log(meta, client)
    assert p2.high_watermark == 6 and client.reads - reads <= 2
    await p2.close()


async def test_timestamp_limits_and_producer_expiry(meta: MetaStore) -> None:
    p = await open_log(meta, FakeLedgerClient())
    import time

    wall = int(time.time() * 1000)

    async def append(data: bytearray) -> int:
        res = await p.append(
            memoryview(data),
            api_version=9,
            max_message_bytes=1 << 20,
            log_append_time=False,
            timestamp_before_max_ms=60_000,
            timestamp_after_max_ms=60_000,
        )
        return res.base_offset

    assert await append(batch(1, ts=wall)) == 0
    for ts in (wall + 3_600_000, wall - 3_600_000):
        with pytest.raises(KafkaApiError) as ei:
            await append(batch(1, ts=ts))
        assert ei.value.error_code == ErrorCode.INVALID_TIMESTAMP
    # producers idle longer than producer.id.expiration.ms are forgotten (by append time:
    # old record timestamps do not count)
    await produce(p, batch(1, ts=1000, pid=5, epoch=0, seq=0))
    p.producers.producers[5].touched_ms -= 90_000_000
    await produce(p, batch(1, ts=1000, pid=6, epoch=0, seq=0))
    p.producers.expire(int(time.time() * 1000) - 86_400_000)
    assert [x.producer_id for x in p.active_producers()] == [6]
    await p.close()


async def test_topic_config_changes_apply_to_the_open_log(meta: MetaStore) -> None:
    p = await open_log(meta, FakeLedgerClient())
    assert p.ml.config.retention_ms == 604_800_000 and p.ml.config.max_bytes == 1 << 30
    p.update_topic(topic(**{"retention.ms": "1000", "segment.bytes": "300", "min.insync.replicas": "2"}))
    cfg = p.ml.config
    assert (cfg.retention_ms, cfg.max_bytes, cfg.ack_quorum) == (1000, 300, 1)  # AQ is capped by WQ
    for _ in range(5):
        await produce(p, batch(3))
    await p.ml.flush()  # the last rollover
    assert len([li for li in p.ml.ledgers if li.entries]) > 1
    await p.close()


def at(base: int, n: int = 1, *, ts: int = 1000, lat: bool = False, pid: int = -1) -> bytearray:
    """A batch as copied from another cluster: its own base offset (and maybe LogAppendTime)."""
    recs = [NewRecord(f"k{i}".encode(), b"v", (), ts + i) for i in range(n)]
    data = bytearray(build_batch(recs, base_offset=base, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                 base_sequence=0 if pid >= 0 else -1))
    if lat:
        RecordBatch(data).set_log_append_time(ts + 500)
    return data


async def test_imports_keep_offsets_and_gaps_across_rollover_and_owner_change(meta: MetaStore) -> None:
    client = FakeLedgerClient()
    t = topic(**{"segment.bytes": "300"})
    p = await open_log(meta, client, t)
    r = await p.import_batches(memoryview(at(5, 2) + at(9, 1, lat=True)))
    assert r.base_offset == 9 and p.high_watermark == 10
    assert p.log_start_offset == 0  # the gap before the first import is the log's, as on the source
    for i in range(8):  # enough to roll ledgers
        await p.import_batches(memoryview(at(20 + 10 * i, 3)))
    assert len(p.ml.ledgers) > 2
    expected = [5, 6, 9, *(o for i in range(8) for o in range(20 + 10 * i, 23 + 10 * i))]
    assert offsets_of(await p.read(0, 1 << 20)) == expected
    assert offsets_of(await p.read(7, 1))[0] == 9  # a fetch inside a gap starts at the next batch
    assert offsets_of(await p.read(45, 1))[0] == 50
    stored = [RecordBatch(bytes(b)) for b in await p.read(9, 1)]
    assert stored[0].timestamp_type == TimestampType.LOG_APPEND_TIME and stored[0].max_timestamp == 1500
    with pytest.raises(KafkaApiError) as ei:  # never below the end, nothing of the request appended
        p.import_batches(memoryview(at(100, 1) + at(50, 1)))
    assert ei.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and p.high_watermark == 93
    with pytest.raises(KafkaApiError) as ei:
        p.import_batches(memoryview(at(200, 1, pid=7)))
    assert ei.value.error_code == ErrorCode.INVALID_RECORD
    assert await produce(p, batch(2)) == 93  # producers continue after the imported end
    # a new owner (the old one not closed) rebuilds the gapped tail and continues from it
    await p.ml.flush()
    await asyncio.gather(*p._tasks)  # the old owner's index persisting would race the takeover
    p2 = await open_log(meta, client, t)
    assert (p2.high_watermark, p2.log_start_offset) == (95, 0)
    assert offsets_of(await p2.read(0, 1 << 20)) == [*expected, 93, 94]
    assert offsets_of(await p2.read(13, 1))[0] == 20
    assert (await p2.import_batches(memoryview(at(1000, 2)))).base_offset == 1000
    assert p2.high_watermark == 1002
    await p2.close()


async def test_pipelined_imports_with_an_expected_end(meta: MetaStore) -> None:
    """Imports in flight together each apply only where the one before ends: one refused
    (it expected another end) refuses the next, so nothing lands beyond its offsets."""
    p = await open_log(meta, FakeLedgerClient(), topic())
    futs = [p.import_batches(memoryview(at(4 * i + 1, 2)), expected_end=max(4 * i - 1, 0)) for i in range(5)]
    assert [(await f).base_offset for f in futs] == [1, 5, 9, 13, 17]  # none awaited before the next
    assert p.high_watermark == 19
    with pytest.raises(KafkaApiError) as ei:
        p.import_batches(memoryview(at(20, 1)), expected_end=18)
    assert ei.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and "ends at 19" in ei.value.message
    assert (await p.import_batches(memoryview(at(20, 1)), expected_end=19)).base_offset == 20
    assert offsets_of(await p.read(0, 1 << 20)) == [1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 20]
    await p.close()


def test_clear_producer_keeps_the_batch_valid() -> None:
    data = at(3, 2, pid=9)
    b = RecordBatch(data)
    assert b.clear_producer() and not b.clear_producer()
    assert b.validate(from_client=False)[9:12] == (-1, -1, -1)
    assert [r.key for r in b.records()] == [b"k0", b"k1"]


async def test_a_resent_batch_whose_append_failed_is_not_acknowledged(meta: MetaStore) -> None:
    """Fault run (seed 7, chaos-2): a write failure (an ensemble change that could not reach
    ZooKeeper) left the handle serving while it verified its ownership, and the producer's
    resends of the failed batches were answered as duplicates with offsets never written:
    1521 acknowledged records lost. A failed append must never be acknowledged."""
    client = FakeLedgerClient()
    p = await open_log(meta, client)
    assert await produce(p, batch(2, pid=42, epoch=0, seq=0)) == 0
    # the ownership check after the failure cannot finish (ZooKeeper unreachable)
    unreachable = asyncio.Event()

    async def verify_blocked(ledger_id: int) -> None:
        await unreachable.wait()

    p.ml._verify_ownership = verify_blocked  # type: ignore[method-assign]
    writer = p.ml._writer
    assert writer is not None

    def failing_append(payload: bytes) -> asyncio.Future[int]:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        fut.set_exception(LedgerError("ensemble change failed: ZooKeeper unreachable"))
        return fut

    writer.append = failing_append  # type: ignore[method-assign]

    async def err(data: bytearray) -> int:
        with pytest.raises(KafkaApiError) as ei:
            await produce(p, data)
        return ei.value.error_code

    assert await err(batch(2, pid=42, epoch=0, seq=2)) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # the producer resends the same batch: still an error (retriable), never its offset
    assert await err(batch(2, pid=42, epoch=0, seq=2)) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert p.high_watermark == 2
    unreachable.set()
    # the next owner has the two records and takes the resend as new
    p2 = await open_log(meta, client)
    assert p2.high_watermark == 2
    assert await produce(p2, batch(2, pid=42, epoch=0, seq=2)) == 2
    assert offsets_of(await p2.read(0, 1 << 20)) == [0, 1, 2, 3]
    await p2.close()
