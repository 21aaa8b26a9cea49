"""The owner-side offload driver of segmented logs.

Per ledger: copy it to the tier and verify the copy (Tier.copy_ledger), then switch the log's
metadata to the offloaded location with one compare-and-set (ManagedLog.record_offload), then,
after quire.offload.deletion.lag.ms, delete the bookie copy. A crash before the switch leaves
the ledger on bookies with unnamed objects (removed by `cleanup`); after it, the ledger is
offloaded, its bookie copy deleted by a later pass. Runs in the background of the owner,
never on the append path, retrying with backoff while the tier is unreachable."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from store.layout import MANAGED_LOGS, offload_request
from store.managed.log import ManagedLog, OffloadConflictError
from store.managed.metadata import LogMetadata, OffloadInfo
from store.managed.names import decode_name, encode_name
from store.meta.api import MetaError, MetaStore, NodeExistsError, NoNodeError, WatchEvent
from store.offload.backend import now_ms
from store.offload.crash import crash_point
from store.offload.metrics import OFFLOAD_FAILURES, OFFLOAD_METRICS, OFFLOADED_BYTES, OFFLOADERS
from store.offload.policy import bookie_copies_due, to_offload
from store.offload.tier import Tier
from store.retry import Backoff, Retry

log = logging.getLogger(__name__)

DEFAULT_DELETION_LAG_MS = 4 * 3600 * 1000  # Pulsar's managedLedgerOffloadDeletionLagMs
DEFAULT_CLEANUP_MARGIN_MS = 3600 * 1000
DEFAULT_MAX_CONCURRENT_LEDGERS = 2
RETRY_BACKOFF = Backoff(0.5, 30.0)  # a tier that is down: retried, never given up


@dataclass
class PassResult:
    offloaded: list[int] = field(default_factory=list)
    bytes: int = 0
    bookie_deleted: list[int] = field(default_factory=list)


class Offloader:
    def __init__(
        self,
        tier: Tier,
        *,
        deletion_lag_ms: int = DEFAULT_DELETION_LAG_MS,
        max_concurrent_ledgers: int = DEFAULT_MAX_CONCURRENT_LEDGERS,
    ) -> None:
        self._tier = tier
        self.deletion_lag_ms = deletion_lag_ms
        self.max_concurrent_ledgers = max(1, max_concurrent_ledgers)  # per log, in one pass
        self._running: dict[int, asyncio.Task[None]] = {}  # id(ml) -> background pass
        self._again: set[int] = set()
        self._forced: set[int] = set()
        self._watchers: set[asyncio.Task[None]] = set()  # logs with an on-demand request (quire admin offload trigger)
        self._changed = asyncio.Condition()
        self.failures = 0  # consecutive failed background passes (all logs)
        self.total_failures = 0
        self.offloaded_bytes = 0
        self._pending: dict[int, int] = {}  # id(log) -> bytes the policy selected at its last pass
        OFFLOAD_METRICS.register()
        OFFLOADERS.track(self)

    @property
    def pending_bytes(self) -> int:
        """Offload lag: bytes of closed ledgers selected for offload and not offloaded yet."""
        return sum(self._pending.values())

    @property
    def tier(self) -> Tier:
        return self._tier

    async def delete_objects(self, info: OffloadInfo) -> None:
        await self._tier.delete(info)

    # ---- background ---------------------------------------------------------------------

    def attach(self, ml: ManagedLog) -> None:
        """Serve on-demand requests for `ml` (a request node, watched, written by `request`)."""
        loop = asyncio.get_running_loop()
        path = offload_request(encode_name(ml.name))

        def fired(_: WatchEvent) -> None:
            loop.call_soon_threadsafe(lambda: self._watchers.add(loop.create_task(check())))

        async def check() -> None:
            if not ml.active:
                return
            try:
                if await ml.meta.exists(path, watch=fired) is not None:
                    self.schedule(ml, force=True)
            except MetaError as e:
                log.info("log %s: cannot watch offload requests: %r", ml.name, e)

        self._watchers.add(loop.create_task(check()))
        self._watchers = {t for t in self._watchers if not t.done()}

    def schedule(self, ml: ManagedLog, *, force: bool = False) -> None:
        """Run a policy pass for `ml` in the background (coalesced while one runs); `force`:
        offload every closed ledger (an on-demand request)."""
        key = id(ml)
        if force:
            self._forced.add(key)
        t = self._running.get(key)
        if t is not None and not t.done():
            self._again.add(key)
            return
        self._running[key] = asyncio.get_running_loop().create_task(self._background(ml))

    async def _background(self, ml: ManagedLog) -> None:
        key = id(ml)
        retry = Retry(RETRY_BACKOFF)
        try:
            while ml.active:
                self._again.discard(key)
                force = key in self._forced
                try:
                    await self.run(ml, force=force)
                    if force:
                        self._forced.discard(key)
                        with contextlib.suppress(NoNodeError):
                            await ml.meta.delete(offload_request(encode_name(ml.name)))
                    self.failures = 0
                    retry.reset()
                    await self._notify()
                except OffloadConflictError as e:
                    log.info("log %s: offload conflict: %s", ml.name, e)
                except Exception as e:
                    if not ml.active:
                        return
                    self.failures += 1
                    self.total_failures += 1
                    OFFLOAD_FAILURES.labels(self._tier.driver).inc()
                    await self._notify()
                    log.warning("log %s: offload failed, retrying: %r", ml.name, e)
                    await retry.pause()
                    continue
                if key not in self._again:
                    return
        finally:
            self._running.pop(key, None)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, pred: Callable[[], bool]) -> None:
        """Until pred() holds, checked after every background pass (tests, admin)."""
        async with self._changed:
            await self._changed.wait_for(pred)

    async def wait_idle(self, ml: ManagedLog) -> None:
        """Until no background pass runs for `ml` (tests, admin)."""
        while (t := self._running.get(id(ml))) is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(t)

    async def close(self) -> None:
        OFFLOADERS.untrack(self)
        for t in list(self._watchers):
            t.cancel()
        for t in list(self._running.values()):
            t.cancel()
            with contextlib.suppress(BaseException):
                await t

    # ---- one pass -----------------------------------------------------------------------

    async def run(
        self, ml: ManagedLog, *, force: bool = False, progress: Callable[[int], None] | None = None
    ) -> PassResult:
        """Offload what the policy (or `force`: every closed ledger) says, up to
        max_concurrent_ledgers at a time, then delete the bookie copies past the deletion lag.

        Concurrent switches are safe: each is its own compare-and-set, applied under the log's
        metadata lock to the latest metadata (ManagedLog.record_offload), so none loses another's
        update. A failed ledger never cancels the others (a switch cancelled after its write
        reached the store would delete objects the metadata names): all finish, then the first
        error is raised."""
        out = PassResult()
        chosen = to_offload(ml.ledgers, ml.config, now_ms(), force=force)
        sizes = {li.ledger_id: li.size for li in ml.ledgers}
        self._pending[id(ml)] = sum(sizes[lid] for lid in chosen)
        slots = asyncio.Semaphore(self.max_concurrent_ledgers)
        done: dict[int, OffloadInfo] = {}

        async def one(lid: int) -> None:
            async with slots:
                info = await self.offload_ledger(ml, lid, progress)
                self._pending[id(ml)] -= sizes[lid]
                if info is not None:
                    done[lid] = info

        results = await asyncio.gather(*(one(lid) for lid in chosen), return_exceptions=True)
        for lid in chosen:  # in ledger order, whatever order they finished in
            if lid in done:
                out.offloaded.append(lid)
                out.bytes += done[lid].size
        for r in results:
            if isinstance(r, BaseException):
                raise r
        for lid in bookie_copies_due(ml.ledgers, self.deletion_lag_ms, now_ms()):
            await ml.delete_bookie_copy(lid, after_delete=lambda: crash_point("delete"))
            out.bookie_deleted.append(lid)
        return out

    async def offload_ledger(
        self, ml: ManagedLog, ledger_id: int, progress: Callable[[int], None] | None = None
    ) -> OffloadInfo | None:
        """Copy, verify, switch; None if another attempt or retention won meanwhile."""
        li = next((x for x in ml.ledgers if x.ledger_id == ledger_id), None)
        data_id = li.data_id if li is not None else ledger_id  # a compacted ledger's rewrite
        info = await self._tier.copy_ledger(ml.client, data_id, progress)
        crash_point("switch")
        try:
            await ml.record_offload(ledger_id, info)
        except BaseException as e:
            with contextlib.suppress(Exception):
                await self._tier.delete(info)
            if isinstance(e, OffloadConflictError):
                return None
            raise
        self.offloaded_bytes += info.size
        OFFLOADED_BYTES.labels(info.driver).inc(info.size)
        log.info("log %s: ledger %d offloaded to %s (%d bytes)", ml.name, ledger_id, info.driver, info.size,
                 extra={"fields": {"event": "ledger_offloaded", "log": ml.name, "ledger": ledger_id,
                                   "driver": info.driver, "bytes": info.size}})
        return info


async def request(meta: MetaStore, log_name: str) -> str:
    """Ask the owner of a segmented log to offload every closed ledger now; returns the request
    node's path, deleted by the owner once done."""
    path = offload_request(encode_name(log_name))
    with contextlib.suppress(NodeExistsError):
        await meta.create(path, b"", make_parents=True)
    return path


async def all_log_metadata(meta: MetaStore) -> dict[str, LogMetadata]:
    """Every segmented log's metadata, by log name."""
    out: dict[str, LogMetadata] = {}
    try:
        segs = await meta.children(MANAGED_LOGS)
    except NoNodeError:
        return out
    for seg in segs:
        with contextlib.suppress(NoNodeError, ValueError):
            data, stat = await meta.get(f"{MANAGED_LOGS}/{seg}")
            out[decode_name(seg)] = LogMetadata.from_bytes(data, stat.version)
    return out


async def cleanup(meta: MetaStore, tier: Tier, margin_ms: int = DEFAULT_CLEANUP_MARGIN_MS) -> list[str]:
    """Delete the tier's objects that no segmented log's metadata names and that are older than
    margin_ms (an offload still copying has not named its objects yet). Returns their keys."""
    referenced: set[str] = set()
    for md in (await all_log_metadata(meta)).values():
        for li in md.ledgers:
            if li.offload is not None:
                referenced.update((li.offload.data, li.offload.index))
    return await tier.cleanup(referenced, margin_ms)
