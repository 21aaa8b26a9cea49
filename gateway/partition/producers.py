"""Idempotent-producer state of one partition (Kafka's ProducerStateManager, minus
transactions): per producer id its epoch and its last five batches, for sequence checks and
duplicate detection. Snapshots (JSON, valid up to an offset) survive an owner change; the
batches after a snapshot are replayed from the log."""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from kafka_wire.errors import ErrorCode

NUM_BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
NO_EPOCH = -1
MAX_SEQ = (1 << 31) - 1


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


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQ)


class ProducerStates:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self.producers)

    def check(self, pid: int, epoch: int, first_seq: int, last_seq: int) -> BatchMeta | None:
        """Validate a batch of an idempotent producer (Kafka 4.x rules). Returns the original
        batch if this one is a duplicate of one of the last five; raises ProducerStateError
        (INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER) if it cannot be appended."""
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
        elif cur.batches and not in_sequence(cur.last_seq, first_seq):
            raise ProducerStateError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"out of order sequence number for producer {pid}: {first_seq} (incoming), "
                f"{cur.last_seq} (current end)",
            )
        return None

    def update(self, pid: int, epoch: int, meta: BatchMeta, now_ms: int = 0) -> None:
        cur = self.producers.get(pid)
        if cur is None:
            cur = self.producers[pid] = ProducerEntry(pid)
        if epoch != cur.epoch:
            cur.epoch = epoch
            cur.batches.clear()
        cur.batches.append(meta)
        cur.last_timestamp = meta.timestamp
        cur.touched_ms = max(cur.touched_ms, now_ms)

    def expire(self, before_ms: int) -> None:
        """Forget producers that appended nothing since before_ms (producer.id.expiration.ms)."""
        for pid in [p for p, e in self.producers.items() if e.touched_ms < before_ms]:
            del self.producers[pid]

    # -- snapshots ----------------------------------------------------------------------------

    def snapshot(self, upto: int) -> str:
        """JSON of the state made of batches below offset `upto` (what is durable)."""
        out = []
        for p in self.producers.values():
            batches = [list(b) for b in p.batches if b.last_offset < upto]
            if batches:
                out.append([p.producer_id, p.epoch, p.last_timestamp, batches, p.touched_ms])
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
        return st, int(doc["upto"])
