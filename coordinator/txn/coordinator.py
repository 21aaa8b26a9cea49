"""One `__transaction_state` shard's transaction coordinator (Kafka's TransactionCoordinator and
TransactionStateManager): InitProducerId, AddPartitionsToTxn (client and verify-only forms),
EndTxn (transaction versions 1 and 2), Describe/ListTransactions, timeouts and expiry. Every
transition is written to the shard's log before it takes effect or is answered; after a
PREPARE_* the partitions' owners are asked for markers (an injected MarkerSender) until each
has one, then COMPLETE_* is written."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from coordinator.group.shard_log import ShardLog, ShardLogError
from coordinator.txn.config import TxnConfig
from coordinator.txn.records import decode_key, decode_value, encode_key, encode_value
from coordinator.txn.state import (
    COMPLETE,
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARE,
    TopicPartition,
    TxnMetadata,
    TxnState,
    epoch_exhausted,
)
from kafka_wire.errors import ErrorCode
from kafka_wire.records import NewRecord, build_batch, iter_batches

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TxnMarkers:
    """Markers one transaction needs on its partitions (a WriteTxnMarkers entry)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]
    transaction_version: int


# One attempt at every partition of `markers`: the error per partition (NONE: written).
MarkerSender = Callable[[TxnMarkers], Awaitable[dict[TopicPartition, int]]]
ProducerIdSource = Callable[[], Awaitable[int]]
# Marker errors after which the marker is not retried: the topic or partition is gone, or the
# partition saw a newer producer epoch (nothing this coordinator can write there any more: the
# transaction completes without it, so that its id is not blocked). A newer coordinator having
# written there (TRANSACTION_COORDINATOR_FENCED) stops this one: the transaction is its now.
_MARKER_DONE = (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID)
_MARKER_REFUSED = (ErrorCode.INVALID_PRODUCER_EPOCH,)
_MARKER_STOP = (ErrorCode.TRANSACTION_COORDINATOR_FENCED,)


@dataclass
class InitResult:
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass
class DescribedTxn:
    error: int
    transactional_id: str
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    partitions: list[TopicPartition] | None = None


def _now_ms() -> int:
    return int(time.time() * 1000)


class TxnCoordinator:
    """One shard's coordinator. Build it, `await load()`, serve, `unload()` when ownership goes."""

    def __init__(
        self,
        shard: int,
        shard_log: ShardLog,
        config: TxnConfig,
        *,
        coordinator_epoch: int,
        producer_ids: ProducerIdSource,
        send_markers: MarkerSender,
    ) -> None:
        self.shard = shard
        self.log = shard_log
        self.config = config
        self.coordinator_epoch = coordinator_epoch
        self._producer_ids = producer_ids
        self._send_markers = send_markers
        self.txns: dict[str, TxnMetadata] = {}
        self.active = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._completions: dict[str, asyncio.Task[None]] = {}
        self._add_writes: dict[str, asyncio.Future[None]] = {}  # an add being written, per id
        # partitions waiting for an add being written or for the completion of the previous
        # transaction, and the highest client version that asked for them
        self._queued_adds: dict[str, set[TopicPartition]] = {}
        self._queued_versions: dict[str, int] = {}

    # ---- lifecycle -------------------------------------------------------------------------

    async def load(self) -> None:
        """Replay the shard's log, become active, finish every transaction left prepared."""
        txns: dict[str, TxnMetadata] = {}
        async for chunk in self.log.replay():
            for batch in iter_batches(chunk):
                if batch.is_control:
                    continue
                for rec in batch.records():
                    if rec.key is None:
                        continue
                    tid = decode_key(rec.key)
                    if rec.value is None:
                        txns.pop(tid, None)
                    else:
                        txns[tid] = decode_value(tid, rec.value)
        self.txns = txns
        self.active = True
        prepared = [t for t in txns.values() if t.state in PREPARE]
        for txn in prepared:
            self._start_completion(txn)
        log.info("transaction shard %d loaded: %d transactional ids, %d to complete",
                 self.shard, len(txns), len(prepared))

    def unload(self) -> None:
        self.active = False
        for t in list(self._tasks):
            t.cancel()
        self.txns.clear()

    async def close(self) -> None:
        self.unload()
        tasks = list(self._tasks)
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t

    def _spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ---- writes ----------------------------------------------------------------------------

    async def _write(self, txn: TxnMetadata, new: TxnMetadata, *then: TxnMetadata) -> int:
        """Write `new` (and the states `then` after it, in the same log entry) as txn's next
        state(s); apply them once the log has them (Kafka's appendTransactionToLog). Returns the
        error a client sees."""
        states = (new, *then)
        # As Kafka's prepareTransitionTo: every transition records the producer id it came from
        # (after a rotation, the exhausted one: a retry under it is recognised).
        before = txn.producer_id
        for st in states:
            st.previous_producer_id, before = before, st.producer_id
        txn.pending = states[-1].state
        batch = build_batch([NewRecord(encode_key(txn.transactional_id),
                                       None if st.state is TxnState.DEAD else encode_value(st)) for st in states])
        try:
            await self.log.append(batch)
        except ShardLogError as e:
            txn.pending = None
            log.warning("transaction shard %d: write failed: %s", self.shard, e)
            return ErrorCode.NOT_COORDINATOR if e.lost else ErrorCode.COORDINATOR_NOT_AVAILABLE
        except Exception:
            txn.pending = None
            log.exception("transaction shard %d: write failed", self.shard)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not self.active or self.txns.get(txn.transactional_id) is not txn:
            return ErrorCode.NOT_COORDINATOR
        for st in states:
            txn.apply(st)
        if txn.state is TxnState.DEAD:
            del self.txns[txn.transactional_id]
        return ErrorCode.NONE

    # ---- InitProducerId ----------------------------------------------------------------------

    def valid_timeout(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.max_timeout_ms

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> InitResult:
        if not self.active:
            return InitResult(ErrorCode.NOT_COORDINATOR)
        if not transactional_id:
            return InitResult(ErrorCode.INVALID_REQUEST)
        if not self.valid_timeout(timeout_ms):
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        txn = self.txns.get(transactional_id)
        if txn is None:
            pid = await self._producer_ids()
            if not self.active:
                return InitResult(ErrorCode.NOT_COORDINATOR)
            txn = self.txns.get(transactional_id)
            if txn is None:
                txn = self.txns[transactional_id] = TxnMetadata(
                    transactional_id, pid, timeout_ms=timeout_ms, last_update_ms=_now_ms()
                )
        expected = (producer_id, producer_epoch) if producer_id != NO_PRODUCER_ID else None
        if txn.pending is not None:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected is not None and not (
            txn.producer_epoch == NO_PRODUCER_EPOCH
            or expected[0] == txn.producer_id
            or (expected[0] == txn.previous_producer_id and epoch_exhausted(expected[1]))
        ):
            return InitResult(ErrorCode.PRODUCER_FENCED)
        st = txn.state
        if st in PREPARE or st in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if st is TxnState.ONGOING:
            # Abort the open transaction under a bumped epoch (fencing its producer); the
            # client retries and then gets a second bump (Kafka's PrepareEpochFence).
            err = await self._fence_and_abort(txn)
            return InitResult(err or ErrorCode.CONCURRENT_TRANSACTIONS)
        now = _now_ms()
        new = txn.copy()
        if epoch_exhausted(txn.producer_epoch) and (expected is None or expected[1] == txn.producer_epoch):
            new.producer_id = await self._producer_ids()
            new.producer_epoch, new.last_producer_epoch = 0, NO_PRODUCER_EPOCH
        elif expected is None:
            new.producer_epoch, new.last_producer_epoch = txn.producer_epoch + 1, NO_PRODUCER_EPOCH
        elif txn.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == txn.producer_epoch:
            new.producer_epoch, new.last_producer_epoch = txn.producer_epoch + 1, txn.producer_epoch
        elif expected[1] != txn.last_producer_epoch:
            return InitResult(ErrorCode.PRODUCER_FENCED)
        # else: a retry of the bump whose answer was lost: the same epoch again
        new.state, new.partitions = TxnState.EMPTY, set()
        new.timeout_ms, new.start_ms, new.last_update_ms = timeout_ms, -1, now
        if txn.pending is not None:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        err = await self._write(txn, new)
        if err:
            return InitResult(err)
        return InitResult(ErrorCode.NONE, new.producer_id, new.producer_epoch)

    async def _fence_and_abort(self, txn: TxnMetadata) -> int:
        next_pid = NO_PRODUCER_ID
        if txn.client_version >= 2 and epoch_exhausted(txn.producer_epoch):
            # KAFKA-20090: a fencing abort at the exhausted epoch rotates the producer id too
            # (its markers carry Short.MAX_VALUE, above every epoch the partitions saw)
            next_pid = await self._producer_ids()
            if txn.pending is not None or txn.state is not TxnState.ONGOING:
                return ErrorCode.CONCURRENT_TRANSACTIONS
        new = txn.copy()
        if not epoch_exhausted(txn.producer_epoch):
            new.producer_epoch = txn.producer_epoch + 1
        elif next_pid != NO_PRODUCER_ID:
            new.producer_epoch, new.next_producer_id = MAX_EPOCH, next_pid
        new.last_producer_epoch = NO_PRODUCER_EPOCH
        return await self._prepare_end(txn, new, commit=False)

    # ---- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------

    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int, *, adding: bool = False
    ) -> tuple[int, TxnMetadata | None]:
        """The producer's transaction if the request may go on (`adding`: an add in flight or
        a completion does not stop it: add_partitions waits for them)."""
        if not self.active:
            return ErrorCode.NOT_COORDINATOR, None
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        txn = self.txns.get(transactional_id)
        if txn is not None and (producer_id, producer_epoch) == (txn.next_producer_id, 0) and txn.state in PREPARE:
            # the producer id an end rotated to, used before that end's markers are written:
            # an add waits for the completion (which takes that id); anything else is asked again
            return (ErrorCode.NONE, txn) if adding else (ErrorCode.CONCURRENT_TRANSACTIONS, None)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        if not adding and (txn.pending is not None or txn.state in PREPARE):
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        return ErrorCode.NONE, txn

    async def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: set[TopicPartition],
        client_version: int = 1, *, retry_after_completion: bool = False,
    ) -> int:
        """Add partitions to the producer's transaction. Adds arriving while one is written wait
        for it and are written together after it (transaction version 2 adds each partition from
        its owner's produce path, concurrently); an add arriving while the previous transaction's
        markers are written waits for its completion: where Kafka answers CONCURRENT_TRANSACTIONS
        at once and the client (or partition owner) retries after a backoff. With
        `retry_after_completion` (a partition owner's add, whose verification a marker landing
        meanwhile invalidates) the answer after that wait is CONCURRENT_TRANSACTIONS: the owner
        asks again at once."""
        tid = transactional_id
        while True:
            err, txn = self._check_producer(tid, producer_id, producer_epoch, adding=True)
            if txn is None:
                return err
            if txn.state is TxnState.ONGOING and partitions <= txn.partitions:
                return ErrorCode.NONE
            busy = self._add_writes.get(tid) or (self._completions.get(tid) if txn.state in PREPARE else None)
            if busy is not None:
                # written with the add in flight, or with the completion's COMPLETE_* (one
                # write: the next transaction's first produce does not wait for two in a row)
                self._queued_adds.setdefault(tid, set()).update(partitions)
                self._queued_versions[tid] = max(client_version, self._queued_versions.get(tid, 0))
                completing = txn.state in PREPARE
                try:
                    await asyncio.wait_for(asyncio.shield(busy), self.config.max_wait_ms / 1000)
                except TimeoutError:
                    return ErrorCode.CONCURRENT_TRANSACTIONS
                except Exception:
                    pass  # re-checked on the next round
                if completing and retry_after_completion:
                    return ErrorCode.CONCURRENT_TRANSACTIONS
                continue
            if txn.pending is not None or txn.state in PREPARE:
                return ErrorCode.CONCURRENT_TRANSACTIONS
            now = _now_ms()
            new = txn.copy()
            if txn.state is not TxnState.ONGOING:
                new.partitions, new.start_ms = set(), now
            new.partitions |= partitions | self._queued_adds.pop(tid, set())
            new.state, new.last_update_ms = TxnState.ONGOING, now
            new.client_version = max(client_version, self._queued_versions.pop(tid, 0),
                                     txn.client_version if txn.state is TxnState.ONGOING else 0)
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._add_writes[tid] = done
            try:
                err = await self._write(txn, new)
            finally:
                del self._add_writes[tid]
                done.set_result(None)
            if err:
                return err

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: set[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn's verify-only form (a partition owner checking a transactional
        produce, KIP-890 part 1): which partitions are in the producer's open transaction."""
        err, txn = self._check_producer(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return dict.fromkeys(partitions, err)
        # TRANSACTION_ABORTABLE (KIP-1050): partition owners map it to INVALID_TXN_STATE for
        # clients too old to know it
        ongoing = txn.state is TxnState.ONGOING
        return {tp: ErrorCode.NONE if ongoing and tp in txn.partitions else ErrorCode.TRANSACTION_ABORTABLE
                for tp in partitions}

    # ---- EndTxn ------------------------------------------------------------------------------

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, *, tv2: bool = False
    ) -> InitResult:
        """EndTxn: (error, producer id, epoch the producer goes on with). Transaction version 2
        bumps the epoch per end; when that exhausts it (Short.MAX_VALUE - 1), the end allocates
        the next producer id, written with the PREPARE_* state and taken at COMPLETE_* (Kafka's
        prepareAbortOrCommit / prepareComplete), and the answer is already the new id at epoch 0."""
        if not self.active:
            return InitResult(ErrorCode.NOT_COORDINATOR)
        if not transactional_id:
            return InitResult(ErrorCode.INVALID_REQUEST)
        next_pid = NO_PRODUCER_ID
        txn = self.txns.get(transactional_id)
        if tv2 and txn is not None and txn.producer_id == producer_id and epoch_exhausted(txn.producer_epoch):
            next_pid = await self._producer_ids()  # before the checks: nothing changes under them
            txn = self.txns.get(transactional_id) if self.active else None
        if txn is None:
            return InitResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        st = txn.state
        if tv2:
            # Kafka's TV2 retries: the epoch before the bump, or the exhausted one of the
            # producer id this end rotated away from
            retry_on_bump = txn.producer_epoch == producer_epoch + 1
            retry_on_overflow = (producer_id == txn.previous_producer_id != txn.producer_id
                                 and producer_epoch == MAX_EPOCH - 1 and txn.producer_epoch == 0)
            if txn.producer_id != producer_id and not retry_on_overflow:
                if producer_id == txn.next_producer_id and st in PREPARE:
                    return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)  # the rotation is completing
                return InitResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            retry = retry_on_bump or retry_on_overflow
            if st in PREPARE:
                valid = retry_on_bump
            elif st in COMPLETE:
                valid = retry or producer_epoch == txn.producer_epoch
            else:
                valid = producer_epoch == txn.producer_epoch
            if not valid:
                return InitResult(ErrorCode.PRODUCER_FENCED)
        else:
            retry = False
            if txn.producer_id != producer_id:
                return InitResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            if producer_epoch != txn.producer_epoch:
                return InitResult(ErrorCode.PRODUCER_FENCED)
        if txn.pending is not None:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        done = InitResult(ErrorCode.NONE, txn.producer_id, txn.producer_epoch)
        invalid = InitResult(ErrorCode.INVALID_TXN_STATE)
        wanted_complete = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        wanted_prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if st is TxnState.ONGOING:
            if retry:
                return InitResult(ErrorCode.PRODUCER_FENCED)
        elif st is wanted_prepare:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        elif st in PREPARE:
            return invalid
        elif st is wanted_complete and (retry or not tv2):
            return done  # a retry of an end that completed
        elif tv2 and not commit and not retry and st in (TxnState.EMPTY, *COMPLETE):
            pass  # transaction version 2 aborts an empty transaction to bump the epoch
        else:
            return invalid
        new = txn.copy()
        if tv2:
            if not (txn.producer_epoch == MAX_EPOCH and not commit):
                new.producer_epoch = txn.producer_epoch + 1
            new.last_producer_epoch = txn.producer_epoch
            new.next_producer_id = next_pid if epoch_exhausted(txn.producer_epoch) else NO_PRODUCER_ID
        if st is not TxnState.ONGOING:
            new.partitions = set()
        new.client_version = 2 if tv2 else max(txn.client_version, 1)
        err = await self._prepare_end(txn, new, commit)
        if err:
            return InitResult(err)
        if new.next_producer_id != NO_PRODUCER_ID:
            return InitResult(ErrorCode.NONE, new.next_producer_id, 0)
        return InitResult(ErrorCode.NONE, new.producer_id, new.producer_epoch)

    async def _prepare_end(self, txn: TxnMetadata, new: TxnMetadata, commit: bool) -> int:
        now = _now_ms()
        new.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        new.last_update_ms = now
        if new.start_ms < 0:
            new.start_ms = now
        err = await self._write(txn, new)
        if not err:
            self._start_completion(txn)
        return err

    # ---- markers and completion ----------------------------------------------------------

    def _start_completion(self, txn: TxnMetadata) -> None:
        tid = txn.transactional_id
        if tid not in self._completions:
            task = self._spawn(self._complete(txn))
            self._completions[tid] = task
            task.add_done_callback(lambda _t: self._completions.pop(tid, None))

    async def _complete(self, txn: TxnMetadata) -> None:
        commit = txn.state is TxnState.PREPARE_COMMIT
        markers = TxnMarkers(
            txn.transactional_id, txn.producer_id, txn.producer_epoch, commit, self.coordinator_epoch,
            tuple(sorted(txn.partitions)), txn.client_version,
        )
        remaining = set(markers.partitions)
        backoff = self.config.marker_retry_backoff_ms / 1000
        while remaining and self.active:
            try:
                errors = await self._send_markers(
                    TxnMarkers(**{**markers.__dict__, "partitions": tuple(sorted(remaining))})
                )
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transaction %s: writing markers failed", txn.transactional_id)
                errors = {}
            for tp, code in errors.items():
                if code in _MARKER_STOP:
                    log.warning("transaction %s: marker on %s refused: a newer coordinator", txn.transactional_id, tp)
                    return
                if code in _MARKER_REFUSED:
                    log.warning("transaction %s: marker on %s refused: the partition has a newer producer epoch",
                                txn.transactional_id, tp)
                if code in _MARKER_DONE or code in _MARKER_REFUSED:
                    remaining.discard(tp)
            if remaining:
                await asyncio.sleep(backoff)  # the partitions' owners are moving: ask again
                backoff = min(backoff * 2, 1.0)
        if not self.active or self.txns.get(txn.transactional_id) is not txn:
            return
        # Nothing else writes a prepared transaction: every request answers CONCURRENT_TRANSACTIONS.
        now = _now_ms()
        new = txn.copy()
        new.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if txn.client_version >= 2 and txn.next_producer_id != NO_PRODUCER_ID:
            # the rotation an end of transaction version 2 prepared (the last epoch stays the
            # exhausted one, as the client last saw it)
            new.producer_id, new.producer_epoch = txn.next_producer_id, 0
        new.next_producer_id = NO_PRODUCER_ID
        new.partitions = set()
        new.last_update_ms = now
        queued = self._queued_adds.pop(txn.transactional_id, None)
        version = self._queued_versions.pop(txn.transactional_id, 0)
        if not queued:
            err = await self._write(txn, new)
        else:
            # The next transaction's partitions, asked for while the markers were written: its
            # ONGOING goes in the same log entry, after COMPLETE_* (both persisted, in order).
            nxt = new.copy()
            nxt.state, nxt.partitions, nxt.start_ms, nxt.client_version = TxnState.ONGOING, queued, now, version
            err = await self._write(txn, new, nxt)
        if err:
            log.warning("transaction %s: writing %s failed (%d)", txn.transactional_id, new.state.state_name, err)

    # ---- timeouts and expiry -------------------------------------------------------------

    async def abort_timed_out(self, now: int | None = None) -> int:
        """Abort (fencing the producer) every Ongoing transaction past its timeout."""
        if not self.active:
            return 0
        now = _now_ms() if now is None else now
        expired = [t for t in self.txns.values()
                   if t.state is TxnState.ONGOING and t.pending is None and t.start_ms + t.timeout_ms < now]
        for txn in expired:
            log.info("transaction %s timed out: aborting", txn.transactional_id)
            await self._fence_and_abort(txn)
        return len(expired)

    async def expire_transactional_ids(self, now: int | None = None) -> int:
        """Forget transactional ids idle (Empty or complete) for transactional.id.expiration.ms."""
        if not self.active:
            return 0
        now = _now_ms() if now is None else now
        idle = [t for t in self.txns.values()
                if (t.state is TxnState.EMPTY or t.state in COMPLETE) and t.pending is None
                and t.last_update_ms + self.config.id_expiration_ms <= now]
        for txn in idle:
            new = txn.copy()
            new.state = TxnState.DEAD
            await self._write(txn, new)
        return len(idle)

    # ---- admin ---------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> DescribedTxn:
        if not self.active:
            return DescribedTxn(ErrorCode.NOT_COORDINATOR, transactional_id)
        if not transactional_id:
            return DescribedTxn(ErrorCode.INVALID_REQUEST, transactional_id)
        txn = self.txns.get(transactional_id)
        if txn is None or txn.state is TxnState.DEAD:
            return DescribedTxn(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, transactional_id)
        return DescribedTxn(
            ErrorCode.NONE, transactional_id, txn.state.state_name, txn.timeout_ms, txn.start_ms,
            txn.producer_id, txn.producer_epoch, sorted(txn.partitions),
        )

    def list_transactions(
        self, states: set[str], producer_ids: set[int], duration_ms: int = -1, pattern: str | None = None,
        now: int | None = None,
    ) -> list[tuple[str, int, str]]:
        """(transactional id, producer id, state name) of every transaction the filters keep."""
        now = _now_ms() if now is None else now
        regex = re.compile(pattern) if pattern else None
        out = []
        for tid, txn in self.txns.items():
            name = txn.state.state_name
            if states and name not in states:
                continue
            if producer_ids and txn.producer_id not in producer_ids:
                continue
            if duration_ms >= 0 and (txn.state is not TxnState.ONGOING or now - txn.start_ms < duration_ms):
                continue
            if regex is not None and not regex.fullmatch(tid):
                continue
            out.append((tid, txn.producer_id, name))
        return out
