"""The log a coordinator shard persists to: anything that appends a record batch durably and
replays every stored batch from the start. The one implementation is the `__consumer_offsets`
partition's PartitionLog (gateway/groups.py); tests use doubles (tests/coordinator/shard_logs.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol


class ShardLog(Protocol):
    async def append(self, batch: bytes) -> int:
        """Store one record batch; returns its base offset once the quorum acknowledged it."""
        ...

    def replay(self) -> AsyncIterator[bytes]:
        """Every stored batch (a run of whole batches per item), from the start to the end as of
        the call."""
        ...


class ShardLogError(Exception):
    """An append failed: the coordinator answers with a retriable coordinator error."""

    def __init__(self, message: str, *, lost: bool = False, error_code: int | None = None) -> None:
        super().__init__(message)
        self.lost = lost  # ownership of the log is gone: NOT_COORDINATOR
        self.error_code = error_code  # the log's own error, when it gave one
