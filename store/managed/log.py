"""The segmented log (managed ledger): one owner appends to a chain of ledgers.

Opening as owner recovers (fences) and closes the previous tail ledger, then starts a new one
and compare-and-sets the metadata; losing any compare-and-set, or finding our ledger fenced,
means another owner took over and this handle stops writing (OwnershipLostError). Rollover
closes the current ledger before creating the next, so only the last ledger is ever open.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from store.clock import SYSTEM_CLOCK, Clock
from store.ledger.errors import LedgerFencedError
from store.managed.cache import EntryCache, default_cache
from store.managed.config import LogConfig, should_roll
from store.managed.cursor import ManagedCursor
from store.managed.errors import (
    LogClosedError,
    LogWriteError,
    ManagedLogError,
    NoSuchCursorError,
    OwnershipLostError,
)
from store.managed.ledgers import LedgerClientLike, WriterLike
from store.managed.log_reads import DEFAULT_MAX_READ_BYTES
from store.managed.log_retention import OffloadConflictError
from store.managed.log_rollover import LogRollover
from store.managed.metadata import LedgerInfo, LogMetadata, OffloadInfo
from store.managed.names import cursor_path, cursors_path, decode_name, log_path
from store.managed.ownership import best_effort, delete_log, now_ms, take_ownership
from store.managed.position import Position
from store.managed.reader import OffloadedSource
from store.managed.reads import BookieReads
from store.meta.api import BadVersionError, MetaStore, NoNodeError

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_MAX_READ_BYTES", "ManagedLog", "OffloadConflictError", "OffloaderLike", "delete_log"]


class OffloaderLike(Protocol):
    """The owner-side offload driver (store/offload/offloader.py's Offloader)."""

    @property
    def tier(self) -> OffloadedSource: ...

    def schedule(self, ml: ManagedLog) -> None: ...

    def attach(self, ml: ManagedLog) -> None: ...

    async def delete_objects(self, info: OffloadInfo) -> None: ...


class ManagedLog(LogRollover):
    """An owned segmented log. Create with `await ManagedLog.open(...)`."""

    offloader: OffloaderLike | None

    def __init__(
        self,
        meta: MetaStore,
        client: LedgerClientLike,
        name: str,
        md: LogMetadata,
        config: LogConfig,
        writer: WriterLike,
        cache: EntryCache,
        new_ledger_props: Callable[[], dict[str, str]] | None,
        clock: Clock = SYSTEM_CLOCK,
        offloader: OffloaderLike | None = None,
    ) -> None:
        self.meta = meta
        self._clock = clock  # the age of the current ledger, and the timer that rolls it
        self.offloader = offloader
        self._offloaded = offloader.tier if offloader is not None else None
        self.client = client
        self.name = name
        self.config = config
        self._path = log_path(name)
        self._md = md
        self._ids = [li.ledger_id for li in md.ledgers]
        self._writer: WriterLike | None = writer
        self._cache = cache
        self._token = cache.new_token()
        self._new_ledger_props = new_ledger_props
        self._reads = BookieReads(client, cache=cache, token=self._token)
        self._meta_lock = asyncio.Lock()
        self._cursors: dict[str, ManagedCursor] = {}
        self._failure: ManagedLogError | None = None
        self._closed = False
        self._lost_listeners: list[Callable[[ManagedLogError], None]] = []
        # Current ledger: appends scheduled so far, its start, and appends queued during a roll.
        self._cur_entries = 0
        self._cur_bytes = 0
        self._cur_started = self._clock.monotonic()
        self._cur_first_ms = 0
        self._cur_last_ms = 0
        self._acked_since_tick = False  # the age timer stamps _cur_last_ms (1 s precision)
        self._rolling: asyncio.Task[None] | None = None
        self._queued: deque[tuple[bytes | memoryview, asyncio.Future[Position]]] = deque()
        self._inflight: set[asyncio.Future[Position]] = set()  # submitted, not settled yet (flush)
        self._tail_waiters: list[asyncio.Future[None]] = []
        self._trim_task: asyncio.Task[Any] | None = None
        self._verify_task: asyncio.Task[None] | None = None
        self._last_confirmed = Position(writer.ledger_id, -1)
        for li in reversed(md.ledgers[:-1]):
            if li.entries > 0:
                self._last_confirmed = Position(li.ledger_id, li.entries - 1)
                break
        self._timer = asyncio.get_running_loop().create_task(self._age_timer())

    # ---- opening -----------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        meta: MetaStore,
        client: LedgerClientLike,
        name: str,
        *,
        config: LogConfig | None = None,
        cache: EntryCache | None = None,
        create: bool = True,
        new_ledger_props: Callable[[], dict[str, str]] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        offloader: OffloaderLike | None = None,
    ) -> ManagedLog:
        """Take ownership: fence and close the previous tail ledger, start a new ledger, and
        recover every durable cursor. `config` (if given) replaces the stored config.
        `new_ledger_props` is called whenever a new ledger starts (at open and at each
        rollover, before any entry goes to it): its result becomes that ledger's props.
        `offloader` copies closed ledgers to an offload tier by the config's policy (run after
        each rollover and on the age timer, off the append path) and serves them back."""
        md, cfg, writer = await take_ownership(meta, client, name, config, create, new_ledger_props)
        self = cls(
            meta,
            client,
            name,
            md,
            cfg,
            writer,
            cache if cache is not None else default_cache(),
            new_ledger_props,
            clock,
            offloader,
        )
        try:
            await self._recover_cursors()
        except BaseException:
            await self.close()
            raise
        if offloader is not None:
            offloader.attach(self)
        return self

    async def _recover_cursors(self) -> None:
        for seg in await self.meta.children(cursors_path(self.name)):
            cname = decode_name(seg)
            self._cursors[cname] = await ManagedCursor.recover(self, cname)

    # ---- state ------------------------------------------------------------------------

    @property
    def last_confirmed(self) -> Position:
        """The last acknowledged entry ((current ledger, -1) when the log is empty)."""
        return self._last_confirmed

    @property
    def current_ledger_id(self) -> int:
        return self._ids[-1]

    @property
    def ledgers(self) -> list[LedgerInfo]:
        """Copies of the ledger list; the last one is the open ledger, its counts live."""
        out = [li.copy() for li in self._md.ledgers]
        out[-1].entries = self._confirmed_in_current()
        out[-1].size = self._writer.length if self._writer is not None else out[-1].size
        return out

    @property
    def properties(self) -> dict[str, str]:
        return dict(self._md.props)

    @property
    def fenced(self) -> bool:
        return isinstance(self._failure, OwnershipLostError)

    @property
    def active(self) -> bool:
        """Still owned and open (background work stops once not)."""
        return self._failure is None and not self._closed

    def add_ownership_listener(self, cb: Callable[[ManagedLogError], None]) -> None:
        """Called once when this handle stops writing (ownership lost or write failure)."""
        self._lost_listeners.append(cb)

    def total_size(self) -> int:
        return sum(li.size for li in self._md.ledgers[:-1]) + (self._writer.length if self._writer else 0)

    def _check_writable(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise LogClosedError(self.name)

    def _fail(self, exc: ManagedLogError) -> None:
        if self._failure is not None:
            return
        self._failure = exc
        log.warning("log %s stops writing: %s", self.name, exc)
        while self._queued:
            _, fut = self._queued.popleft()
            if not fut.done():
                fut.set_exception(exc)
        self._notify()
        if isinstance(exc, LogWriteError) and self._writer is not None:
            # e.g. an ensemble change that failed after a pause: find out whether it was a takeover
            self._verify_task = asyncio.get_running_loop().create_task(
                self._verify_ownership(self._writer.ledger_id)
            )
            return
        self._tell_listeners(exc)

    def _tell_listeners(self, exc: ManagedLogError) -> None:
        for cb in self._lost_listeners:
            with contextlib.suppress(Exception):
                cb(exc)

    async def _verify_ownership(self, ledger_id: int) -> None:
        lost = False
        try:
            _, stat = await self.meta.get(self._path)
            lost = stat.version != self._md.version
            if not lost:
                lost = (await self.client.metadata(ledger_id)).state != "open"
        except NoNodeError:
            lost = True
        except Exception as e:
            log.info("log %s: could not verify ownership: %r", self.name, e)
        if lost:
            self._failure = OwnershipLostError(
                f"log {self.name!r}: taken over by another owner ({self._failure})"
            )
        assert self._failure is not None
        self._tell_listeners(self._failure)

    def _translate(self, exc: BaseException) -> ManagedLogError:
        if isinstance(exc, ManagedLogError):
            return exc
        if isinstance(exc, LedgerFencedError):
            return OwnershipLostError(f"log {self.name!r}: ledger fenced by another owner")
        return LogWriteError(f"log {self.name!r}: {exc!r}")

    async def _cas(self, mutate: Callable[[LogMetadata], None], *, closing: bool = False) -> None:
        """Apply `mutate` to a copy of the metadata and compare-and-set it (caller holds the lock)."""
        if not closing:
            self._check_writable()
        new = self._md.copy()
        mutate(new)
        try:
            stat = await self.meta.set(self._path, new.to_bytes(), self._md.version)
        except (BadVersionError, NoNodeError):
            err = OwnershipLostError(f"log {self.name!r}: metadata changed by another owner")
            self._fail(err)
            raise err from None
        new.version = stat.version
        self._md = new
        self._ids = [li.ledger_id for li in new.ledgers]

    # ---- appends and rollover -------------------------------------------------------------

    def append(self, payload: bytes | memoryview) -> asyncio.Future[Position]:
        """Schedule an append; the future resolves to its position once the ack quorum has it
        (and every earlier entry). Appends pipeline: call many times without awaiting."""
        out: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        if self._failure is not None or self._closed:
            out.set_exception(self._failure or LogClosedError(self.name))
            return out
        if self._rolling is not None or self._queued:
            self._queued.append((payload, out))
            return out
        self._submit(payload, out)
        return out

    def _submit(self, payload: bytes | memoryview, out: asyncio.Future[Position]) -> None:
        w = self._writer
        assert w is not None
        try:
            fut = w.append(payload)
        except Exception as e:
            err = self._translate(e)
            self._fail(err)
            out.set_exception(err)
            return
        self._inflight.add(out)
        out.add_done_callback(self._inflight.discard)
        if self._cur_entries == 0:
            self._cur_first_ms = now_ms()
        self._cur_entries += 1
        self._cur_bytes += len(payload)
        fut.add_done_callback(functools.partial(self._on_added, w.ledger_id, payload, out))
        # Age is the timer's job; count and size are checked here, cheaply.
        cfg = self.config
        if (self._cur_entries >= cfg.max_entries or self._cur_bytes >= cfg.max_bytes) and should_roll(
            cfg, self._cur_entries, self._cur_bytes, self._clock.monotonic() - self._cur_started
        ):
            self._start_roll()

    def _on_added(
        self, lid: int, payload: bytes | memoryview, out: asyncio.Future[Position], f: asyncio.Future[int]
    ) -> None:
        try:
            eid = f.result()
        except BaseException as exc:
            err = (
                self._translate(exc)
                if isinstance(exc, Exception)
                else LogWriteError(f"log {self.name!r}: {exc!r}")
            )
            self._fail(err)
            if not out.done():
                out.set_exception(err)
            return
        pos = Position(lid, eid)
        self._cache.insert(self._token, lid, eid, payload)
        self._last_confirmed = pos
        self._acked_since_tick = True
        if not out.done():
            out.set_result(pos)
        if self._tail_waiters:
            self._notify()

    def schedule_offload(self) -> None:
        if self.offloader is not None and self._failure is None and not self._closed:
            self.offloader.schedule(self)

    async def flush(self) -> None:
        """Wait until every append scheduled so far is settled (and any rollover is done)."""
        while self._rolling is not None:
            await asyncio.shield(self._rolling)
        # the appends already sent to the bookies too: a caller persisting state after a flush
        # (a partition's close) must see every confirmation first
        pending = [*(f for _, f in self._queued), *self._inflight]
        if pending:
            with contextlib.suppress(Exception):
                await asyncio.gather(*pending, return_exceptions=True)

    # ---- cursors ----------------------------------------------------------------------

    @property
    def cursors(self) -> dict[str, ManagedCursor]:
        return dict(self._cursors)

    async def open_cursor(self, name: str, start: Position | str = "latest") -> ManagedCursor:
        """Open (or create) a durable cursor. A new cursor starts at `start`: "latest" (after
        the last confirmed entry), "earliest", or the first position to deliver."""
        self._check_writable()
        cur = self._cursors.get(name)
        if cur is not None:
            return cur
        if start == "latest":
            md = self._last_confirmed
        elif start == "earliest":
            s = self.start
            md = Position(s.ledger_id, s.entry_id - 1)
        elif isinstance(start, Position):
            md = Position(start.ledger_id, start.entry_id - 1)
        else:
            raise ValueError(f"bad cursor start {start!r}")
        cur = await ManagedCursor.create(self, name, md)
        self._cursors[name] = cur
        return cur

    async def delete_cursor(self, name: str) -> None:
        cur = self._cursors.pop(name, None)
        if cur is None:
            raise NoSuchCursorError(name)
        await cur.delete()
        self.schedule_trim()

    def cursor_path(self, name: str) -> str:
        return cursor_path(self.name, name)

    def cursor_lost(self, exc: ManagedLogError) -> None:
        self._fail(exc)

    def slowest_cursor(self) -> Position | None:
        if not self._cursors:
            return None
        return min(c.mark_delete for c in self._cursors.values())

    # ---- properties -------------------------------------------------------------------

    async def set_properties(self, props: dict[str, str | None]) -> None:
        """Update the log's properties (None removes a key), compare-and-set."""

        def mutate(md: LogMetadata) -> None:
            for k, v in props.items():
                if v is None:
                    md.props.pop(k, None)
                else:
                    md.props[k] = v

        async with self._meta_lock:
            await self._cas(mutate)

    async def set_ledger_properties(self, ledger_id: int, props: dict[str, str | None]) -> None:
        """Update one ledger's opaque property map (None removes a key)."""

        def mutate(md: LogMetadata) -> None:
            for li in md.ledgers:
                if li.ledger_id == ledger_id:
                    for k, v in props.items():
                        if v is None:
                            li.props.pop(k, None)
                        else:
                            li.props[k] = v
                    return
            raise KeyError(f"ledger {ledger_id} is not in log {self.name!r}")

        async with self._meta_lock:
            await self._cas(mutate)

    # ---- truncation (DeleteRecords) ------------------------------------------------------

    async def truncate_before(self, pos: Position) -> list[int]:
        """Logically delete everything before `pos` (Kafka DeleteRecords): reads start there,
        cursors behind it move up, and wholly earlier ledgers are deleted. Returns their ids."""
        end = self.next_position(self._last_confirmed)
        pos = min(pos, end)
        if self._md.start is None or pos > self._md.start:
            async with self._meta_lock:
                await self._cas(lambda md: setattr(md, "start", pos))
        deleted = await self.trim()
        before = Position(pos.ledger_id, pos.entry_id - 1)
        for cur in list(self._cursors.values()):
            if cur.mark_delete < before:
                await cur.mark_delete_to(before)
        return deleted

    # ---- closing and deleting ------------------------------------------------------------

    async def close(self) -> None:
        """Close cleanly: settle appends, close the current ledger and record it, persist and
        close cursors. The log can then be opened by another owner without waiting on recovery."""
        if self._closed:
            return
        with contextlib.suppress(Exception):
            await self.flush()
        self._closed = True
        self._timer.cancel()
        if self._trim_task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self._trim_task
        for cur in list(self._cursors.values()):
            with contextlib.suppress(Exception):
                await cur.close()
        w, self._writer = self._writer, None
        if w is not None and self._failure is None:
            try:
                await w.close()
                self._stamp_last()
                first_ms, last_ms = self._cur_first_ms, self._cur_last_ms

                def mutate(md: LogMetadata) -> None:
                    cur = md.ledgers[-1]
                    cur.entries, cur.size, cur.closed = w.last_add_confirmed + 1, w.length, True
                    cur.first_ms, cur.last_ms = first_ms, last_ms

                async with self._meta_lock:
                    await self._cas(mutate, closing=True)
            except Exception as e:
                log.info("log %s: close did not record the last ledger: %r", self.name, e)
        self._notify()
        self._cache.invalidate(self._token)
        await self._reads.close()

    async def delete(self) -> None:
        """Delete the log: its ledgers, its cursors (and their ledgers) and its metadata."""
        ids = list(self._ids)
        offloaded = [li.offload for li in self._md.ledgers if li.offload is not None]
        cursors = list(self._cursors.values())
        self._fail(LogClosedError(f"log {self.name!r} deleted"))
        self._closed = True
        self._timer.cancel()
        w, self._writer = self._writer, None
        if w is not None:
            await best_effort(w.close(), "close writer")
        for cur in cursors:
            await cur.delete()
        self._cursors.clear()
        await self._reads.close()
        self._cache.invalidate(self._token)
        await delete_log(self.meta, self.client, self.name, ledger_ids=ids)
        if self.offloader is not None:  # otherwise `quire admin offload cleanup` removes them
            for info in offloaded:
                await best_effort(self.offloader.delete_objects(info), f"delete offloaded {info.data}")
