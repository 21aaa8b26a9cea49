"""LedgerClient: create, open (with or without recovery), delete ledgers, read their metadata."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref

from store import layout
from store.clock import SYSTEM_CLOCK, Clock
from store.ledger.env import BookieConns, LedgerEnv
from store.ledger.errors import NoSuchLedgerError
from store.ledger.fetch import bookie_lac
from store.ledger.metadata import OPEN, LedgerMetadata
from store.ledger.metrics import LEDGER_METRICS
from store.ledger.placement import PlacementPolicy, available_bookies, default_placement
from store.ledger.reader import LedgerReader
from store.ledger.recovery import recover
from store.ledger.writer import LedgerWriter
from store.meta.api import MetaStore, NodeExistsError, NoNodeError
from store.recovery import marks
from store.tasks import within

log = logging.getLogger(__name__)


class LedgerClient:
    def __init__(
        self,
        meta: MetaStore,
        *,
        placement: PlacementPolicy | None = None,
        add_timeout: float = 2.0,
        read_timeout: float = 5.0,
        speculative_read_timeout: float = 0.2,
        bookies: BookieConns | None = None,
        background_reads: bool = False,
        explicit_lac_interval: float = 0.1,
        lost_poll_s: float = 5.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """`bookies` overrides the connection pool (default: a store.bookie.client.BookiePool
        owned, and closed, by this client). background_reads: the owned pool's range reads ask
        the bookies for low priority (store.bookie.background_reads), for a client that only
        reads, such as a scan's: the bookies hold its other responses behind each range.
        explicit_lac_interval: a writer idle this long tells its bookies its LAC (WRITE_LAC),
        so readers see its last entry; 0 (for now the default, as tests assert the old
        one-behind LAC) disables; 0.1 is the intended value."""
        self.explicit_lac_interval = explicit_lac_interval
        self.lost_poll_s = lost_poll_s  # how often open writers look for bookies auto-recovery lost
        self._writers: weakref.WeakValueDictionary[int, LedgerWriter] = weakref.WeakValueDictionary()
        self._lost_task: asyncio.Task[None] | None = None
        LEDGER_METRICS.register()
        self._owned_pool = None
        if bookies is None:
            from store.bookie.client import BookiePool

            self._owned_pool = BookiePool(background_reads=background_reads)
            bookies = self._owned_pool
        self._env = LedgerEnv(
            meta=meta,
            bookies=bookies,
            placement=placement or default_placement(),
            add_timeout=add_timeout,
            read_timeout=read_timeout,
            speculative_read_timeout=speculative_read_timeout,
            clock=clock,
        )

    async def create(
        self,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        *,
        properties: dict[str, str] | None = None,
    ) -> LedgerWriter:
        env = self._env
        if not ensemble_size >= write_quorum >= ack_quorum >= 1:
            raise ValueError(f"need E >= WQ >= AQ >= 1, got {ensemble_size}, {write_quorum}, {ack_quorum}")
        ensemble = env.placement.new_ensemble(ensemble_size, write_quorum, await available_bookies(env.meta))
        while True:
            ledger_id = await self._allocate_id()
            md = LedgerMetadata(
                ledger_id=ledger_id,
                state=OPEN,
                ensemble_size=ensemble_size,
                write_quorum=write_quorum,
                ack_quorum=ack_quorum,
                ensembles=[(0, ensemble)],
                properties=dict(properties or {}),
                ctime_ms=int(time.time() * 1000),
            )
            try:
                await env.meta.create(layout.ledger(ledger_id), md.to_bytes(), make_parents=True)
            except NodeExistsError:
                log.warning("ledger id %d already taken, allocating another", ledger_id)
                continue
            w = LedgerWriter(env, md.copy(version=0), explicit_lac_interval=self.explicit_lac_interval)
            self._writers[ledger_id] = w
            if self._lost_task is None and self.lost_poll_s > 0:
                self._lost_task = asyncio.get_running_loop().create_task(self._replace_lost_bookies())
            return w

    async def _replace_lost_bookies(self) -> None:
        """An open ledger's last fragment is its writer's to change (auto-recovery moves only the
        confirmed part). A writer learns of a dead bookie from a failed add, so an idle one would
        keep a lost bookie, and its ledger stay marked under-replicated, for as long as it is
        idle: every lost_poll_s, writers of marked ledgers replace the bookies marked lost (or
        decommissioned) that are not registered."""
        meta = self._env.meta
        while True:
            await self._env.clock.sleep(self.lost_poll_s)
            try:
                mine = {lid: w for lid in await marks.marked_ledgers(meta) if (w := self._writers.get(lid)) is not None}
                if not mine:
                    continue
                alive = {b.address for b in await available_bookies(meta) if not b.read_only}
                for lid, w in mine.items():
                    m = await marks.get_mark(meta, lid)
                    if m is None:
                        continue
                    lost = {a for a, why in m.bookies.items()
                            if why.get("reason") in (marks.LOST, marks.DECOMMISSION) and a not in alive}
                    if lost and w.replace_bookies(lost):
                        log.info("ledger %d: replacing bookies auto-recovery lost: %s", lid, sorted(lost))
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("looking for lost bookies of open ledgers failed: %r", e)

    async def _allocate_id(self) -> int:
        """ZooKeeper's sequential-node counter as the id generator (BookKeeper's ZkLedgerIdGenerator)."""
        path = await self._env.meta.create(
            layout.LEDGER_ID_GEN + "/id-", ephemeral=True, sequential=True, make_parents=True
        )
        try:
            await self._env.meta.delete(path)
        except NoNodeError:
            pass
        return int(path.rsplit("-", 1)[1])

    async def open(self, ledger_id: int, *, recovery: bool = False) -> LedgerReader:
        """recovery=True fences and closes the ledger first (its writer is finished for good);
        recovery=False reads an open ledger up to the LAC the bookies know."""
        if recovery:
            md = await recover(self._env, ledger_id)
            return LedgerReader(self._env, md, md.last_entry_id)
        md = await self._env.read_metadata(ledger_id)
        if md.is_closed:
            return LedgerReader(self._env, md, md.last_entry_id)
        return LedgerReader(self._env, md, await bookie_lac(self._env, md))

    async def delete(self, ledger_id: int) -> None:
        """Delete the ledger's metadata, then its copies on every bookie that ever held it (best
        effort). Metadata first (as BookKeeper): a delete cut short then leaves at worst unnamed
        copies on bookies, never metadata naming copies that are gone, which auto-recovery's
        sampled check marks and no worker can ever refill (seen in the fault run: a cursor
        ledger's bookie copies deleted, its metadata delete lost to a ZooKeeper outage)."""
        md = await self._env.read_metadata(ledger_id)
        try:
            await self._env.meta.delete(layout.ledger(ledger_id))
        except NoNodeError:
            raise NoSuchLedgerError(f"ledger {ledger_id} does not exist") from None

        async def one(addr: str) -> None:
            await within(
                self._env.bookies.get(addr).delete_ledger(ledger_id), self._env.read_timeout
            )

        results = await asyncio.gather(*(one(a) for a in sorted(md.bookies())), return_exceptions=True)
        for addr, r in zip(sorted(md.bookies()), results):
            if isinstance(r, BaseException):
                log.warning("ledger %d: delete on bookie %s failed: %r", ledger_id, addr, r)

    @property
    def env(self) -> LedgerEnv:
        """What ledger handles share (auto-recovery works on ledgers through it)."""
        return self._env

    async def metadata(self, ledger_id: int) -> LedgerMetadata:
        return await self._env.read_metadata(ledger_id)

    async def close(self) -> None:
        if self._lost_task is not None:
            self._lost_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._lost_task
            self._lost_task = None
        if self._owned_pool is not None:
            await self._owned_pool.close_all()
