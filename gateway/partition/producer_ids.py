"""Producer ids for InitProducerId: blocks reserved by compare-and-set on one metadata node,
handed out one by one from memory (Kafka's ProducerIdManager, over the metadata store)."""

from __future__ import annotations

import asyncio
import contextlib

from gateway import paths
from store.meta.api import BadVersionError, MetaStore, NodeExistsError, NoNodeError

BLOCK_SIZE = 1000


class ProducerIdAllocator:
    def __init__(self, meta: MetaStore, block_size: int = BLOCK_SIZE) -> None:
        self.meta = meta
        self.block_size = block_size
        self._next = 0
        self._end = 0  # exclusive end of the current block
        self._lock = asyncio.Lock()

    async def next(self) -> int:
        """A producer id never handed out before, by any gateway."""
        async with self._lock:
            if self._next >= self._end:
                self._next, self._end = await self._reserve()
            pid = self._next
            self._next += 1
            return pid

    async def _reserve(self) -> tuple[int, int]:
        path = paths.PRODUCER_ID_BLOCK
        while True:
            try:
                data, stat = await self.meta.get(path)
            except NoNodeError:
                with contextlib.suppress(NodeExistsError):
                    await self.meta.create(path, b"0", make_parents=True)
                continue
            start = int(data or b"0")
            end = start + self.block_size
            try:
                await self.meta.set(path, str(end).encode(), stat.version)
            except BadVersionError:
                continue
            return start, end
