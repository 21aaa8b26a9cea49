"""Transactions in a Kafka log: the aborted-transactions index, and the interface between a
partition's owner and a transaction coordinator (types only, so `coordinator/` can name them
without importing `gateway/`).

The aborted-transactions index (Kafka's TransactionIndex) holds, per aborted transaction that
wrote to the log, (producer id, first offset, last offset = the ABORT marker's offset, and the
last stable offset once that marker was in). Each entry belongs to the ledger holding its
marker; a ledger's entries are persisted in its properties with its offset index, entries of
ledgers not persisted yet travel in the log's producer snapshot (L_ABORTED), and the rest is
rebuilt from the log tail. A read_committed fetch of [start, upper) needs every aborted
transaction overlapping it: a binary search on last offsets, then forward until an entry whose
last stable offset reaches `upper` (no later abort can start before it), as Kafka's
collectAbortedTxns, all in memory. A reader drops those transactions' batches with
AbortedFilter, as Kafka's consumer does with the list a read_committed fetch returns.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Awaitable, Callable, Iterable
from typing import NamedTuple, Protocol

from kafka_wire.errors import ErrorCode
from kafka_wire.records import RecordBatch, read_end_txn_marker
from kafka_wire.records.batch import ATTR_CONTROL, ATTR_TRANSACTIONAL

P_ABORTED = "k.aborted"  # ledger property: "pid,first,last,lso;..." of the aborts marked in it
L_ABORTED = "kafka.aborted"  # log property: "ledger,pid,first,last,lso;..." not yet in ledger props


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int  # the partition's LSO once the marker was in


class AbortedIndex:
    """The aborted transactions of one partition, in marker order."""

    def __init__(self) -> None:
        self._txns: list[AbortedTxn] = []
        self._lasts: list[int] = []
        self._ledgers: list[int] = []  # ledger holding each marker
        self._persisted: set[int] = set()  # ledgers whose entries are in their properties

    def __len__(self) -> int:
        return len(self._txns)

    def add(self, ledger_id: int, txn: AbortedTxn) -> None:
        """Record an abort (idempotent: an entry with the same marker offset is kept once)."""
        i = bisect.bisect_left(self._lasts, txn.last_offset)
        if i < len(self._lasts) and self._lasts[i] == txn.last_offset:
            return
        self._txns.insert(i, txn)
        self._lasts.insert(i, txn.last_offset)
        self._ledgers.insert(i, ledger_id)

    def collect(self, start: int, upper: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping [start, upper)."""
        out: list[tuple[int, int]] = []
        for i in range(bisect.bisect_left(self._lasts, start), len(self._txns)):
            t = self._txns[i]
            if t.first_offset < upper:
                out.append((t.producer_id, t.first_offset))
            if t.last_stable_offset >= upper:
                break
        return out

    def drop_before(self, ledger_id: int) -> None:
        """Forget the aborts marked in ledgers deleted from the log (retention, DeleteRecords)."""
        if self._ledgers and self._ledgers[0] < ledger_id:
            keep = [i for i, lid in enumerate(self._ledgers) if lid >= ledger_id]
            self._txns = [self._txns[i] for i in keep]
            self._lasts = [self._lasts[i] for i in keep]
            self._ledgers = [self._ledgers[i] for i in keep]
            self._persisted = {lid for lid in self._persisted if lid >= ledger_id}

    def remove(self, last_offsets: set[int]) -> None:
        """Forget the aborts whose ABORT markers are at these offsets (the log cleaner removed
        everything of those transactions)."""
        keep = [i for i, last in enumerate(self._lasts) if last not in last_offsets]
        if len(keep) < len(self._lasts):
            self._txns = [self._txns[i] for i in keep]
            self._lasts = [self._lasts[i] for i in keep]
            self._ledgers = [self._ledgers[i] for i in keep]

    # -- persistence -----------------------------------------------------------------------------

    def ledger_props(self, ledger_id: int) -> dict[str, str | None]:
        """The ledger property holding its aborts (removed when it has none)."""
        txt = ";".join(",".join(map(str, t)) for t, lid in zip(self._txns, self._ledgers) if lid == ledger_id)
        return {P_ABORTED: txt or None}

    def mark_persisted(self, ledger_id: int) -> None:
        self._persisted.add(ledger_id)

    def load_ledger(self, ledger_id: int, props: dict[str, str]) -> None:
        """Add a ledger's persisted aborts (from its properties)."""
        for item in filter(None, props.get(P_ABORTED, "").split(";")):
            self.add(ledger_id, AbortedTxn(*(int(x) for x in item.split(","))))
        self._persisted.add(ledger_id)

    def unpersisted_text(self) -> str:
        """The aborts of ledgers whose properties do not hold them yet (for L_ABORTED)."""
        return ";".join(
            f"{lid},{','.join(map(str, t))}"
            for t, lid in zip(self._txns, self._ledgers)
            if lid not in self._persisted
        )

    def load_text(self, text: str | None) -> None:
        """Add the aborts an L_ABORTED value lists."""
        for item in filter(None, (text or "").split(";")):
            lid, *rest = (int(x) for x in item.split(","))
            self.add(lid, AbortedTxn(*rest))

    def entries(self) -> Iterable[tuple[int, AbortedTxn]]:
        return zip(self._ledgers, self._txns)


class AbortedFilter:
    """Kafka's read_committed filtering of batches read in offset order, by batch header (as the
    Java consumer's fetcher), given `AbortedIndex.collect`'s (producer id, first offset) of the
    aborted transactions the read overlaps: a transactional batch is aborted when its producer
    has an aborted transaction starting at or before it not yet closed by an abort marker.
    Control batches are skipped too (no records for a consumer)."""

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        self.pending = [(first, pid) for pid, first in aborted]
        heapq.heapify(self.pending)
        self.active: set[int] = set()

    def skip(self, b: RecordBatch) -> bool:
        """Whether `b`, the next batch read, holds nothing for a read_committed consumer."""
        base, _, _, _, _, attributes, last_delta, _, _, pid, _, _, count = b.header()  # one unpack: hot path
        transactional = bool(attributes & ATTR_TRANSACTIONAL)
        if pid >= 0:  # a marker too: a read starting at one closes a transaction begun before it
            while self.pending and self.pending[0][0] <= base + last_delta:
                self.active.add(heapq.heappop(self.pending)[1])
        if attributes & ATTR_CONTROL:
            if transactional and count:
                marker = read_end_txn_marker(b)
                if marker is not None and not marker.commit:
                    self.active.discard(pid)
            return True
        return transactional and pid in self.active

    def keep(self, batches: Iterable[bytes | memoryview]) -> list[bytes | memoryview]:
        """The stored batches a read_committed consumer gets records from, in order."""
        return [d for d in batches if not self.skip(RecordBatch(d))]


# ---- the coordinator <-> partition owner interface ------------------------------------------------


class MarkerWriter(Protocol):
    """Append a COMMIT (commit=True) or ABORT marker for a producer to one partition, answering
    once it is durable: NONE, or the partition's Kafka error (NOT_LEADER_OR_FOLLOWER when this
    gateway does not own it, UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH,
    TRANSACTION_COORDINATOR_FENCED, ...), as WriteTxnMarkers answers per partition.
    `transaction_version` 2 (KIP-890) means the marker carries the bumped epoch, which must be
    above the producer's current epoch."""

    def __call__(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        /,
        transaction_version: int = 1,
    ) -> Awaitable[ErrorCode]: ...


# Before a partition owner appends the first transactional batch of a producer's transaction on
# partitions, it asks the coordinator (transaction.partition.verification.enable), for all the
# partitions of one Produce request at once:
#   verifier(transactional_id, producer_id, producer_epoch, {(topic, partition), ...}, add_partition)
# add_partition False: AddPartitionsToTxn verify-only (TV1, Produce < v12); True: add them (TV2,
# KIP-890 part 2). Answers per partition NONE to go on, else the coordinator's per-partition
# AddPartitionsToTxn error as is (INVALID_TXN_STATE when the partition is not in the transaction,
# PRODUCER_FENCED, TRANSACTION_ABORTABLE, CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE,
# NOT_COORDINATOR, ...): the produce path maps them for the client as Kafka 4.4's brokers do
# (gateway/handlers/produce.py verification_error).
TxnVerifier = Callable[[str, int, int, set[tuple[str, int]], bool], Awaitable[dict[tuple[str, int], ErrorCode]]]


async def accept_all(
    transactional_id: str, producer_id: int, producer_epoch: int, partitions: set[tuple[str, int]], add_partition: bool
) -> dict[tuple[str, int], ErrorCode]:
    """The default verifier: every transactional batch is accepted."""
    return dict.fromkeys(partitions, ErrorCode.NONE)
