"""A Kafka partition over a segmented log (DESIGN.md "Offsets").

Each produced batch gets the partition's next offset and the leader epoch patched in place
and is appended as one log entry; offsets are dense. Appends are sequenced synchronously (no
await between the offset assignment and ManagedLog.append), so the event loop is the partition
lock. The high watermark moves when the ack quorum confirms an entry, in order.

State kept in the log's metadata (one node, compare-and-set by the owner):
- ledger properties: each finished ledger's offset/timestamp index (kafka_log/index.py);
- log properties: leader epoch and its history, the DeleteRecords log start offset, a
  producer-state snapshot (open transactions included) with the aborted transactions of
  ledgers not finished yet, and a next-offset checkpoint;
- transactions: a transactional batch opens its producer's transaction, a COMMIT/ABORT marker
  (append_marker, from the transaction coordinator) closes it once durable; the last stable
  offset is the first offset of the oldest open one (else the HW); aborts go to the
  aborted-transactions index (kafka_log/txn.py) persisted with each ledger's offset index.
The producer state used to check appends moves at append time; a second copy moves only as
appends become durable, so snapshots never hold a transaction state no durable entry backs.
Opening (an owner change) rebuilds what the previous owner did not persist by reading only the
entries no index covers (normally the recovered tail ledger), then bumps the leader epoch.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from gateway.errors import KafkaApiError
from gateway.partition.config import fallback_replication, log_config_for
from gateway.partition.epochs import EpochHistory
from gateway.partition.log_fetch import PartitionFetch
from gateway.partition.producers import BatchMeta, CompletedTxn, ProducerStateError, ProducerStates
from gateway.partition.record_checks import check_keys, check_timestamps
from gateway.partition.recovery import rebuild
from gateway.paths import partition_log_name
from kafka_log.index import LedgerIndex
from kafka_log.keys import L_EPOCH, L_EPOCHS, L_NEXT, L_PRODUCERS, L_START
from kafka_log.txn import L_ABORTED, AbortedTxn
from kafka_log.view import KafkaLogView
from kafka_wire.errors import ErrorCode
from kafka_wire.records import InvalidBatch, RecordBatch, build_end_txn_marker, validate_produce_records
from kafka_wire.records.batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, iter_batches
from store.clock import SYSTEM_CLOCK, Clock
from store.managed.cache import EntryCache
from store.managed.errors import ManagedLogError
from store.managed.log import ManagedLog, OffloaderLike
from store.managed.metadata import LogMetadata
from store.managed.names import log_path
from store.managed.position import Position
from store.meta.api import MetaStore, NoNodeError
from store.tasks import retrieve_outcome

if TYPE_CHECKING:
    from gateway.topics.registry import TopicInfo
    from store.managed.ledgers import LedgerClientLike

log = logging.getLogger(__name__)


__all__ = ["AppendResult", "PartitionLog"]
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # Kafka's producer.id.expiration.ms


def _not_leader(msg: str) -> KafkaApiError:
    return KafkaApiError(int(ErrorCode.NOT_LEADER_OR_FOLLOWER), msg)


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class AppendResult:
    base_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int


@dataclass(frozen=True)
class ProducerInfo:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int = -1
    current_txn_start_offset: int = -1


# What an append does to the producer state, replayed on the durable copy once it is confirmed:
# (producer id, epoch, batch, transactional) for data, (producer id, epoch, coordinator epoch,
# commit, the transaction it closed) for a marker.
class _DataOp(NamedTuple):
    producer_id: int
    epoch: int
    batch: BatchMeta
    transactional: bool


class _MarkerOp(NamedTuple):
    producer_id: int
    epoch: int
    coordinator_epoch: int
    commit: bool
    closed: CompletedTxn | None


class Compactor(Protocol):
    """What a partition log tells the gateway's log cleaner (LogCleaner), which compacts it:
    named here so that the cleaner, which works on partition logs, is not named back."""

    def attach(self, plog: PartitionLog) -> None: ...
    def detach(self, plog: PartitionLog) -> None: ...
    def schedule(self, plog: PartitionLog) -> None:
        """One of the log's ledgers closed: look at it soon."""


class PartitionLog(PartitionFetch):
    """One owned Kafka partition. Create with `await PartitionLog.open(...)`."""

    def __init__(self, ml: ManagedLog, topic: TopicInfo, partition: int) -> None:
        self.ml = ml
        self.topic = topic
        self.partition = partition
        self.leader_epoch = 0
        self.epochs = EpochHistory()
        self.producers = ProducerStates()
        self._durable = ProducerStates()  # the producer state of confirmed entries (snapshots)
        self.view = KafkaLogView(ml)  # offsets <-> positions
        self._next = 0  # next offset to assign
        self._hw = 0  # offset after the last confirmed entry
        self._log_start = 0  # DeleteRecords low watermark (the index may start earlier)
        self._pending: dict[int, asyncio.Future[AppendResult]] = {}  # base offset -> append
        self._waiters: set[asyncio.Future[None]] = set()
        self._lost_listeners: list[Callable[[], None]] = []
        self._persist_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self._lost = False
        self.cleaner: Compactor | None = None  # compacts the log if the topic says so
        ml.add_ownership_listener(self._on_ml_lost)

    # ---- opening ------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        meta: MetaStore,
        ledgers: LedgerClientLike,
        topic: TopicInfo,
        partition: int,
        *,
        cache: EntryCache | None = None,
        replication: tuple[int, int, int] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        offloader: OffloaderLike | None = None,
        cleaner: Compactor | None = None,
    ) -> PartitionLog:
        """Take ownership of the partition's segmented log: recover its tail, rebuild the
        indexes and producer state the previous owner did not persist, bump the leader epoch.
        `replication` = (E, WQ, AQ) for new ledgers (default: as stored, else LogConfig's)."""
        name = partition_log_name(topic.topic_id, partition)
        stored = None
        with contextlib.suppress(NoNodeError):
            data, _ = await meta.get(log_path(name))
            stored = LogMetadata.from_bytes(data).config
        if replication is None and stored is None:
            replication = await fallback_replication(meta)
        cfg = log_config_for(topic, replication=replication, stored=stored)
        holder: list[PartitionLog] = []

        def on_new_ledger() -> dict[str, str]:
            if holder:
                holder[0]._on_roll()
            return {}

        ml = await ManagedLog.open(
            meta, ledgers, name, config=cfg, cache=cache, new_ledger_props=on_new_ledger, clock=clock,
            offloader=offloader,
        )
        self = cls(ml, topic, partition)
        holder.append(self)
        try:
            await self._recover()
        except BaseException:
            with contextlib.suppress(Exception):
                await ml.close()
            raise
        if cleaner is not None:
            self.cleaner = cleaner
            cleaner.attach(self)
        return self

    async def _recover(self) -> None:
        ml = self.ml
        props = ml.properties
        state = await rebuild(ml, f"{self.topic.name}-{self.partition}")
        self.view.index, self.producers = state.index, state.producers
        self.view.aborted = state.aborted
        self._durable = state.producers.copy()
        nxt = state.next_offset
        self._next = self._hw = nxt
        self._log_start = int(props.get(L_START, "0"))
        for idx in state.rebuilt:
            idx.compact()
            await ml.set_ledger_properties(idx.ledger_id, {**idx.to_props(), **state.aborted.ledger_props(idx.ledger_id)})
            state.aborted.mark_persisted(idx.ledger_id)
        self.epochs = EpochHistory.from_text(props.get(L_EPOCHS))
        self.leader_epoch = max(int(props.get(L_EPOCH, "-1")), self.epochs.latest) + 1
        self.epochs.assign(self.leader_epoch, nxt)
        await ml.set_properties(
            {
                L_EPOCH: str(self.leader_epoch),
                L_EPOCHS: self.epochs.to_text(),
                L_NEXT: str(nxt),
                L_PRODUCERS: self.producers.snapshot(nxt),
                L_ABORTED: state.aborted.unpersisted_text() or None,
            }
        )

    # ---- state ---------------------------------------------------------------------------

    @property
    def lost(self) -> bool:
        return self._lost

    @property
    def serving(self) -> bool:
        return not (self._lost or self._closing or not self.ml.active)

    def update_topic(self, topic: TopicInfo) -> None:
        """Apply changed topic configs (segment.*, retention.*, min.insync.replicas) to the log."""
        if topic is self.topic or topic == self.topic:
            return
        self.topic = topic
        cur = self.ml.config
        self.ml.config = log_config_for(
            topic, replication=(cur.ensemble_size, cur.write_quorum, cur.ack_quorum), stored=cur
        )

    def add_lost_listener(self, cb: Callable[[], None]) -> None:
        """`cb()` is called once when this handle stops serving: ownership lost (another
        gateway fenced it) or a write failure. Reopen the partition to continue."""
        self._lost_listeners.append(cb)

    def _on_ml_lost(self, exc: ManagedLogError) -> None:
        if self._lost:
            return
        self._lost = True
        log.warning("partition %s-%d lost: %s", self.topic.name, self.partition, exc)
        self._wake()
        for cb in self._lost_listeners:
            try:
                cb()
            except Exception:
                log.exception("lost listener failed")

    def _check_serving(self) -> None:
        # Any write failure ends serving at once, not only a fence: while the log checks
        # whether it was taken over (ZooKeeper may be unreachable for seconds), an append
        # here would advance the producer state past offsets that are never written.
        if self._lost or self._closing or not self.ml.active:
            raise _not_leader(f"partition {self.topic.name}-{self.partition} is not served here any more")

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Kafka's check of a request's current_leader_epoch (-1: not given)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaApiError(int(ErrorCode.FENCED_LEADER_EPOCH), "the request's leader epoch is older")
        raise KafkaApiError(int(ErrorCode.UNKNOWN_LEADER_EPOCH), "the request's leader epoch is newer")

    # ---- produce -------------------------------------------------------------------------

    def append(
        self,
        records: memoryview | bytearray | None,
        *,
        api_version: int,
        max_message_bytes: int,
        log_append_time: bool,
        timestamp_before_max_ms: int | None = None,
        timestamp_after_max_ms: int | None = None,
        from_coordinator: bool = False,
        verification_guard: int | None = None,
        compacted: bool = False,
    ) -> asyncio.Future[AppendResult]:
        """Validate, sequence and append one partition's produce data (patched in place, so
        `records` must be writable). The future resolves once the ack quorum has the batch;
        KafkaApiError (raised here or set on the future) carries the partition's error.
        `from_coordinator`: a coordinator's own batch (Kafka's AppendOrigin.COORDINATOR): a
        producer id without sequence numbers is allowed, only its epoch is checked.
        `verification_guard`: the producer's verification_guard when the coordinator confirmed
        its transaction; a marker since then refuses a batch that would open one."""
        self._check_serving()
        try:
            if from_coordinator:
                batch = RecordBatch(records if records is not None else b"", 0)
                batch.validate(from_client=False)
            else:
                batch = validate_produce_records(records, api_version)
        except InvalidBatch as e:
            raise KafkaApiError(int(e.error_code), str(e)) from None
        h = batch.header()
        size = batch.size
        if size > max_message_bytes:
            raise KafkaApiError(
                int(ErrorCode.MESSAGE_TOO_LARGE),
                f"the batch is {size} bytes, more than max.message.bytes {max_message_bytes}",
            )
        if not log_append_time and (timestamp_before_max_ms is not None or timestamp_after_max_ms is not None):
            check_timestamps(batch, _now_ms(), timestamp_before_max_ms, timestamp_after_max_ms)
        if compacted:
            check_keys(batch, f"{self.topic.name}-{self.partition}")
        lod, pid, pepoch, first_seq = h[6], h[9], h[10], h[11]
        transactional = bool(h[5] & ATTR_TRANSACTIONAL)
        loop = asyncio.get_running_loop()
        last_seq = -1
        if pid >= 0 and from_coordinator:
            cur = self.producers.producers.get(pid)
            if cur is not None and pepoch < cur.epoch:
                raise KafkaApiError(int(ErrorCode.INVALID_PRODUCER_EPOCH),
                                    f"epoch {pepoch} of producer {pid} is older than {cur.epoch}")
            # a coordinator's batch has no sequence: only its epoch is checked
        elif pid >= 0:
            last_seq = (first_seq + lod) % (1 << 31)
            try:
                dup = self.producers.check(pid, pepoch, first_seq, last_seq, transactional)
            except ProducerStateError as e:
                raise KafkaApiError(int(e.error_code), str(e)) from None
            if dup is not None:
                return self._duplicate(dup)
            if (verification_guard is not None and transactional and not self.producers.in_transaction(pid)
                    and self.producers.verification_guard(pid) != verification_guard):
                raise KafkaApiError(int(ErrorCode.INVALID_TXN_STATE),
                                    f"the transaction of producer {pid} ended while the partition was verified")
        elif transactional:
            raise KafkaApiError(int(ErrorCode.INVALID_RECORD), "a transactional batch needs a producer id")
        base = self._next
        batch.set_base_offset(base)
        batch.set_partition_leader_epoch(self.leader_epoch)
        append_time = -1
        max_ts = h[8]
        if log_append_time:
            append_time = max_ts = _now_ms()
            batch.set_log_append_time(append_time)
        nxt = base + lod + 1
        self._next = nxt
        op: _DataOp | None = None
        if pid >= 0:
            meta = BatchMeta(first_seq, last_seq, base, nxt - 1, max_ts)
            self.producers.update(pid, pepoch, meta, _now_ms(), transactional)
            op = _DataOp(pid, pepoch, meta, transactional)
        out: asyncio.Future[AppendResult] = loop.create_future()
        self._pending[base] = out
        # A view of the request: the batch bytes go down to the bookies' writelines uncopied.
        fut = self.ml.append(batch.memoryview())
        fut.add_done_callback(functools.partial(self._on_confirmed, base, nxt, max_ts, append_time, out, op))
        return out

    def append_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, transaction_version: int = 1
    ) -> asyncio.Future[AppendResult]:
        """Append a COMMIT/ABORT control batch for the producer (WriteTxnMarkers), closing its
        open transaction; the future resolves once the marker is durable. KafkaApiError with
        INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED for a stale marker."""
        self._check_serving()
        try:
            self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch, transaction_version)
        except ProducerStateError as e:
            raise KafkaApiError(int(e.error_code), str(e)) from None
        now = _now_ms()
        data = build_end_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch, timestamp=now)
        batch = RecordBatch(data)
        base = self._next
        batch.set_base_offset(base)
        batch.set_partition_leader_epoch(self.leader_epoch)
        self._next = base + 1
        done = self.producers.apply_marker(producer_id, producer_epoch, coordinator_epoch, commit, base, now)
        op = _MarkerOp(producer_id, producer_epoch, coordinator_epoch, commit, done)
        out: asyncio.Future[AppendResult] = asyncio.get_running_loop().create_future()
        self._pending[base] = out
        fut = self.ml.append(memoryview(data))
        fut.add_done_callback(functools.partial(self._on_confirmed, base, base + 1, now, -1, out, op))
        return out

    def import_batches(self, records: memoryview | bytearray | None, *,
                       expected_end: int | None = None) -> asyncio.Future[AppendResult]:
        """Append batches copied from another cluster at their own offsets (gateway/imports.py):
        each batch is one entry keeping its base offset, timestamps and timestamp type; the
        offsets between batches stay gaps. Refused (OFFSET_OUT_OF_RANGE) below the current
        end, unless the log ends at `expected_end` (when given: the importer pipelines, so a
        refused import must not let the next land beyond its hole), and for transactional,
        control or idempotent batches (the importer clears producer identities: they would
        collide with this cluster's). Resolves with the last batch's base offset once the ack
        quorum has it (and so every one before it)."""
        self._check_serving()
        if expected_end is not None and expected_end != self._next:
            raise KafkaApiError(int(ErrorCode.OFFSET_OUT_OF_RANGE),
                                f"import expected the log to end at {expected_end}, it ends at {self._next}")
        if not records:
            raise KafkaApiError(int(ErrorCode.INVALID_RECORD), "an import needs at least one record batch")
        try:
            batches = [(b, b.validate(from_client=False)) for b in iter_batches(records)]
        except InvalidBatch as e:
            raise KafkaApiError(int(e.error_code), str(e)) from None
        nxt = self._next
        for _b, h in batches:
            if h[5] & (ATTR_TRANSACTIONAL | ATTR_CONTROL) or h[9] >= 0:
                raise KafkaApiError(int(ErrorCode.INVALID_RECORD),
                                    f"batch at offset {h[0]}: transactional, control and idempotent batches cannot be imported")
            if h[0] < nxt:
                raise KafkaApiError(int(ErrorCode.OFFSET_OUT_OF_RANGE),
                                    f"import at offset {h[0]} is below the log end offset {nxt}")
            nxt = h[0] + h[6] + 1
        loop = asyncio.get_running_loop()
        out: asyncio.Future[AppendResult] | None = None
        for b, h in batches:
            start, base, nxt = self._next, h[0], h[0] + h[6] + 1
            b.set_partition_leader_epoch(self.leader_epoch)
            self._next = nxt
            if out is not None:
                out.add_done_callback(retrieve_outcome)  # only the last batch's confirmation answers
            out = loop.create_future()
            self._pending[base] = out
            fut = self.ml.append(b.memoryview())
            fut.add_done_callback(functools.partial(self._on_confirmed, base, nxt, h[8], -1, out, None, start=start))
        assert out is not None
        return out

    def _duplicate(self, dup: BatchMeta) -> asyncio.Future[AppendResult]:
        """Kafka answers a resent batch with the original's offsets, once that is durable."""
        pending = self._pending.get(dup.first_offset)
        if pending is not None:
            return pending
        if dup.last_offset >= self._hw:
            # neither in flight nor confirmed: its append failed, its offsets hold nothing
            raise _not_leader(f"partition {self.topic.name}-{self.partition}: the original append failed")
        out: asyncio.Future[AppendResult] = asyncio.get_running_loop().create_future()
        out.set_result(AppendResult(dup.first_offset, -1, self.log_start_offset))
        return out

    def _on_confirmed(
        self,
        base: int,
        nxt: int,
        max_ts: int,
        append_time: int,
        out: asyncio.Future[AppendResult],
        op: _DataOp | _MarkerOp | None,
        f: asyncio.Future[Position],
        *,
        start: int | None = None,
    ) -> None:
        self._pending.pop(base, None)
        if f.cancelled() or f.exception() is not None:
            if not out.done():
                out.set_exception(_not_leader(f"append failed: {f.exception() if not f.cancelled() else 'cancelled'}"))
            return
        pos = f.result()
        finished = self.view.index.add(pos.ledger_id, pos.entry_id, base, nxt, max_ts, start=start)
        self._hw = nxt
        if op is not None:
            self._confirmed_op(op, pos.ledger_id, base)
        if finished is not None:
            self._spawn(self._persist(finished))
        if not out.done():
            out.set_result(AppendResult(base, append_time, self.log_start_offset))
        if self._waiters:
            self._wake()

    def _confirmed_op(self, op: _DataOp | _MarkerOp, ledger_id: int, base: int) -> None:
        durable = self._durable
        if isinstance(op, _DataOp):
            durable.update(op.producer_id, op.epoch, op.batch, _now_ms(), op.transactional)
            return
        d = durable.apply_marker(op.producer_id, op.epoch, op.coordinator_epoch, op.commit, base, _now_ms())
        if d is not None:
            durable.complete(d)
        done = op.closed
        if done is not None:
            self.producers.complete(done)
            if done.aborted:
                txn = AbortedTxn(op.producer_id, done.first_offset, base, self.last_stable_offset)
                self.view.aborted.add(ledger_id, txn)

    def _spawn(self, coro: object) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_roll(self) -> None:
        """A rollover started: once it is done, the previous ledger's index is final."""
        self._spawn(self._after_roll())

    async def _after_roll(self) -> None:
        with contextlib.suppress(Exception):
            await self.ml.flush()
        last = self.view.index.last
        if last is not None and last.dense and last.ledger_id != self.ml.current_ledger_id and not self._lost:
            last.compact()
            await self._persist(last)
        if self.cleaner is not None:
            self.cleaner.schedule(self)  # a closed ledger (with its index): maybe cleanable now

    async def _persist(self, idx: LedgerIndex | None) -> None:
        """Persist a finished ledger's index, then a producer snapshot up to the HW."""
        async with self._persist_lock:
            try:
                aborted = self.view.aborted
                # The snapshot is taken with the index: entries confirmed while the properties
                # are written stay after it, so a new owner replays them (markers included).
                hw = self._hw
                before = _now_ms() - PRODUCER_ID_EXPIRATION_MS
                self.producers.expire(before)
                self._durable.expire(before)
                snapshot = self._durable.snapshot(hw)
                if idx is not None:
                    written = aborted.ledger_props(idx.ledger_id)
                    await self.ml.set_ledger_properties(idx.ledger_id, {**idx.to_props(), **written})
                    # an abort marked in that ledger meanwhile must still travel in L_ABORTED
                    if aborted.ledger_props(idx.ledger_id) == written:
                        aborted.mark_persisted(idx.ledger_id)
                await self.ml.set_properties({
                    L_PRODUCERS: snapshot,
                    L_ABORTED: aborted.unpersisted_text() or None,
                    L_NEXT: str(hw),
                })
            except ManagedLogError as e:
                log.info("partition %s-%d: could not persist state: %r", self.topic.name, self.partition, e)
            except Exception:
                log.exception("partition %s-%d: could not persist state", self.topic.name, self.partition)

    # ---- waiting for data ----------------------------------------------------------------

    def add_waiter(self, fut: asyncio.Future[None]) -> None:
        """`fut` gets a result at the next confirmed append (or when the partition is lost)."""
        self._waiters.add(fut)

    def remove_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(fut)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for w in waiters:
            if not w.done():
                w.set_result(None)

    # ---- DeleteRecords ---------------------------------------------------------------------

    async def delete_records(self, offset: int) -> int:
        """Move the log start offset to `offset` (-1: the HW), deleting whole ledgers before
        it. Returns the new low watermark."""
        self._check_serving()
        if offset == -1:
            offset = self._hw
        if offset < 0 or offset > self._hw:
            raise KafkaApiError(
                int(ErrorCode.OFFSET_OUT_OF_RANGE),
                f"cannot delete records before {offset}: the high watermark is {self._hw}",
            )
        if offset <= self.log_start_offset:
            return self.log_start_offset
        if offset >= self._hw:
            pos = self.ml.next_position(self.ml.last_confirmed)
        else:
            pos = await self.position_of(offset)
        try:
            await self.ml.set_properties({L_START: str(offset)})
            self._log_start = offset
            await self.ml.truncate_before(pos)
        except ManagedLogError as e:
            raise _not_leader(str(e)) from None
        self.view.forget_positions()
        # as Kafka: producers with nothing left in the log are forgotten (not those in a transaction)
        for states in (self.producers, self._durable):
            gone = [p for p, e in states.producers.items()
                    if e.batches and e.batches[-1].last_offset < offset and e.txn_first_offset < 0]
            for pid in gone:
                del states.producers[pid]
        return self.log_start_offset

    # ---- producers ---------------------------------------------------------------------------

    def active_producers(self) -> list[ProducerInfo]:
        return [
            ProducerInfo(p.producer_id, p.epoch, p.last_seq, p.last_timestamp, p.coordinator_epoch, p.txn_first_offset)
            for p in self.producers.producers.values()
        ]

    # ---- closing ---------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop serving, settle appends, persist indexes and producer state, close the log
        cleanly so the next owner needs no recovery reads."""
        if self._closing:
            return
        self._closing = True
        self._wake()
        if self.cleaner is not None:
            self.cleaner.detach(self)
        with contextlib.suppress(Exception):
            await self.ml.flush()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if not self._lost and not self.ml.fenced:
            await self._persist(self.view.index.last)
        await self.ml.close()

    async def delete(self) -> None:
        """Delete the partition's data (topic deletion)."""
        if self.cleaner is not None:
            self.cleaner.detach(self)
        self._closing = True
        self._wake()
        await self.ml.delete()

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic.name}-{self.partition}, epoch={self.leader_epoch}, "
            f"start={self._log_start}, hw={self._hw})"
        )
