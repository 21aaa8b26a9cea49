"""Replication workers: take under-replicated ledgers one at a time (an ephemeral lock node per
ledger, so workers in many bookies and `quire recovery` processes never work on the same one),
re-replicate them and remove their marks.

A mark is removed with its version: if the auditor added a bookie to it meanwhile, the ledger is
taken again. Counters (bytes and entries re-replicated, ledgers done, how long the last ledger
took from loss to full replication) go to marks' stats node for `quire admin recovery status`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from store import layout
from store.bookie.errors import BookieError
from store.clock import SYSTEM_CLOCK, Clock
from store.ledger.env import LedgerEnv
from store.ledger.errors import LedgerError
from store.ledger.metadata import LedgerMetadata
from store.meta.api import MetaStore, NodeExistsError, NoNodeError
from store.recovery import marks
from store.recovery.metrics import (
    BYTES_REREPLICATED,
    ENTRIES_REREPLICATED,
    RECOVERY_METRICS,
    TIME_TO_REPLICATION,
)
from store.recovery.replicate import ReplicationError, rereplicate

log = logging.getLogger(__name__)


async def locked_ledgers(meta: MetaStore) -> list[int]:
    try:
        return [int(n) for n in await meta.children(layout.RECOVERY_LOCKS)]
    except NoNodeError:
        return []


class ReplicationWorker:
    def __init__(
        self,
        env: LedgerEnv,
        worker_id: str,
        *,
        interval_s: float = 2.0,
        before_cas: Callable[[LedgerMetadata], Awaitable[None]] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.env = env
        self.meta = env.meta
        self.worker_id = worker_id
        self.interval_s = interval_s  # how often the marks are read (polled: see Auditor's poll_s)
        self.before_cas = before_cas
        self.clock = clock
        RECOVERY_METRICS.register()

    async def run(self) -> None:
        while True:
            await self.run_once()
            await self.clock.sleep(self.interval_s)

    async def run_once(self) -> int:
        """One pass over the marked ledgers; returns how many were fully re-replicated."""
        done = 0
        for lid in await marks.marked_ledgers(self.meta):
            if await self.process(lid):
                done += 1
        return done

    async def process(self, ledger_id: int) -> bool:
        """Lock, re-replicate and unmark one ledger; False if locked elsewhere or not finished."""
        lock = layout.recovery_lock(ledger_id)
        try:
            await self.meta.create(lock, self.worker_id.encode(), ephemeral=True, make_parents=True)
        except NodeExistsError:
            return False
        try:
            mark = await marks.get_mark(self.meta, ledger_id)
            if mark is None:
                return False
            excluded = await marks.decommissioned(self.meta)
            try:
                out = await rereplicate(
                    self.env, ledger_id, set(mark.bookies), excluded=excluded, before_cas=self.before_cas
                )
            except (LedgerError, BookieError, ReplicationError, OSError, TimeoutError) as e:
                log.warning("ledger %d: re-replication failed, will retry: %s", ledger_id, e)
                return False
            took_s = max(int(self.clock.time() * 1000) - mark.since_ms, 0) / 1000
            BYTES_REREPLICATED.inc(out.bytes)
            ENTRIES_REREPLICATED.inc(out.entries)
            if out.entries or out.done:
                await marks.update_stats(
                    self.meta,
                    add={"bytes_rereplicated": out.bytes, "entries_rereplicated": out.entries,
                         "ledgers_rereplicated": int(out.done)},
                    put={"last_replication_s": took_s} if out.done else None,
                )
            if not out.done:
                log.info("ledger %d: re-replication deferred: %s", ledger_id, out.deferred)
                return False
            if not await marks.unmark(self.meta, mark):
                return False  # marked again meanwhile: another pass
            TIME_TO_REPLICATION.observe(took_s)
            log.info("ledger %d fully replicated (%d entries, %d bytes copied, %.1f s after loss)",
                     ledger_id, out.entries, out.bytes, took_s,
                     extra={"fields": {"event": "ledger_replicated", "ledger": ledger_id, "bytes": out.bytes,
                                       "took_s": took_s}})
            return True
        finally:
            try:
                await self.meta.delete(lock)
            except NoNodeError:
                pass
