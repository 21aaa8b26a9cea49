"""Producer state of one partition (Kafka's ProducerStateManager): per producer id its epoch,
its last five batches (sequence checks, duplicate detection), the coordinator epoch of its last
transaction marker and the first offset of its open transaction. `ongoing` lists the open
transactions (first offset -> producer id, in offset order) until their marker is durable: the
last stable offset is the first of them. Snapshots (JSON, valid up to an offset) survive an
owner change; the batches and markers after a snapshot are replayed from the log."""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from kafka_wire.errors import ErrorCode

NUM_BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
NO_EPOCH = -1
MAX_SEQ = (1 << 31) - 1
MAX_EPOCH = (1 << 15) - 1


class BatchMeta(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int  # the batch's max timestamp


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int = NO_EPOCH
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1
    touched_ms: int = 0  # wall clock of the last append (expiry; batch timestamps may be old)
    coordinator_epoch: int = -1  # of the last marker
    txn_first_offset: int = -1  # first offset of the open transaction, -1: none
    markers: int = 0  # markers applied by this owner (a transaction verification guard)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMeta | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


class ProducerStateError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQ)


class ProducerStates:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # open transactions: first offset -> producer id

    def __len__(self) -> int:
        return len(self.producers)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction whose marker is not durable yet."""
        # offsets are inserted in increasing order, so the first key is the smallest
        return next(iter(self.ongoing), None)

    def verification_guard(self, pid: int) -> int:
        """Changes whenever a marker lands for the producer: a transaction verified before one
        did may not be opened after it (Kafka's VerificationGuard)."""
        cur = self.producers.get(pid)
        return cur.markers if cur is not None else 0

    def in_transaction(self, pid: int, epoch: int | None = None) -> bool:
        """The producer has a transaction open here (of `epoch`, if given: under transaction
        version 2 a batch of the next epoch belongs to the next transaction, whose predecessor's
        marker may not be in yet; Kafka's hasOngoingTransaction(producerId, epoch))."""
        cur = self.producers.get(pid)
        return cur is not None and cur.txn_first_offset >= 0 and (epoch is None or cur.epoch == epoch)

    def check(
        self, pid: int, epoch: int, first_seq: int, last_seq: int, transactional: bool = False
    ) -> BatchMeta | None:
        """Validate a batch of an idempotent producer (Kafka 4.x rules). Returns the original
        batch if this one is a duplicate of one of the last five; raises ProducerStateError
        (INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_TXN_STATE) if it cannot
        be appended."""
        cur = self.producers.get(pid)
        if cur is None:
            return None  # unknown producer: any sequence is accepted (KIP-360)
        dup = cur.find_duplicate(epoch, first_seq, last_seq)
        if dup is not None:
            return dup
        if epoch < cur.epoch:
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"epoch {epoch} of producer {pid} is older than the current epoch {cur.epoch}",
            )
        if epoch != cur.epoch:
            if first_seq != 0 and cur.epoch != NO_EPOCH:
                raise ProducerStateError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"invalid sequence number {first_seq} for new epoch {epoch} of producer {pid}: expected 0",
                )
        elif (cur.batches or cur.coordinator_epoch >= 0) and not in_sequence(cur.last_seq, first_seq):
            # after a marker bumped the epoch (TV2) the batches are gone: the next one starts at 0
            raise ProducerStateError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"out of order sequence number for producer {pid}: {first_seq} (incoming), "
                f"{cur.last_seq} (current end)",
            )
        if cur.txn_first_offset >= 0 and not transactional:
            raise ProducerStateError(
                ErrorCode.INVALID_TXN_STATE,
                f"expected a transactional write from producer {pid}: its transaction is open",
            )
        return None

    def update(self, pid: int, epoch: int, meta: BatchMeta, now_ms: int = 0, transactional: bool = False) -> None:
        cur = self.producers.get(pid)
        if cur is None:
            cur = self.producers[pid] = ProducerEntry(pid)
        if epoch != cur.epoch:
            cur.epoch = epoch
            cur.batches.clear()
        cur.batches.append(meta)
        cur.last_timestamp = meta.timestamp
        cur.touched_ms = max(cur.touched_ms, now_ms)
        if transactional and cur.txn_first_offset < 0:
            cur.txn_first_offset = meta.first_offset
            self.ongoing[meta.first_offset] = pid

    # -- transaction markers ----------------------------------------------------------------------

    def check_marker(self, pid: int, epoch: int, coordinator_epoch: int, transaction_version: int) -> None:
        """Kafka's checks of a COMMIT/ABORT marker from the coordinator: the producer epoch (under
        transaction version 2 the marker carries the bumped epoch, so it must be above the last
        one seen, except for a retried marker of a transaction already closed) and the
        coordinator epoch (a zombie coordinator is fenced)."""
        cur = self.producers.get(pid)
        if cur is None:
            return
        stale = epoch <= cur.epoch if transaction_version >= 2 else epoch < cur.epoch
        retry = transaction_version >= 2 and epoch == cur.epoch and (cur.txn_first_offset < 0 or epoch == MAX_EPOCH)
        if stale and not retry:
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"marker epoch {epoch} of producer {pid} is {'<=' if transaction_version >= 2 else '<'} "
                f"the last seen epoch {cur.epoch} (TV{transaction_version})",
            )
        if cur.coordinator_epoch > coordinator_epoch:
            raise ProducerStateError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"invalid coordinator epoch for producer {pid}: {coordinator_epoch} (zombie), "
                f"{cur.coordinator_epoch} (current)",
            )

    def apply_marker(
        self, pid: int, epoch: int, coordinator_epoch: int, commit: bool, offset: int, now_ms: int = 0
    ) -> CompletedTxn | None:
        """Close the producer's transaction with a marker at `offset`. The transaction stays in
        `ongoing` until `complete` (its marker durable). None when nothing was open."""
        cur = self.producers.get(pid)
        if cur is None:
            cur = self.producers[pid] = ProducerEntry(pid)
        done = None
        if cur.txn_first_offset >= 0:
            done = CompletedTxn(pid, cur.txn_first_offset, offset, not commit)
            cur.txn_first_offset = -1
        if epoch != cur.epoch:
            cur.epoch = epoch
            cur.batches.clear()
        cur.coordinator_epoch = coordinator_epoch
        cur.markers += 1
        cur.touched_ms = max(cur.touched_ms, now_ms)
        return done

    def complete(self, txn: CompletedTxn) -> None:
        self.ongoing.pop(txn.first_offset, None)

    def expire(self, before_ms: int) -> None:
        """Forget producers that appended nothing since before_ms (producer.id.expiration.ms),
        except those with an open transaction."""
        for pid in [p for p, e in self.producers.items() if e.touched_ms < before_ms and e.txn_first_offset < 0]:
            del self.producers[pid]

    def copy(self) -> ProducerStates:
        return ProducerStates.from_snapshot(self.snapshot(1 << 62))[0]

    # -- snapshots ----------------------------------------------------------------------------

    def snapshot(self, upto: int) -> str:
        """JSON of the state made of batches below offset `upto` (what is durable)."""
        out = []
        for p in self.producers.values():
            batches = [list(b) for b in p.batches if b.last_offset < upto]
            txn_first = p.txn_first_offset if p.txn_first_offset < upto else -1
            if batches or p.coordinator_epoch >= 0 or txn_first >= 0:
                out.append([p.producer_id, p.epoch, p.last_timestamp, batches, p.touched_ms,
                            p.coordinator_epoch, txn_first])
        return json.dumps({"upto": upto, "p": out}, separators=(",", ":"))

    @classmethod
    def from_snapshot(cls, text: str | None) -> tuple[ProducerStates, int]:
        """(state, offset it is valid up to); an empty state valid up to 0 without a snapshot."""
        st = cls()
        if not text:
            return st, 0
        doc = json.loads(text)
        for pid, epoch, last_ts, batches, *rest in doc["p"]:
            e = st.producers[pid] = ProducerEntry(pid, epoch, last_timestamp=last_ts, touched_ms=rest[0] if rest else 0)
            e.batches.extend(BatchMeta(*b) for b in batches)
            if len(rest) >= 3:
                e.coordinator_epoch, e.txn_first_offset = rest[1], rest[2]
        for e in sorted(st.producers.values(), key=lambda e: e.txn_first_offset):
            if e.txn_first_offset >= 0:
                st.ongoing[e.txn_first_offset] = e.producer_id
        return st, int(doc["upto"])
