"""The log a coordinator shard persists to: anything that appends a record batch durably and
replays every stored batch from the start. In the gateway it is the `__consumer_offsets`
partition's PartitionLog; here are an in-memory one (state-machine tests) and one over a bare
segmented log (one batch per entry)."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator
from typing import Protocol

from store.managed.log import ManagedLog
from store.managed.position import Position

_BASE = struct.Struct(">q")
_COUNT_AT = 57  # record count field of a v2 batch header


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

    def __init__(self, message: str, *, lost: bool = False) -> None:
        super().__init__(message)
        self.lost = lost  # ownership of the log is gone: NOT_COORDINATOR


def _with_base(batch: bytes, base: int) -> bytes:
    # baseOffset is outside the batch CRC, so patching it keeps the batch valid.
    return _BASE.pack(base) + batch[8:]


def _record_count(batch: bytes) -> int:
    return int(struct.unpack_from(">i", batch, _COUNT_AT)[0])


class MemoryShardLog:
    """In-memory ShardLog; `fail_next` makes appends fail (error-path tests)."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.next_offset = 0
        self.fail_next: ShardLogError | None = None

    async def append(self, batch: bytes) -> int:
        if self.fail_next is not None:
            err, self.fail_next = self.fail_next, None
            raise err
        base = self.next_offset
        self.batches.append(_with_base(batch, base))
        self.next_offset += _record_count(batch)
        return base

    async def replay(self) -> AsyncIterator[bytes]:
        for b in list(self.batches):
            yield b


class ManagedShardLog:
    """A ShardLog over a bare segmented log: each batch is one entry (tests and tools)."""

    def __init__(self, log: ManagedLog) -> None:
        self.log = log
        self.next_offset = 0

    async def append(self, batch: bytes) -> int:
        base = self.next_offset
        self.next_offset += _record_count(batch)
        try:
            await self.log.append(_with_base(batch, base))
        except Exception as e:
            raise ShardLogError(str(e), lost=self.log.fenced) from e
        return base

    async def replay(self) -> AsyncIterator[bytes]:
        end = self.log.last_confirmed
        pos = Position(0, 0)
        while True:
            got = await self.log.read(pos, max_entries=500, max_bytes=1 << 22)
            got = [e for e in got if e.position <= end]
            if not got:
                return
            for e in got:
                self.next_offset = max(self.next_offset, _BASE.unpack_from(e.data)[0] + _record_count(e.data))
                yield e.data
            pos = self.log.next_position(got[-1].position)
