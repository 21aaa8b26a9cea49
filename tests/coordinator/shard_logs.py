"""ShardLog test doubles: an in-memory one (state-machine tests) and one over a bare segmented
log, one batch per entry (replay across owners without a gateway)."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator

from coordinator.group.shard_log import ShardLogError
from kafka_log.view import scan
from store.managed.log import ManagedLog
from store.managed.position import Position

_BASE = struct.Struct(">q")
_COUNT_AT = 57  # record count field of a v2 batch header


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
        async for got in scan(self.log, Position(0, 0), end=self.log.last_confirmed, max_bytes=1 << 22):
            for e in got:
                self.next_offset = max(self.next_offset, _BASE.unpack_from(e.data)[0] + _record_count(e.data))
                yield e.data
