"""The transaction coordinator's state machine over an in-memory shard log: Kafka 4.4's error
codes for InitProducerId, AddPartitionsToTxn, EndTxn (versions 1 and 2), markers before
COMPLETE_*, timeouts, expiry, and a takeover that finishes what was prepared."""

from __future__ import annotations

import asyncio
import itertools

from coordinator.txn.config import TxnConfig
from coordinator.txn.coordinator import TxnCoordinator, TxnMarkers
from coordinator.txn.records import decode_key, decode_value
from coordinator.txn.state import TopicPartition, TxnState
from kafka_wire.errors import ErrorCode
from kafka_wire.records import iter_batches
from tests.coordinator.shard_logs import MemoryShardLog

E = ErrorCode
TP = ("t", 0)


class Markers:
    """A MarkerSender that records every attempt; partitions in `failing` answer NOT_LEADER."""

    def __init__(self) -> None:
        self.sent: list[TxnMarkers] = []
        self.failing: set[TopicPartition] = set()
        self.written = asyncio.Event()
        self.refused = asyncio.Event()

    async def __call__(self, m: TxnMarkers) -> dict[TopicPartition, int]:
        self.sent.append(m)
        if self.failing:
            self.refused.set()
        out = {tp: int(E.NOT_LEADER_OR_FOLLOWER) if tp in self.failing else int(E.NONE) for tp in m.partitions}
        if not self.failing:
            self.written.set()
        return out


def stored_states(log: MemoryShardLog) -> list[tuple[str, str]]:
    out = []
    for b in log.batches:
        for batch in iter_batches(b):
            for r in batch.records():
                assert r.key is not None
                tid = decode_key(r.key)
                out.append((tid, "tombstone" if r.value is None else decode_value(tid, r.value).state.state_name))
    return out


async def coordinator(log: MemoryShardLog | None = None, markers: Markers | None = None,
                      config: TxnConfig | None = None) -> tuple[TxnCoordinator, MemoryShardLog, Markers]:
    log = log or MemoryShardLog()
    markers = markers or Markers()
    ids = itertools.count(1000)

    async def next_id() -> int:
        return next(ids)

    c = TxnCoordinator(0, log, config or TxnConfig(marker_retry_backoff_ms=1), coordinator_epoch=3,
                       producer_ids=next_id, send_markers=markers)
    await c.load()
    return c, log, markers


async def completed(c: TxnCoordinator, tid: str) -> TxnState:
    """Wait for the transaction's completion task (markers, then COMPLETE_*)."""
    task = c._completions.get(tid)
    if task is not None:
        await task
    return c.txns[tid].state


async def test_init_bumps_epoch_and_fences_on_reinit() -> None:
    c, log, _ = await coordinator()
    r1 = await c.init_producer_id("a", 60000)
    assert (r1.error, r1.producer_id, r1.producer_epoch) == (E.NONE, 1000, 0)
    r2 = await c.init_producer_id("a", 60000)
    assert (r2.error, r2.producer_id, r2.producer_epoch) == (E.NONE, 1000, 1)
    # the first producer's epoch is stale now
    assert await c.add_partitions("a", 1000, 0, {TP}) == E.PRODUCER_FENCED
    assert (await c.end_txn("a", 1000, 0, True)).error == E.PRODUCER_FENCED
    assert stored_states(log) == [("a", "Empty"), ("a", "Empty")]


async def test_init_validation() -> None:
    c, _, _ = await coordinator(config=TxnConfig(max_timeout_ms=1000))
    assert (await c.init_producer_id("", 100)).error == E.INVALID_REQUEST
    assert (await c.init_producer_id("a", 1001)).error == E.INVALID_TRANSACTION_TIMEOUT
    assert (await c.init_producer_id("a", 0)).error == E.INVALID_TRANSACTION_TIMEOUT


async def test_kip360_recovery_with_expected_epoch() -> None:
    c, _, _ = await coordinator()
    r = await c.init_producer_id("a", 60000)
    bumped = await c.init_producer_id("a", 60000, r.producer_id, r.producer_epoch)
    assert (bumped.error, bumped.producer_epoch) == (E.NONE, 1)
    # a retry of that bump (the answer was lost) gets the same epoch again
    retry = await c.init_producer_id("a", 60000, r.producer_id, r.producer_epoch)
    assert (retry.error, retry.producer_epoch) == (E.NONE, 1)
    assert (await c.init_producer_id("a", 60000, 999, 0)).error == E.PRODUCER_FENCED


async def test_commit_writes_markers_then_complete() -> None:
    c, log, markers = await coordinator()
    r = await c.init_producer_id("a", 60000)
    assert await c.add_partitions("a", r.producer_id, 0, {TP, ("t", 1)}) == E.NONE
    assert await c.add_partitions("a", r.producer_id, 0, {TP}) == E.NONE  # already in: no write
    assert c.verify_partitions("a", r.producer_id, 0, {TP, ("u", 0)}) == {TP: E.NONE, ("u", 0): E.TRANSACTION_ABORTABLE}
    end = await c.end_txn("a", r.producer_id, 0, True)
    assert (end.error, end.producer_epoch) == (E.NONE, 0)
    assert await completed(c, "a") is TxnState.COMPLETE_COMMIT
    (m,) = markers.sent
    assert (m.commit, m.producer_epoch, m.coordinator_epoch, m.partitions) == (True, 0, 3, (TP, ("t", 1)))
    assert stored_states(log) == [("a", "Empty"), ("a", "Ongoing"), ("a", "PrepareCommit"), ("a", "CompleteCommit")]
    # a retry of the commit succeeds, an abort now is a misuse
    assert (await c.end_txn("a", r.producer_id, 0, True)).error == E.NONE
    assert (await c.end_txn("a", r.producer_id, 0, False)).error == E.INVALID_TXN_STATE
    d = c.describe("a")
    assert (d.error, d.state, d.partitions) == (E.NONE, "CompleteCommit", [])


async def test_end_txn_misuse_tv1() -> None:
    c, _, _ = await coordinator()
    assert (await c.end_txn("nope", 1, 0, True)).error == E.INVALID_PRODUCER_ID_MAPPING
    r = await c.init_producer_id("a", 60000)
    assert (await c.end_txn("a", r.producer_id, 0, True)).error == E.INVALID_TXN_STATE  # nothing open
    assert (await c.end_txn("a", r.producer_id + 1, 0, True)).error == E.INVALID_PRODUCER_ID_MAPPING
    assert await c.add_partitions("nope", 1, 0, {TP}) == E.INVALID_PRODUCER_ID_MAPPING


async def test_tv2_bumps_epoch_per_end_and_aborts_empty() -> None:
    c, _, markers = await coordinator()
    r = await c.init_producer_id("a", 60000)
    assert await c.add_partitions("a", r.producer_id, 0, {TP}, client_version=2) == E.NONE
    end = await c.end_txn("a", r.producer_id, 0, False, tv2=True)
    assert (end.error, end.producer_epoch) == (E.NONE, 1)
    assert await completed(c, "a") is TxnState.COMPLETE_ABORT
    assert markers.sent[0].producer_epoch == 1 and markers.sent[0].transaction_version == 2
    # the retry with the old epoch is answered with the new one
    retry = await c.end_txn("a", r.producer_id, 0, False, tv2=True)
    assert (retry.error, retry.producer_epoch) == (E.NONE, 1)
    # TV2 may abort with nothing open (epoch bump), not commit
    assert (await c.end_txn("a", r.producer_id, 1, True, tv2=True)).error == E.INVALID_TXN_STATE
    empty = await c.end_txn("a", r.producer_id, 1, False, tv2=True)
    assert (empty.error, empty.producer_epoch) == (E.NONE, 2)
    assert await completed(c, "a") is TxnState.COMPLETE_ABORT
    assert len(markers.sent) == 1  # an empty transaction needs no marker


async def test_init_while_ongoing_aborts_with_fenced_epoch() -> None:
    c, _, markers = await coordinator()
    r = await c.init_producer_id("a", 60000)
    await c.add_partitions("a", r.producer_id, 0, {TP})
    assert (await c.init_producer_id("a", 60000)).error == E.CONCURRENT_TRANSACTIONS
    assert await completed(c, "a") is TxnState.COMPLETE_ABORT
    assert markers.sent[0].producer_epoch == 1 and not markers.sent[0].commit
    again = await c.init_producer_id("a", 60000)
    assert (again.error, again.producer_epoch) == (E.NONE, 2)


async def test_prepared_answers_concurrent_until_markers_land() -> None:
    markers = Markers()
    markers.failing = {TP}
    c, log, _ = await coordinator(markers=markers)
    r = await c.init_producer_id("a", 60000)
    await c.add_partitions("a", r.producer_id, 0, {TP})
    assert (await c.end_txn("a", r.producer_id, 0, True)).error == E.NONE
    assert (await c.end_txn("a", r.producer_id, 0, True)).error == E.CONCURRENT_TRANSACTIONS
    assert (await c.init_producer_id("a", 60000)).error == E.CONCURRENT_TRANSACTIONS
    assert c.verify_partitions("a", r.producer_id, 0, {TP}) == {TP: E.CONCURRENT_TRANSACTIONS}
    # the next transaction's first add waits for the completion instead of failing
    next_add = asyncio.ensure_future(c.add_partitions("a", r.producer_id, 0, {("t", 1)}))
    await markers.refused.wait()
    assert not next_add.done()
    markers.failing.clear()  # the partition found its new owner
    await markers.written.wait()
    assert await next_add == E.NONE
    assert len(markers.sent) >= 2
    assert stored_states(log)[-2:] == [("a", "CompleteCommit"), ("a", "Ongoing")]
    assert c.txns["a"].partitions == {("t", 1)}


async def test_takeover_finishes_prepared_transactions() -> None:
    markers = Markers()
    markers.failing = {TP}
    c, log, _ = await coordinator(markers=markers)
    r = await c.init_producer_id("a", 60000)
    await c.add_partitions("a", r.producer_id, 0, {TP})
    await c.end_txn("a", r.producer_id, 0, False)
    await markers.refused.wait()
    c.unload()  # the owner dies before the marker was written
    markers2 = Markers()
    c2, _, _ = await coordinator(log, markers2)
    assert await completed(c2, "a") is TxnState.COMPLETE_ABORT
    assert [(m.commit, m.partitions) for m in markers2.sent] == [(False, (TP,))]
    assert c2.txns["a"].producer_id == r.producer_id


async def test_timed_out_transaction_is_aborted_and_producer_fenced() -> None:
    c, _, markers = await coordinator()
    r = await c.init_producer_id("a", 1000)
    await c.add_partitions("a", r.producer_id, 0, {TP})
    start = c.txns["a"].start_ms
    assert await c.abort_timed_out(start + 1000) == 0
    assert await c.abort_timed_out(start + 1001) == 1
    assert await completed(c, "a") is TxnState.COMPLETE_ABORT
    assert markers.sent[0].producer_epoch == 1
    assert (await c.end_txn("a", r.producer_id, 0, True)).error == E.PRODUCER_FENCED


async def test_expired_ids_are_tombstoned() -> None:
    c, log, _ = await coordinator(config=TxnConfig(id_expiration_ms=10))
    r = await c.init_producer_id("a", 1000)
    last = c.txns["a"].last_update_ms
    assert await c.expire_transactional_ids(last + 9) == 0
    assert await c.expire_transactional_ids(last + 10) == 1
    assert "a" not in c.txns and stored_states(log)[-1] == ("a", "tombstone")
    assert c.describe("a").error == E.TRANSACTIONAL_ID_NOT_FOUND
    c2, _, _ = await coordinator(log)
    assert "a" not in c2.txns
    # a new producer under that id starts over (a fresh producer id at epoch 0)
    again = await c2.init_producer_id("a", 1000)
    assert (again.error, again.producer_epoch) == (E.NONE, 0) and r.producer_epoch == 0


class GatedLog(MemoryShardLog):
    """Appends wait for `gate` (a write the log has not acknowledged yet)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gate.set()
        self.blocked = asyncio.Event()

    async def append(self, batch: bytes) -> int:
        if not self.gate.is_set():
            self.blocked.set()
        await self.gate.wait()
        return await super().append(batch)


async def test_concurrent_adds_are_written_together() -> None:
    log = GatedLog()
    c, _, _ = await coordinator(log)
    r = await c.init_producer_id("a", 60000)
    log.gate.clear()
    adds = [asyncio.ensure_future(c.add_partitions("a", r.producer_id, 0, {("t", i)}, client_version=2))
            for i in range(4)]
    await log.blocked.wait()  # the first add is being written; the others, scheduled before us, wait for it
    assert c._queued_adds["a"] == {("t", 1), ("t", 2), ("t", 3)}
    log.gate.set()
    assert await asyncio.gather(*adds) == [E.NONE] * 4
    assert c.txns["a"].partitions == {("t", i) for i in range(4)}
    assert stored_states(log) == [("a", "Empty"), ("a", "Ongoing"), ("a", "Ongoing")]  # the first, then the rest


async def test_list_filters() -> None:
    c, _, _ = await coordinator()
    for tid in ("app-1", "app-2", "other"):
        await c.init_producer_id(tid, 60000)
    pid = c.txns["app-2"].producer_id
    await c.add_partitions("app-2", pid, 0, {TP})
    assert {t for t, _, _ in c.list_transactions(set(), set())} == {"app-1", "app-2", "other"}
    assert c.list_transactions({"Ongoing"}, set()) == [("app-2", pid, "Ongoing")]
    assert [t for t, _, _ in c.list_transactions(set(), {pid})] == ["app-2"]
    assert {t for t, _, _ in c.list_transactions(set(), set(), pattern="app-.*")} == {"app-1", "app-2"}
    start = c.txns["app-2"].start_ms
    assert c.list_transactions(set(), set(), duration_ms=5000, now=start + 4999) == []
    assert [t for t, _, _ in c.list_transactions(set(), set(), duration_ms=5000, now=start + 5000)] == ["app-2"]


async def test_partition_owner_add_asks_again_after_the_completion() -> None:
    markers = Markers()
    markers.failing = {TP}
    c, log, _ = await coordinator(markers=markers)
    r = await c.init_producer_id("a", 60000)
    await c.add_partitions("a", r.producer_id, 0, {TP}, client_version=2)
    end = await c.end_txn("a", r.producer_id, 0, True, tv2=True)
    # the next transaction's first produce (epoch 1): its verification waits for the markers,
    # then is told to ask again (a marker landed on the partition meanwhile)
    add = asyncio.ensure_future(c.add_partitions("a", r.producer_id, end.producer_epoch, {("t", 1)},
                                                 client_version=2, retry_after_completion=True))
    await markers.refused.wait()
    markers.failing.clear()
    assert await add == E.CONCURRENT_TRANSACTIONS
    # the add waiting was written with the completion: COMPLETE_COMMIT then ONGOING, one log entry
    txn = c.txns["a"]
    assert (txn.state, txn.partitions, txn.producer_epoch) == (TxnState.ONGOING, {("t", 1)}, end.producer_epoch)
    assert stored_states(log)[-2:] == [("a", "CompleteCommit"), ("a", "Ongoing")]
    assert sum(1 for b in iter_batches(log.batches[-1]) for _ in b.records()) == 2
    entries = len(log.batches)
    assert await c.add_partitions("a", r.producer_id, end.producer_epoch, {("t", 1)}, client_version=2,
                                  retry_after_completion=True) == E.NONE
    assert len(log.batches) == entries  # already in the transaction: nothing written
    # a takeover replays both states of the entry
    c2, _, _ = await coordinator(log)
    assert (c2.txns["a"].state, c2.txns["a"].partitions) == (TxnState.ONGOING, {("t", 1)})


async def test_tv2_end_rotates_the_producer_id_when_the_epoch_is_exhausted() -> None:
    """Kafka 4.4 (KIP-890): the end that would bump past Short.MAX_VALUE - 1 allocates the next
    producer id; its markers carry the old id at Short.MAX_VALUE; the answer (and COMPLETE_*,
    in the log) is the new id at epoch 0; a retry under the old id gets the new one, after a
    takeover too; a takeover before the markers finishes the rotation."""
    max_epoch = (1 << 15) - 1
    markers = Markers()
    markers.failing = {TP}
    c, log, _ = await coordinator(markers=markers)
    r = await c.init_producer_id("a", 60000)
    c.txns["a"].producer_epoch = max_epoch - 2  # as after 32,764 transactions
    assert await c.add_partitions("a", r.producer_id, max_epoch - 2, {TP}, client_version=2) == E.NONE
    markers.failing.clear()
    end = await c.end_txn("a", r.producer_id, max_epoch - 2, True, tv2=True)
    assert (end.error, end.producer_id, end.producer_epoch) == (E.NONE, r.producer_id, max_epoch - 1)
    assert await completed(c, "a") is TxnState.COMPLETE_COMMIT
    # the last epoch: this end rotates
    markers.failing = {TP}
    assert await c.add_partitions("a", r.producer_id, max_epoch - 1, {TP}, client_version=2) == E.NONE
    end = await c.end_txn("a", r.producer_id, max_epoch - 1, False, tv2=True)
    new_pid = end.producer_id
    assert (end.error, end.producer_epoch) == (E.NONE, 0) and new_pid != r.producer_id
    prepared = c.txns["a"]
    assert (prepared.state, prepared.producer_id, prepared.producer_epoch, prepared.next_producer_id) == (
        TxnState.PREPARE_ABORT, r.producer_id, max_epoch, new_pid)
    # the new id before the markers: verification asks again, an add waits for the completion
    assert c.verify_partitions("a", new_pid, 0, {TP}) == {TP: E.CONCURRENT_TRANSACTIONS}
    await markers.refused.wait()
    add = asyncio.ensure_future(c.add_partitions("a", new_pid, 0, {("t", 1)}, client_version=2))
    # a takeover now (markers not written) finishes the rotation from the log
    c.unload()
    assert await add == E.NOT_COORDINATOR
    markers2 = Markers()
    c2, _, _ = await coordinator(log, markers2)
    assert await completed(c2, "a") is TxnState.COMPLETE_ABORT
    assert [(m.producer_id, m.producer_epoch, m.commit) for m in markers2.sent] == [(r.producer_id, max_epoch, False)]
    done = c2.txns["a"]
    assert (done.producer_id, done.producer_epoch, done.previous_producer_id, done.next_producer_id) == (
        new_pid, 0, r.producer_id, -1)
    # a retry of the rotating end (its answer lost), on the coordinator that took over
    retry = await c2.end_txn("a", r.producer_id, max_epoch - 1, False, tv2=True)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, new_pid, 0)
    assert (await c2.end_txn("a", r.producer_id, max_epoch - 1, True, tv2=True)).error == E.INVALID_TXN_STATE
    # the producer goes on under the new id
    assert await c2.add_partitions("a", new_pid, 0, {TP}, client_version=2) == E.NONE
    assert await c2.add_partitions("a", r.producer_id, max_epoch - 1, {TP}, client_version=2) == (
        E.INVALID_PRODUCER_ID_MAPPING)
    nxt = await c2.end_txn("a", new_pid, 0, True, tv2=True)
    assert (nxt.error, nxt.producer_id, nxt.producer_epoch) == (E.NONE, new_pid, 1)
    assert await completed(c2, "a") is TxnState.COMPLETE_COMMIT
    assert markers2.sent[-1].producer_id == new_pid
    # the log reads like Kafka's: PrepareAbort names the next id, CompleteAbort the new one
    values = [decode_value("a", rec.value) for b in log.batches for batch in iter_batches(b)
              for rec in batch.records() if rec.value is not None]
    rotated = [(v.state.state_name, v.producer_id, v.previous_producer_id, v.next_producer_id, v.producer_epoch)
               for v in values if v.next_producer_id == new_pid or v.previous_producer_id != v.producer_id]
    assert rotated == [("PrepareAbort", r.producer_id, r.producer_id, new_pid, max_epoch),
                       ("CompleteAbort", new_pid, r.producer_id, -1, 0)]


async def test_add_with_the_rotated_id_waits_for_the_completion() -> None:
    markers = Markers()
    markers.failing = {TP}
    c, _, _ = await coordinator(markers=markers)
    r = await c.init_producer_id("a", 60000)
    c.txns["a"].producer_epoch = (1 << 15) - 2
    await c.add_partitions("a", r.producer_id, (1 << 15) - 2, {TP}, client_version=2)
    end = await c.end_txn("a", r.producer_id, (1 << 15) - 2, True, tv2=True)
    assert end.producer_epoch == 0
    add = asyncio.ensure_future(c.add_partitions("a", end.producer_id, 0, {("t", 1)}, client_version=2))
    await markers.refused.wait()
    assert not add.done()
    markers.failing.clear()
    assert await add == E.NONE
    t = c.txns["a"]
    assert (t.state, t.producer_id, t.producer_epoch, t.partitions) == (TxnState.ONGOING, end.producer_id, 0, {("t", 1)})


async def test_timed_out_tv2_transaction_at_the_exhausted_epoch_rotates() -> None:
    """KAFKA-20090: the coordinator's abort of a transaction version 2 transaction at the last
    epoch writes its markers at Short.MAX_VALUE and completes under the next producer id."""
    c, _, markers = await coordinator()
    r = await c.init_producer_id("a", 1000)
    c.txns["a"].producer_epoch = (1 << 15) - 2
    await c.add_partitions("a", r.producer_id, (1 << 15) - 2, {TP}, client_version=2)
    assert await c.abort_timed_out(c.txns["a"].start_ms + 1001) == 1
    assert await completed(c, "a") is TxnState.COMPLETE_ABORT
    assert [(m.producer_id, m.producer_epoch) for m in markers.sent] == [(r.producer_id, (1 << 15) - 1)]
    t = c.txns["a"]
    assert (t.producer_id, t.producer_epoch) == (r.producer_id + 1, 0)
    # the zombie's commit under the old id is refused (Kafka 4.4 takes it for a retry of the
    # abort: not the aborted transaction's result)
    assert (await c.end_txn("a", r.producer_id, (1 << 15) - 2, True, tv2=True)).error == E.INVALID_TXN_STATE
    assert await c.add_partitions("a", r.producer_id, (1 << 15) - 2, {TP}, client_version=2) == (
        E.INVALID_PRODUCER_ID_MAPPING)
