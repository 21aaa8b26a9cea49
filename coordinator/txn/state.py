"""One transactional id's state, as Kafka's TransactionMetadata: producer id and epochs, the
transaction's state and partitions, its timestamps, and the transition being written."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = (1 << 15) - 1  # Short.MAX_VALUE

TopicPartition = tuple[str, int]


class TxnState(enum.Enum):
    """Kafka's TransactionState: (id stored in the log, name reported by Describe/List)."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def state_name(self) -> str:
        return self.value[1]

    @classmethod
    def by_id(cls, state_id: int) -> TxnState:
        for s in cls:
            if s.id == state_id:
                return s
        raise ValueError(f"unknown transaction state {state_id}")

    @classmethod
    def by_name(cls, name: str) -> TxnState | None:
        for s in cls:
            if s.state_name == name:
                return s
        return None


COMPLETE = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
PREPARE = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


def epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch for the fencing bump: MAX_EPOCH - 1 is the last one handed out."""
    return epoch >= MAX_EPOCH - 1


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # the epoch before the latest bump (retries)
    previous_producer_id: int = NO_PRODUCER_ID  # before a rotation (epoch exhausted)
    next_producer_id: int = NO_PRODUCER_ID
    timeout_ms: int = 60000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    client_version: int = 0  # 0/1: partitions added by the client; 2: KIP-890 implicit adds, bump per end
    pending: TxnState | None = None  # a transition being written to the log
    # In memory only: the request that started a write sees its result through this copy.

    def copy(self) -> TxnMetadata:
        return replace(self, partitions=set(self.partitions))

    def apply(self, new: TxnMetadata) -> None:
        """Take the written transition's values (Kafka's completeTransitionTo)."""
        for name in ("producer_id", "producer_epoch", "last_producer_epoch", "previous_producer_id",
                     "next_producer_id", "timeout_ms", "state", "start_ms", "last_update_ms", "client_version"):
            setattr(self, name, getattr(new, name))
        self.partitions = set(new.partitions)
        self.pending = None
