"""Offload hooks and retention of an owned segmented log: recording offloaded copies, deleting
bookie copies, and trimming consumed or truncated ledgers (a base of ManagedLog)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from store.ledger.errors import NoSuchLedgerError
from store.managed.config import LogConfig
from store.managed.errors import ManagedLogError
from store.managed.ledgers import LedgerClientLike
from store.managed.log_reads import LogReads
from store.managed.metadata import LogMetadata, OffloadInfo
from store.managed.ownership import best_effort, now_ms
from store.managed.position import Position
from store.managed.retention import consumed_prefix, select_for_deletion

log = logging.getLogger("store.managed.log")


class OffloadConflictError(ManagedLogError):
    """The ledger was trimmed or already offloaded by another attempt meanwhile."""


class OffloadedObjects(Protocol):
    """What retention needs of the offloader (log.py's OffloaderLike): deleting a copy's objects."""

    async def delete_objects(self, info: OffloadInfo) -> None: ...


class LogRetention(LogReads):
    """Base of ManagedLog (which owns the state declared here)."""

    name: str
    client: LedgerClientLike
    config: LogConfig
    offloader: OffloadedObjects | None
    _meta_lock: asyncio.Lock
    _trim_task: asyncio.Task[Any] | None
    _cas: Callable[..., Awaitable[None]]
    _check_writable: Callable[[], None]
    total_size: Callable[[], int]
    slowest_cursor: Callable[[], Position | None]

    # ---- offload ------------------------------------------------------------------------

    async def record_offload(self, ledger_id: int, info: OffloadInfo) -> None:
        """Switch a closed ledger's location to its verified offloaded copy (compare-and-set).
        OffloadConflictError if it was trimmed or another attempt recorded a copy first."""

        def mutate(md: LogMetadata) -> None:
            for li in md.ledgers:
                if li.ledger_id == ledger_id:
                    if not li.closed or li.offload is not None:
                        raise OffloadConflictError(f"ledger {ledger_id} is open or already offloaded")
                    li.offload = info
                    return
            raise OffloadConflictError(f"ledger {ledger_id} is no longer in log {self.name!r}")

        async with self._meta_lock:
            await self._cas(mutate)

    async def delete_bookie_copy(self, ledger_id: int, after_delete: Callable[[], None] | None = None) -> None:
        """Delete an offloaded ledger's bookie copy, then record that it is gone. The delete is
        idempotent, so a crash between the two steps is finished by the next pass."""
        li = next((x for x in self._md.ledgers if x.ledger_id == ledger_id), None)
        if li is None or li.offload is None or li.offload.bookie_deleted:
            return
        self._reads.forget(ledger_id)
        self._cache.invalidate(self._token, ledger_id)
        try:
            await self.client.delete(ledger_id)
        except NoSuchLedgerError:
            pass
        if after_delete is not None:
            after_delete()  # a test hook (store/offload/crash.py)

        def mutate(md: LogMetadata) -> None:
            for x in md.ledgers:
                if x.ledger_id == ledger_id and x.offload is not None:
                    x.offload = dataclasses.replace(x.offload, bookie_deleted=True)

        async with self._meta_lock:
            await self._cas(mutate)

    # ---- retention --------------------------------------------------------------------

    def schedule_trim(self) -> None:
        if self._failure is None and not self._closed and (self._trim_task is None or self._trim_task.done()):
            self._trim_task = asyncio.get_running_loop().create_task(self._trim_quietly())

    async def wait_trimmed(self) -> None:
        """Until a background retention pass in progress (if any) has finished."""
        t = self._trim_task
        if t is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(t)

    async def _trim_quietly(self) -> None:
        try:
            await self.trim()
        except ManagedLogError:
            pass
        except Exception as e:
            log.warning("log %s: trim failed: %r", self.name, e)

    async def trim(self) -> list[int]:
        """Delete the ledgers that every durable cursor has consumed and that the retention
        policy lets go, plus those wholly before a truncation point. Returns their ids."""
        async with self._meta_lock:
            self._check_writable()
            doomed: list[int] = []
            start = self._md.start
            if start is not None:
                doomed = [li.ledger_id for li in self._md.ledgers[:-1] if li.ledger_id < start.ledger_id]
            rest = [li for li in self._md.ledgers if li.ledger_id not in doomed]
            consumed = consumed_prefix(rest, self.slowest_cursor())
            now = now_ms()
            doomed += select_for_deletion(consumed, self.total_size(), self.config, now)
            due = [lid for lid, not_before in self._md.deferred if not_before <= now]
            if not doomed and not due:
                return []
            gone = set(doomed) | set(due)
            offloaded = {li.ledger_id: li.offload for li in self._md.ledgers if li.ledger_id in gone and li.offload}

            def mutate(md: LogMetadata) -> None:
                md.ledgers = [li for li in md.ledgers if li.ledger_id not in gone]
                md.deferred = [d for d in md.deferred if d[0] not in gone]

            await self._cas(mutate)
            doomed += due
        for lid in doomed:
            self._cache.invalidate(self._token, lid)
            self._reads.forget(lid)
            info = offloaded.get(lid)
            if info is None or not info.bookie_deleted:
                await best_effort(self.client.delete(lid), f"delete ledger {lid}")
            if info is not None and self.offloader is not None:
                await best_effort(self.offloader.delete_objects(info), f"delete offloaded ledger {lid}")
        log.debug("log %s trimmed ledgers %s", self.name, doomed)
        return doomed
