"""Transactions in a PartitionLog (in-memory ledgers, embedded metadata): open transactions and
the last stable offset, COMMIT/ABORT markers and Kafka's epoch checks, the aborted-transactions
index, producer sequences across transactions, and owner changes (clean and not) rebuilding it
all."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.errors import KafkaApiError
from gateway.partition.log import PartitionLog
from kafka_log.txn import P_ABORTED, AbortedFilter, AbortedIndex, AbortedTxn
from kafka_wire.errors import ErrorCode
from kafka_wire.records import NewRecord, RecordBatch, build_batch, iter_batches, read_end_txn_marker
from store.meta.api import MetaStore
from store.meta.factory import open_meta
from tests.gateway.test_partition_log import offsets_of, open_log, produce, topic
from tests.store.managed.fakes import FakeLedgerClient, FakeWriter
from tests.support.wait import eventually


@pytest.fixture
async def meta(tmp_path: Path) -> AsyncIterator[MetaStore]:
    m = open_meta(f"embedded://{tmp_path / 'meta'}")
    await m.start()
    try:
        yield m
    finally:
        await m.close()


def tbatch(n: int, *, pid: int, epoch: int = 0, seq: int, transactional: bool = True) -> bytearray:
    recs = [NewRecord(f"k{i}".encode(), b"v", (), 1000 + i) for i in range(n)]
    return bytearray(build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                 transactional=transactional))


async def marker(p: PartitionLog, pid: int, epoch: int, commit: bool, *, coord: int = 0, tv: int = 1) -> int:
    return (await p.append_marker(pid, epoch, commit, coord, tv)).base_offset


async def error_of(coro: object) -> int:
    with pytest.raises(KafkaApiError) as ei:
        await coro  # type: ignore[misc]
    return ei.value.error_code


async def test_lso_follows_open_transactions_and_aborts_are_indexed(meta: MetaStore) -> None:
    p = await open_log(meta, FakeLedgerClient())
    assert await produce(p, tbatch(2, pid=1, seq=0, transactional=False)) == 0  # plain idempotent
    assert await produce(p, tbatch(3, pid=7, seq=0)) == 2  # opens pid 7's transaction at 2
    assert await produce(p, tbatch(1, pid=8, seq=0)) == 5  # opens pid 8's at 5
    assert await produce(p, tbatch(2, pid=7, seq=3)) == 6
    assert (p.high_watermark, p.last_stable_offset) == (8, 2)
    assert await marker(p, 7, 0, commit=False) == 8  # abort 7: [2, 8]
    assert (p.high_watermark, p.last_stable_offset) == (9, 5)
    assert await marker(p, 8, 0, commit=True) == 9
    assert (p.high_watermark, p.last_stable_offset) == (10, 10)
    assert p.view.aborted.collect(0, 10) == [(7, 2)]
    assert p.view.aborted.collect(9, 10) == []  # ended before
    assert p.view.aborted.collect(0, 2) == []  # starts after
    # the markers are control batches as Kafka writes them
    data = b"".join(bytes(b) for b in await p.read(8, 1 << 20))
    markers = [(b.base_offset, b.producer_id, read_end_txn_marker(b)) for b in iter_batches(data)]
    assert [(o, pid, m.commit if m else None) for o, pid, m in markers] == [(8, 7, False), (9, 8, True)]
    assert all(b.is_control and b.is_transactional for b in iter_batches(data))
    # DescribeProducers' view
    infos = {i.producer_id: i for i in p.active_producers()}
    assert infos[7].current_txn_start_offset == -1 and infos[7].coordinator_epoch == 0
    assert await produce(p, tbatch(1, pid=7, seq=5)) == 10  # a new transaction of 7 (TV1: same epoch)
    infos = {i.producer_id: i for i in p.active_producers()}
    assert infos[7].current_txn_start_offset == 10
    await p.close()


async def test_read_committed_stops_at_the_lso(meta: MetaStore) -> None:
    p = await open_log(meta, FakeLedgerClient())
    await produce(p, tbatch(2, pid=3, seq=0, transactional=False))
    await produce(p, tbatch(2, pid=4, seq=0))  # open at 2
    await produce(p, tbatch(2, pid=5, seq=0, transactional=False))  # after the open one
    recs, aborted = await p.read_committed(0, 1 << 20)
    assert (offsets_of(recs), aborted) == ([0, 1], [])
    assert await p.read_committed(2, 1 << 20) == ([], [])  # at the LSO: nothing yet
    assert await p.read_committed(5, 1 << 20) == ([], [])  # between LSO and HW: nothing, no error
    assert offsets_of(await p.read(0, 1 << 20)) == list(range(6))  # read_uncommitted sees it all
    await marker(p, 4, 0, commit=False)
    recs, aborted = await p.read_committed(0, 1 << 20)
    assert offsets_of(recs) == list(range(7)) and aborted == [(4, 2)]  # the marker at 6 too
    assert (await p.read_committed(4, 1 << 20))[1] == [(4, 2)]
    await p.close()


async def test_marker_and_batch_epoch_rules(meta: MetaStore) -> None:
    p = await open_log(meta, FakeLedgerClient())
    await produce(p, tbatch(1, pid=9, epoch=3, seq=0))
    # a non-transactional write inside an open transaction
    assert await error_of(produce(p, tbatch(1, pid=9, epoch=3, seq=1, transactional=False))) == \
        ErrorCode.INVALID_TXN_STATE
    assert await error_of(produce(p, tbatch(1, pid=9, epoch=2, seq=1))) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert await error_of(marker(p, 9, 2, commit=True)) == ErrorCode.INVALID_PRODUCER_EPOCH  # TV1: older
    assert await error_of(marker(p, 9, 3, commit=True, tv=2)) == ErrorCode.INVALID_PRODUCER_EPOCH  # TV2: not bumped
    await marker(p, 9, 4, commit=True, coord=5, tv=2)  # TV2 commit with the bumped epoch
    assert p.last_stable_offset == p.high_watermark
    assert await marker(p, 9, 4, commit=True, coord=5, tv=2) == 2  # a retried TV2 marker is written again
    assert await error_of(marker(p, 9, 5, commit=True, coord=4)) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    # after the bump the producer's sequences start over at 0
    assert await error_of(produce(p, tbatch(1, pid=9, epoch=4, seq=1))) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert await produce(p, tbatch(1, pid=9, epoch=4, seq=0)) == 3
    assert await produce(p, tbatch(1, pid=9, epoch=4, seq=0)) == 3  # a duplicate still is one
    # a marker for a producer with nothing open is appended, and indexes nothing
    await marker(p, 11, 0, commit=False)
    assert len(p.view.aborted) == 0
    # a transactional batch without a producer id
    assert await error_of(produce(p, tbatch(1, pid=-1, epoch=-1, seq=-1))) == ErrorCode.INVALID_RECORD
    await p.close()


async def test_owner_change_without_close_rebuilds_transactions(meta: MetaStore) -> None:
    client = FakeLedgerClient()
    t = topic(**{"segment.bytes": "300"})
    p = await open_log(meta, client, t)
    await produce(p, tbatch(2, pid=1, seq=0))  # 0-1, aborted below, in an early ledger
    for i in range(6):
        await produce(p, tbatch(2, pid=2, seq=2 * i, transactional=False))
    await marker(p, 1, 0, commit=False)  # 14
    for i in range(6):
        await produce(p, tbatch(2, pid=2, seq=12 + 2 * i, transactional=False))
    await produce(p, tbatch(1, pid=3, seq=0))  # 27, aborted in the tail
    await produce(p, tbatch(1, pid=4, seq=0))  # 28, left open
    await marker(p, 3, 0, commit=False)  # 29
    await p.ml.flush()
    assert len(p.ml.ledgers) > 3
    await eventually(lambda: any(P_ABORTED in li.props for li in p.ml.ledgers))
    await eventually(lambda: not p._tasks)  # background index persists done: a takeover now wins
    lso, hw = p.last_stable_offset, p.high_watermark
    assert (lso, hw) == (28, 30)
    # a second owner takes over while the first still thinks it owns the partition
    p2 = await open_log(meta, client, t)
    assert (p2.last_stable_offset, p2.high_watermark) == (28, 30)
    assert p2.view.aborted.collect(0, 30) == [(1, 0), (3, 27)]
    recs, aborted = await p2.read_committed(0, 1 << 20)
    assert offsets_of(recs) == list(range(28)) and aborted == [(1, 0), (3, 27)]
    # the open transaction goes on: its producer's sequence continues, and a commit closes it
    assert await produce(p2, tbatch(1, pid=4, seq=1)) == 30
    assert await produce(p2, tbatch(1, pid=4, seq=1)) == 30  # duplicate across the owner change
    await marker(p2, 4, 0, commit=True)
    assert p2.last_stable_offset == p2.high_watermark == 32
    await p2.close()
    # a clean close: the third owner reads every index from metadata
    p3 = await open_log(meta, client, t)
    assert (p3.last_stable_offset, p3.high_watermark) == (32, 32)
    assert p3.view.aborted.collect(0, 32) == [(1, 0), (3, 27)]
    await p3.close()


async def test_snapshot_holds_only_durable_transaction_state(meta: MetaStore) -> None:
    client = FakeLedgerClient()
    p = await open_log(meta, client)
    await produce(p, tbatch(1, pid=5, seq=0))
    await p.close()
    p2 = await open_log(meta, client)
    assert p2.last_stable_offset == 0 and p2.producers.in_transaction(5)
    await marker(p2, 5, 0, commit=False)
    await p2.close()
    p3 = await open_log(meta, client)
    assert p3.last_stable_offset == p3.high_watermark == 2
    assert p3.view.aborted.collect(0, 2) == [(5, 0)]
    await p3.close()


class HeldClient(FakeLedgerClient):
    """In-memory ledgers whose appends reach the bookies only while `flowing` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.flowing = asyncio.Event()
        self.flowing.set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def create(self, ensemble_size: int, write_quorum: int, ack_quorum: int, *,
                     properties: dict[str, str] | None = None) -> FakeWriter:
        w = await super().create(ensemble_size, write_quorum, ack_quorum, properties=properties)
        send = w.append

        def append(payload: bytes) -> asyncio.Future[int]:
            if self.flowing.is_set():
                return send(payload)
            out: asyncio.Future[int] = asyncio.get_running_loop().create_future()

            async def later() -> None:
                await self.flowing.wait()
                try:
                    out.set_result(await send(payload))
                except Exception as e:
                    out.set_exception(e)

            task = asyncio.get_running_loop().create_task(later())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return out

        w.append = append  # type: ignore[method-assign]
        return w


def confirm_while_writing_ledger_props(p: PartitionLog, marker_fut: Awaitable[Any]) -> None:
    """Once the log writes a ledger's properties, let the held appends through and wait for the
    marker's confirmation before the write goes on: what a slow bookie ack does to a close."""
    write: Callable[..., Awaitable[None]] = p.ml.set_ledger_properties

    async def spy(*args: Any, **kwargs: Any) -> None:
        client = p.ml.client
        assert isinstance(client, HeldClient)
        client.flowing.set()
        await marker_fut
        await write(*args, **kwargs)

    p.ml.set_ledger_properties = spy  # type: ignore[method-assign]


async def test_abort_in_flight_at_a_clean_close_stays_aborted(meta: MetaStore) -> None:
    # seed 11 of the transactional fault run: an ABORT marker still unacknowledged when the
    # owner handed the partition over; the close persisted the index without it, then a
    # producer snapshot after it and no aborted entry, and the next owner let the
    # transaction's records through to read_committed readers
    client = HeldClient()
    p = await open_log(meta, client)
    assert await produce(p, tbatch(3, pid=5, seq=0)) == 0
    client.flowing.clear()
    m = p.append_marker(5, 0, False, 0)  # ABORT at 3, not acknowledged yet
    confirm_while_writing_ledger_props(p, m)
    closing = asyncio.create_task(p.close())
    client.flowing.set()  # the acknowledgement comes while the partition closes
    await closing
    assert (await m).base_offset == 3
    p2 = await open_log(meta, client)
    assert (p2.last_stable_offset, p2.high_watermark) == (4, 4)
    assert p2.view.aborted.collect(0, 4) == [(5, 0)]
    recs, aborted = await p2.read_committed(0, 1 << 20)
    assert aborted == [(5, 0)] and AbortedFilter(aborted).keep(recs) == []  # a consumer gets nothing
    await p2.close()


async def test_abort_confirmed_while_its_ledger_props_are_written_survives_a_takeover(meta: MetaStore) -> None:
    client = HeldClient()
    p = await open_log(meta, client)
    assert await produce(p, tbatch(3, pid=5, seq=0)) == 0
    client.flowing.clear()
    m = p.append_marker(5, 0, False, 0)
    confirm_while_writing_ledger_props(p, m)
    await p._persist(p.view.index.last)  # as a close or a rollover does
    assert (await m).base_offset == 3
    p2 = await open_log(meta, client)  # a takeover, the first owner never closing
    assert p2.view.aborted.collect(0, 4) == [(5, 0)]
    assert (p2.last_stable_offset, p2.high_watermark) == (4, 4)
    await p2.close()


def test_aborted_index_collect_and_persistence() -> None:
    idx = AbortedIndex()
    idx.add(10, AbortedTxn(1, 0, 5, 3))  # lso 3: txn of pid 2 (from 3) still open then
    idx.add(10, AbortedTxn(2, 3, 9, 10))
    idx.add(11, AbortedTxn(3, 20, 25, 26))
    idx.add(11, AbortedTxn(3, 20, 25, 26))  # once
    assert len(idx) == 3
    assert idx.collect(0, 4) == [(1, 0), (2, 3)]
    assert idx.collect(6, 30) == [(2, 3), (3, 20)]
    assert idx.collect(0, 2) == [(1, 0)]  # stops at the entry whose lso reaches the bound
    props = idx.ledger_props(10)
    idx.mark_persisted(10)
    assert idx.unpersisted_text() == "11,3,20,25,26"
    again = AbortedIndex()
    again.load_ledger(10, {k: v for k, v in props.items() if v is not None})
    again.load_text(idx.unpersisted_text())
    assert again.collect(0, 100) == idx.collect(0, 100)
    again.drop_before(11)
    assert again.collect(0, 100) == [(3, 20)]


def test_marker_batches_round_trip() -> None:
    from kafka_wire.records import build_end_txn_marker

    b = RecordBatch(build_end_txn_marker(77, 4, False, 12))
    h = b.validate(from_client=False)
    assert (h[9], h[10], h[11], h[12]) == (77, 4, -1, 1)
    assert b.is_control and b.is_transactional
    m = read_end_txn_marker(b)
    assert m is not None and (m.commit, m.coordinator_epoch) == (False, 12)
