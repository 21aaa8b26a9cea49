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
from store.managed.ledgers import LedgerClientLike, WriterLike
from store.managed.log_reads import LogReads
from store.managed.metadata import LogMetadata, OffloadInfo
from store.managed.ownership import LEDGER_PROP_LOG, best_effort, now_ms
from store.managed.position import Position
from store.managed.retention import consumed_prefix, select_for_deletion

log = logging.getLogger("store.managed.log")


@dataclasses.dataclass(frozen=True)
class Rewrite:
    """A closed ledger's rewrite: the ledger holding it, its entry count and size, what the
    ledger's data was read from (its previous rewrite, or None: its own), and ledger
    properties to update with it (None removes a key)."""

    data: int
    entries: int
    size: int
    replaces: int | None = None
    props: dict[str, str | None] = dataclasses.field(default_factory=dict)


class OffloadConflictError(ManagedLogError):
    """The ledger was trimmed or already offloaded by another attempt meanwhile."""


class RewriteConflictError(ManagedLogError):
    """The ledgers to replace changed meanwhile (trimmed, offloaded, or rewritten by another pass)."""


# A rewrite ledger is listed for deletion from its creation until the switch adopts it, so one
# a crash leaves behind is deleted by a later retention pass; long enough for any rewrite.
REWRITE_ORPHAN_MS = 3_600_000


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

    # ---- rewrites (a client of the log decides what a rewrite keeps: e.g. log compaction) ---

    async def create_rewrite_ledger(self) -> WriterLike:
        """A new ledger to rewrite closed ledgers into, listed for deferred deletion until
        replace_ledgers adopts it (a crash before the switch leaves it to retention)."""
        self._check_writable()
        cfg = self.config
        w: WriterLike = await self.client.create(cfg.ensemble_size, cfg.write_quorum, cfg.ack_quorum,
                                                 properties={LEDGER_PROP_LOG: self.name})
        not_before = now_ms() + REWRITE_ORPHAN_MS

        def mutate(md: LogMetadata) -> None:
            md.deferred.append((w.ledger_id, not_before))

        try:
            async with self._meta_lock:
                await self._cas(mutate)
        except BaseException:
            await best_effort(w.close(), "close rewrite ledger")
            await best_effort(self.client.delete(w.ledger_id), f"delete rewrite ledger {w.ledger_id}")
            raise
        return w

    async def replace_ledgers(self, rewrites: dict[int, Rewrite]) -> None:
        """Switch consecutive closed ledgers to their rewrites in one compare-and-set. A rewrite
        holds as many entries as the ledger (entry i replaces entry i: positions, cursors and
        indexes stay valid); the replaced copies are deleted after a grace period. Either every
        ledger switches or none (RewriteConflictError if one was trimmed, offloaded, or is not
        the copy the rewrite was made from)."""
        if not rewrites:
            return
        now = now_ms()

        def mutate(md: LogMetadata) -> None:
            idx = [i for i, li in enumerate(md.ledgers) if li.ledger_id in rewrites]
            if len(idx) != len(rewrites) or idx != list(range(idx[0], idx[0] + len(idx))):
                raise RewriteConflictError(f"log {self.name!r}: ledgers to rewrite are gone or not consecutive")
            old: list[int] = []
            for i in idx:
                li, rw = md.ledgers[i], rewrites[md.ledgers[i].ledger_id]
                if not li.closed or li.offload is not None or li.data != rw.replaces or li.entries != rw.entries:
                    raise RewriteConflictError(f"log {self.name!r}: ledger {li.ledger_id} changed meanwhile")
                old.append(li.data_id)
                li.data, li.size = rw.data, rw.size
                for k, v in rw.props.items():
                    if v is None:
                        li.props.pop(k, None)
                    else:
                        li.props[k] = v
            adopted = {rw.data for rw in rewrites.values()}
            md.deferred = [d for d in md.deferred if d[0] not in adopted]
            # the replaced copies stay a while: reads in flight on them finish
            md.deferred += [(lid, now + int(self.config.deferred_delete_s * 1000)) for lid in old]

        async with self._meta_lock:
            await self._cas(mutate)
        for lid in rewrites:
            self._cache.invalidate(self._token, lid)

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
            # a deferred id may be a listed ledger's own copy, replaced by a rewrite: ledgers
            # leave the list by `doomed` only
            gone, due_set = set(doomed), set(due)
            offloaded = {li.ledger_id: li.offload for li in self._md.ledgers if li.ledger_id in gone and li.offload}
            rewritten = [li.data for li in self._md.ledgers if li.ledger_id in gone and li.data is not None]

            def mutate(md: LogMetadata) -> None:
                md.ledgers = [li for li in md.ledgers if li.ledger_id not in gone]
                md.deferred = [d for d in md.deferred if d[0] not in gone and d[0] not in due_set]

            await self._cas(mutate)
            doomed += due
        for lid in rewritten:
            await best_effort(self.client.delete(lid), f"delete rewrite ledger {lid}")
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
