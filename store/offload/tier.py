"""One offload tier: a backend run in a bounded thread pool (boto3 and file I/O never block the
event loop), copying closed ledgers to it (copy, then verify sizes and digests read back) and
serving their entries back (index objects cached, range reads in aligned blocks with read-ahead)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import queue
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from store.managed.ledgers import LedgerClientLike
from store.managed.metadata import OffloadInfo
from store.offload.backend import Backend, ObjectInfo, now_ms
from store.offload.crash import crash_point
from store.offload.format import PREFIX, LedgerIndex, object_names
from store.offload.metrics import OFFLOAD_METRICS, TIER_READ_SECONDS

log = logging.getLogger(__name__)
T = TypeVar("T")

COPY_CHUNK_BYTES = 8 << 20  # bookie reads while copying
VERIFY_CHUNK_BYTES = 16 << 20
READ_BLOCK_BYTES = 4 << 20  # range GETs, aligned, one block read ahead
MAX_BLOCKS = 16
INDEX_CACHE_BYTES = 32 << 20


class OffloadVerifyError(Exception):
    """The copy read back differs from what was written."""


class Tier:
    def __init__(self, backend: Backend, *, concurrency: int = 8) -> None:
        self.backend = backend
        self.driver = backend.driver
        self._pool = ThreadPoolExecutor(max_workers=max(2, concurrency), thread_name_prefix="offload")
        self._indexes: OrderedDict[str, asyncio.Future[LedgerIndex]] = OrderedDict()
        self._index_bytes: dict[str, int] = {}
        self._blocks: OrderedDict[tuple[str, int], asyncio.Future[bytes]] = OrderedDict()
        OFFLOAD_METRICS.register()
        self._read_seconds = TIER_READ_SECONDS.labels(self.driver)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def close(self) -> None:
        for f in self._blocks.values():
            f.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)
        await asyncio.get_running_loop().run_in_executor(None, self.backend.close)

    # ---- copying ----------------------------------------------------------------------

    async def copy_ledger(
        self,
        client: LedgerClientLike,
        ledger_id: int,
        progress: Callable[[int], None] | None = None,
    ) -> OffloadInfo:
        """Copy a closed ledger to new objects and verify them; returns their location (not yet
        recorded anywhere: the caller switches the log's metadata). On failure the new objects
        are deleted (best effort; the cleanup pass removes what a crash leaves)."""
        data_key, index_key = object_names(ledger_id)
        h = await client.open(ledger_id, recovery=False)
        try:
            if not h.is_closed:
                raise ValueError(f"ledger {ledger_id} is not closed")
            last: int = h.last_add_confirmed
            try:
                info = await self._copy(h, ledger_id, last, data_key, index_key, progress)
            except BaseException:
                with contextlib.suppress(Exception):
                    await self.call(self.backend.delete, data_key)
                    await self.call(self.backend.delete, index_key)
                raise
        finally:
            with contextlib.suppress(Exception):
                await h.close()
        return info

    async def _copy(
        self, h: Any, ledger_id: int, last: int, data_key: str, index_key: str,
        progress: Callable[[int], None] | None,
    ) -> OffloadInfo:
        loop = asyncio.get_running_loop()
        q: queue.Queue[bytes | None] = queue.Queue()
        slots = asyncio.Semaphore(4)  # chunks read ahead of the upload
        digest = hashlib.sha256()
        offsets = array("Q", [0])
        total = 0

        def parts() -> Iterator[bytes]:
            first = True
            while True:
                item = q.get()
                if item is None:
                    return
                digest.update(item)
                loop.call_soon_threadsafe(slots.release)
                yield item
                if first:
                    first = False
                    crash_point("upload")

        upload = loop.run_in_executor(self._pool, self.backend.put_stream, data_key, parts())
        try:
            avg = int(getattr(h.metadata, "length", 0)) // max(1, last + 1) or 1024
            per = max(1, min(4096, COPY_CHUNK_BYTES // max(1, avg)))
            nxt = 0
            pending: asyncio.Task[list[bytes]] | None = None
            while nxt <= last or pending is not None:
                if pending is None:
                    pending = loop.create_task(h.read(nxt, min(last, nxt + per - 1)))
                    nxt = min(last, nxt + per - 1) + 1
                got = await pending
                pending = None
                if nxt <= last:  # read the next range while this one uploads
                    pending = loop.create_task(h.read(nxt, min(last, nxt + per - 1)))
                    nxt = min(last, nxt + per - 1) + 1
                for e in got:
                    total += len(e)
                    offsets.append(total)
                slot: asyncio.Future[Any] = loop.create_task(slots.acquire())
                waits: set[asyncio.Future[Any]] = {slot, upload}
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if not slot.done():  # the upload failed and reads no more: its error surfaces below
                    slot.cancel()
                    if pending is not None:
                        pending.cancel()
                    break
                q.put(b"".join(got))
                if progress is not None:
                    progress(sum(len(e) for e in got))
        except BaseException:
            q.put(None)
            with contextlib.suppress(BaseException):
                await upload
            raise
        q.put(None)
        size = await upload
        if size != total or len(offsets) != last + 2:
            raise OffloadVerifyError(f"ledger {ledger_id}: uploaded {size} bytes of {total}")
        idx = LedgerIndex(ledger_id, total, digest.digest(), offsets)
        index_bytes = idx.to_bytes()
        await self.call(self.backend.put, index_key, index_bytes)
        await self.call(self._verify, data_key, index_key, total, idx.digest, index_bytes)
        return OffloadInfo(self.driver, data_key, index_key, total, idx.digest.hex(), now_ms())

    def _verify(self, data_key: str, index_key: str, size: int, digest: bytes, index_bytes: bytes) -> None:
        """Read both objects back: sizes and digests must match what was written."""
        b = self.backend
        if b.size(data_key) != size:
            raise OffloadVerifyError(f"{data_key}: size differs after upload")
        h = hashlib.sha256()
        pos = 0
        while pos < size:
            chunk = b.get_range(data_key, pos, min(size, pos + VERIFY_CHUNK_BYTES))
            if not chunk:
                break
            h.update(chunk)
            pos += len(chunk)
        if pos != size or h.digest() != digest:
            raise OffloadVerifyError(f"{data_key}: digest differs after upload")
        if b.get(index_key) != index_bytes:
            raise OffloadVerifyError(f"{index_key}: differs after upload")

    # ---- reading ----------------------------------------------------------------------

    async def index(self, info: OffloadInfo) -> LedgerIndex:
        fut = self._indexes.get(info.index)
        if fut is not None:
            self._indexes.move_to_end(info.index)
            return await asyncio.shield(fut)
        fut = asyncio.get_running_loop().create_future()
        self._indexes[info.index] = fut
        try:
            idx = LedgerIndex.from_bytes(await self.call(self.backend.get, info.index))
        except BaseException as e:
            self._indexes.pop(info.index, None)
            fut.set_exception(e)
            fut.exception()
            raise
        fut.set_result(idx)
        self._index_bytes[info.index] = idx.nbytes()
        while sum(self._index_bytes.values()) > INDEX_CACHE_BYTES and len(self._indexes) > 1:
            k, _ = self._indexes.popitem(last=False)
            self._index_bytes.pop(k, None)
        return idx

    def _block(self, key: str, n: int, size: int) -> asyncio.Future[bytes]:
        fut = self._blocks.get((key, n))
        if fut is not None:
            self._blocks.move_to_end((key, n))
            return fut
        start = n * READ_BLOCK_BYTES
        task = asyncio.ensure_future(self.call(self.backend.get_range, key, start, min(size, start + READ_BLOCK_BYTES)))
        self._blocks[(key, n)] = task
        while len(self._blocks) > MAX_BLOCKS:
            self._blocks.popitem(last=False)  # not cancelled: another reader may be awaiting it
        return task

    async def read(self, info: OffloadInfo, first: int, last: int, max_bytes: int) -> list[bytes]:
        """Entries first..(at most)last, stopping once max_bytes is reached (at least one)."""
        t0 = time.monotonic()
        idx = await self.index(info)
        offs = idx.offsets
        last = min(last, idx.entries - 1)
        if first > last:
            return []
        end = first + 1
        while end <= last and offs[end + 1] - offs[first] <= max_bytes:
            end += 1
        start, stop = offs[first], offs[end]
        nb = (idx.data_size + READ_BLOCK_BYTES - 1) // READ_BLOCK_BYTES
        b0, b1 = start // READ_BLOCK_BYTES, (stop - 1) // READ_BLOCK_BYTES if stop > start else start // READ_BLOCK_BYTES
        futs = [self._block(info.data, b, idx.data_size) for b in range(b0, b1 + 1)]
        if b1 + 1 < nb:
            self._block(info.data, b1 + 1, idx.data_size)  # read-ahead
        try:
            blocks = [await asyncio.shield(f) for f in futs]
        except BaseException:
            for b in range(b0, b1 + 1):
                self._blocks.pop((info.data, b), None)  # do not keep a failed read
            raise
        buf = blocks[0] if len(blocks) == 1 else b"".join(blocks)
        base = b0 * READ_BLOCK_BYTES
        mv = memoryview(buf)
        out = [bytes(mv[offs[i] - base : offs[i + 1] - base]) for i in range(first, end)]
        self._read_seconds.observe(time.monotonic() - t0)
        return out

    def forget(self, info: OffloadInfo) -> None:
        self._indexes.pop(info.index, None)
        self._index_bytes.pop(info.index, None)
        for k in [k for k in self._blocks if k[0] == info.data]:
            self._blocks.pop(k).cancel()

    # ---- deleting ---------------------------------------------------------------------

    async def delete(self, info: OffloadInfo) -> None:
        self.forget(info)
        await self.call(self.backend.delete, info.data)
        await self.call(self.backend.delete, info.index)

    async def objects(self) -> list[ObjectInfo]:
        return await self.call(self.backend.list_objects, PREFIX)

    async def cleanup(self, referenced: set[str], margin_ms: int) -> list[str]:
        """Delete objects no metadata names that are older than margin_ms (an offload in flight
        has not named its objects yet). Returns the deleted keys."""
        cutoff = now_ms() - margin_ms
        gone = await self.call(self.backend.abort_incomplete, PREFIX, cutoff)
        for o in await self.objects():
            if o.key not in referenced and o.mtime_ms <= cutoff:
                await self.call(self.backend.delete, o.key)
                gone.append(o.key)
        return gone


