"""Durable cursors: a mark-delete position plus the individually acknowledged ranges after it.

Updates batch into one record per write on the cursor's own ledger (deltas, with a full
snapshot whenever the deltas since the last one outgrow it); the ledger is replaced (new
ledger starting with a snapshot, metadata node compare-and-set to point at it, old one deleted)
once it holds a few snapshots' worth. So the persisted size follows the number of ranges, not
of acknowledgements. A new owner recovers the exact state from the ledger's tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from store.ledger.errors import LedgerError, LedgerFencedError
from store.managed.cursor_codec import (
    CursorState,
    decode_meta,
    encode_delta,
    encode_meta,
    encode_snapshot_chunks,
    encode_state,
    replay,
    replay_start,
)
from store.managed.errors import (
    CursorStateError,
    LogClosedError,
    LogWriteError,
    ManagedLogError,
    OwnershipLostError,
)
from store.managed.position import Position
from store.managed.rangeset import Range
from store.meta.api import BadVersionError, NodeExistsError, NoNodeError
from store.tasks import within

if TYPE_CHECKING:
    from store.managed.config import LogConfig
    from store.managed.ledgers import LedgerClientLike
    from store.meta.api import MetaStore

log = logging.getLogger(__name__)

SNAPSHOT_CHUNK = 512 << 10
MIN_SNAPSHOT_SPACING = 64 << 10  # deltas written before the next snapshot, at least
LEDGER_ROLL_FACTOR = 4  # replace the cursor ledger once it holds this many snapshots' worth
MAX_META_RANGES = 1000  # ranges kept in the metadata node (a fallback; as Pulsar keeps in ZooKeeper)
_REPLAY_BATCH = 256


class CursorLog(Protocol):
    """What a cursor uses of the log it is on (ManagedLog): named here so that the log, which
    opens its cursors, is not named back."""

    @property
    def meta(self) -> MetaStore: ...
    @property
    def client(self) -> LedgerClientLike: ...
    @property
    def name(self) -> str: ...
    @property
    def config(self) -> LogConfig: ...
    @property
    def last_confirmed(self) -> Position: ...
    def next_position(self, pos: Position) -> Position: ...
    def entries_after(self, pos: Position) -> int: ...
    def cursor_path(self, name: str) -> str: ...
    def schedule_trim(self) -> None: ...
    def cursor_lost(self, exc: ManagedLogError) -> None:
        """The cursor could not persist its state (its ledger fenced: another owner)."""


class ManagedCursor:
    """A named durable cursor on a ManagedLog. Get one with `ManagedLog.open_cursor`."""

    def __init__(self, mlog: CursorLog, name: str, state: CursorState, version: int, ledger_id: int) -> None:
        self._log = mlog
        self.name = name
        self._path = mlog.cursor_path(name)
        self._state = state
        self._version = version
        self._writer: Any = None
        self._ledger_id = ledger_id  # the ledger the metadata node points at (-1: none)
        self._next_entry = 0
        self._ledger_bytes = 0
        self._meta_bytes = 0
        self._base = 0
        self._delta_bytes = 0
        self._snap_size = 0
        self._pending_ranges: list[Range] = []
        self._pending_props: dict[str, str | None] = {}
        self._need_snapshot = False
        self._waiters: list[asyncio.Future[None]] = []
        self._inflight: set[asyncio.Future[int]] = set()
        self._wake = asyncio.Event()
        self._failure: ManagedLogError | None = None
        self._closed = False
        self.recovered_ledger_bytes = 0  # size of the ledger recovery replayed (for tests/stats)
        self._task = asyncio.get_running_loop().create_task(self._run())

    # ---- creation and recovery ----------------------------------------------------------

    @classmethod
    async def create(cls, mlog: CursorLog, name: str, mark_delete: Position) -> ManagedCursor:
        state = CursorState(mark_delete)
        data = encode_meta(-1, state, MAX_META_RANGES)
        try:
            await mlog.meta.create(mlog.cursor_path(name), data, make_parents=True)
        except NodeExistsError:
            return await cls.recover(mlog, name)
        cur = cls(mlog, name, state, 0, -1)
        cur._meta_bytes = len(data)
        return cur

    @classmethod
    async def recover(cls, mlog: CursorLog, name: str) -> ManagedCursor:
        """Recover the last durable state: fence and replay the cursor ledger, then claim the
        node (a version bump) so a previous owner's next cursor-ledger switch fails."""
        path = mlog.cursor_path(name)
        for _ in range(5):
            data, stat = await mlog.meta.get(path)
            lid, complete, state = decode_meta(data)
            recovered_bytes = 0
            if lid >= 0:
                try:
                    state, recovered_bytes = await _replay_ledger(mlog, lid)
                except (LedgerError, CursorStateError) as e:
                    log.warning(
                        "cursor %s/%s: ledger %d unusable (%r); using the metadata snapshot%s",
                        mlog.name,
                        name,
                        lid,
                        e,
                        "" if complete else " (ranges truncated)",
                    )
            try:
                stat = await mlog.meta.set(path, data, stat.version)
            except BadVersionError:
                continue  # the previous owner moved to another ledger meanwhile: recover that one
            cur = cls(mlog, name, state, stat.version, lid)
            cur.recovered_ledger_bytes = recovered_bytes
            cur._meta_bytes = len(data)
            return cur
        raise OwnershipLostError(f"cursor {name!r}: its metadata keeps changing under recovery")

    # ---- state ---------------------------------------------------------------------------

    @property
    def mark_delete(self) -> Position:
        """Every entry at or before this position is consumed."""
        return self._state.mark_delete

    @property
    def properties(self) -> dict[str, str]:
        return dict(self._state.props)

    def acked_ranges(self) -> list[Range]:
        """Individually acknowledged (ledger, first, last) ranges after the mark-delete."""
        return self._state.acked.ranges()

    def state(self) -> CursorState:
        """A copy of the whole state (mark-delete, ranges, properties)."""
        return self._state.copy()

    def is_acked(self, pos: Position) -> bool:
        return pos <= self._state.mark_delete or self._state.acked.contains(pos)

    def first_unacked(self) -> Position:
        """The next position to deliver after the mark-delete."""
        return self._log.next_position(self._state.mark_delete)

    def backlog(self) -> int:
        """Confirmed entries not consumed yet."""
        md = self._state.mark_delete
        lc = self._log.last_confirmed
        n = self._log.entries_after(md)
        acked = (
            self._state.acked.count
            if not self._state.acked or lc >= _last_of(self._state)
            else sum(last - f + 1 for lid, f, last in self._state.acked if Position(lid, last) <= lc)
        )
        return max(0, n - acked)

    @property
    def persisted_bytes(self) -> int:
        """Bytes this cursor keeps in storage now: its ledger's records plus its metadata node."""
        return self._ledger_bytes + self._meta_bytes

    # ---- updates -------------------------------------------------------------------------

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise LogClosedError(f"cursor {self.name!r} is closed")

    def _add(self, lid: int, first: int, last: int) -> None:
        md = self._state.mark_delete
        if Position(lid, last) <= md:
            return
        if lid == md.ledger_id and first <= md.entry_id:
            first = md.entry_id + 1
        if self._state.acked.add(lid, first, last):
            self._pending_ranges.append((lid, first, last))

    def _advance(self) -> None:
        st = self._state
        before = st.mark_delete.ledger_id
        while (r := st.acked.first()) is not None:
            nxt = self._log.next_position(st.mark_delete)
            if (r[0], r[1]) > nxt:
                break
            st.mark_delete = Position(r[0], r[2])
            st.acked.remove_upto(st.mark_delete)
        if st.mark_delete.ledger_id != before:
            self._log.schedule_trim()

    def _persist(self) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._task.done():  # the writer stopped (ownership lost or closed): nothing will persist
            fut.set_exception(self._failure or LogClosedError(f"cursor {self.name!r} is closed"))
            return fut
        self._waiters.append(fut)
        self._wake.set()
        return fut

    async def ack(self, positions: Iterable[Position]) -> None:
        """Acknowledge individual positions; returns once the new state is durable."""
        self._check()
        for p in positions:
            self._add(p.ledger_id, p.entry_id, p.entry_id)
        self._advance()
        await self._persist()

    async def ack_range(self, ledger_id: int, first: int, last: int) -> None:
        """Acknowledge entries first..last of one ledger."""
        self._check()
        self._add(ledger_id, first, last)
        self._advance()
        await self._persist()

    async def mark_delete_to(self, pos: Position) -> None:
        """Cumulative acknowledgement of everything up to and including `pos`."""
        self._check()
        st = self._state
        if pos > st.mark_delete:
            st.acked.remove_upto(pos)
            before = st.mark_delete.ledger_id
            st.mark_delete = pos
            self._advance()
            if st.mark_delete.ledger_id != before:
                self._log.schedule_trim()
        await self._persist()

    async def seek(self, pos: Position) -> None:
        """Reset: `pos` is the next position to deliver; forget every acknowledgement."""
        self._check()
        self._state.mark_delete = Position(pos.ledger_id, pos.entry_id - 1)
        self._state.acked.clear()
        self._pending_ranges.clear()
        self._need_snapshot = True
        await self._persist()
        self._log.schedule_trim()

    async def set_properties(self, props: dict[str, str | None]) -> None:
        """Update per-cursor properties (None removes a key); durable on return."""
        self._check()
        for k, v in props.items():
            if v is None:
                self._state.props.pop(k, None)
            else:
                self._state.props[k] = v
            self._pending_props[k] = v
        await self._persist()

    async def flush(self) -> None:
        """Wait until everything done so far is durable."""
        if self._waiters or self._pending_ranges or self._pending_props or self._need_snapshot:
            await self._persist()
        if self._inflight:
            await asyncio.gather(*self._inflight, return_exceptions=True)

    # ---- the writer ----------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._waiters:
                if self._closed:
                    return
                continue
            waiters, self._waiters = self._waiters, []
            ranges, self._pending_ranges = self._pending_ranges, []
            props, self._pending_props = self._pending_props, {}
            snap, self._need_snapshot = self._need_snapshot, False
            try:
                if self._writer is None or self._ledger_bytes > self._roll_threshold():
                    await self._roll()
                    _settle(waiters, None)
                    continue
                if snap or self._delta_bytes > max(MIN_SNAPSHOT_SPACING, self._state_size()):
                    fut = self._append_snapshot()
                else:
                    data = encode_delta(self._base, self._state.mark_delete, ranges, props)
                    self._delta_bytes += len(data)
                    fut = self._append(data)
                fut.add_done_callback(lambda f, ws=waiters: _settle(ws, self._wrap(f.exception())))  # type: ignore[misc]
            except Exception as e:
                err = self._wrap(e)
                assert err is not None
                _settle(waiters, err)
                if isinstance(err, OwnershipLostError):
                    self._lose(err)
                    return
                self._writer = None  # try a fresh ledger next time

    def _wrap(self, exc: BaseException | None) -> ManagedLogError | None:
        if exc is None:
            return None
        if isinstance(exc, ManagedLogError):
            return exc
        if isinstance(exc, LedgerFencedError):
            return OwnershipLostError(f"cursor {self.name!r}: ledger fenced by another owner")
        return LogWriteError(f"cursor {self.name!r}: {exc!r}")

    def _lose(self, err: ManagedLogError) -> None:
        if self._failure is None:
            self._failure = err
            waiters, self._waiters = self._waiters, []
            _settle(waiters, err)
            self._log.cursor_lost(err)

    def _state_size(self) -> int:
        """About what a snapshot of the current state takes (it follows the ranges)."""
        return 24 * len(self._state.acked) + 64 * len(self._state.props) + 32

    def _roll_threshold(self) -> int:
        # Relative to the current state, so the ledger shrinks back when the ranges do.
        return LEDGER_ROLL_FACTOR * max(MIN_SNAPSHOT_SPACING, self._state_size())

    def _append(self, data: bytes) -> asyncio.Future[int]:
        writer = self._writer
        fut: asyncio.Future[int] = writer.append(data)
        self._next_entry += 1
        self._ledger_bytes += len(data)
        self._inflight.add(fut)
        fut.add_done_callback(lambda f: self._on_appended(writer, f))
        return fut

    def _on_appended(self, writer: Any, f: asyncio.Future[int]) -> None:
        self._inflight.discard(f)
        if f.cancelled() or f.exception() is None:
            return
        err = self._wrap(f.exception())
        if isinstance(err, OwnershipLostError):
            self._lose(err)
        elif writer is self._writer:
            self._writer = None  # the next write moves to a fresh ledger with a full snapshot

    def _append_snapshot(self) -> asyncio.Future[int]:
        sb = encode_state(self._state)
        first = self._next_entry
        futs = [self._append(c) for c in encode_snapshot_chunks(self._base, sb, SNAPSHOT_CHUNK)]
        self._base, self._delta_bytes, self._snap_size = first, 0, len(sb)
        return futs[-1]  # ledger acks are in order: the last chunk implies the others

    async def _roll(self) -> None:
        """Move to a new cursor ledger holding a full snapshot, then point the metadata at it."""
        mlog, cfg = self._log, self._log.config
        new = await mlog.client.create(
            cfg.cursor_ensemble_size,
            cfg.cursor_write_quorum,
            cfg.cursor_ack_quorum,
            properties={"quire.cursor": f"{mlog.name}/{self.name}"},
        )
        sb = encode_state(self._state)
        chunks = encode_snapshot_chunks(-1, sb, SNAPSHOT_CHUNK)
        data = encode_meta(new.ledger_id, self._state, MAX_META_RANGES)
        try:
            await asyncio.gather(*(new.append(c) for c in chunks))
            stat = await mlog.meta.set(self._path, data, self._version)
        except BaseException as e:
            with contextlib.suppress(Exception):
                await new.close()
                await mlog.client.delete(new.ledger_id)
            if isinstance(e, (BadVersionError, NoNodeError)):
                raise OwnershipLostError(f"cursor {self.name!r}: metadata changed by another owner") from None
            raise
        self._version = stat.version
        old_writer, old_id = self._writer, self._ledger_id
        self._writer, self._ledger_id = new, new.ledger_id
        self._next_entry = len(chunks)
        self._ledger_bytes = sum(len(c) for c in chunks)
        self._meta_bytes = len(data)
        self._base, self._delta_bytes, self._snap_size = 0, 0, len(sb)
        if old_writer is not None:
            with contextlib.suppress(Exception):
                await old_writer.close()
        if old_id >= 0:
            try:
                await mlog.client.delete(old_id)
            except Exception as e:
                log.info("cursor %s: could not delete old ledger %d: %r", self.name, old_id, e)

    # ---- closing -------------------------------------------------------------------------

    async def _stop(self) -> None:
        self._closed = True
        self._wake.set()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await within(self._task, 30)

    async def close(self) -> None:
        """Clean close: store the whole state in the metadata node (if it fits) and drop the
        cursor ledger, so the next owner needs no ledger recovery for this cursor."""
        if self._closed:
            return
        with contextlib.suppress(Exception):
            await self.flush()
        await self._stop()
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(Exception):
                await writer.close()
        if self._failure is not None or len(self._state.acked) > MAX_META_RANGES:
            return  # the ledger stays the source of truth
        data = encode_meta(-1, self._state, MAX_META_RANGES)
        try:
            stat = await self._log.meta.set(self._path, data, self._version)
        except (BadVersionError, NoNodeError):
            return
        self._version, self._meta_bytes, self._ledger_bytes = stat.version, len(data), 0
        if self._ledger_id >= 0:
            with contextlib.suppress(Exception):
                await self._log.client.delete(self._ledger_id)
            self._ledger_id = -1

    async def delete(self) -> None:
        """Remove the cursor: its metadata node and its ledger."""
        await self._stop()
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(Exception):
                await writer.close()
        with contextlib.suppress(NoNodeError):
            await self._log.meta.delete(self._path)
        if self._ledger_id >= 0:
            with contextlib.suppress(Exception):
                await self._log.client.delete(self._ledger_id)


def _settle(waiters: list[asyncio.Future[None]], exc: BaseException | None) -> None:
    for w in waiters:
        if w.done():
            continue
        if exc is None:
            w.set_result(None)
        else:
            w.set_exception(exc)


def _last_of(state: CursorState) -> Position:
    ranges = state.acked.ranges()
    return Position(ranges[-1][0], ranges[-1][2]) if ranges else state.mark_delete


async def _replay_ledger(mlog: CursorLog, ledger_id: int) -> tuple[CursorState, int]:
    """Open a cursor ledger with recovery (fencing the previous owner) and replay its tail."""
    reader = await mlog.client.open(ledger_id, recovery=True)
    try:
        lac = reader.last_add_confirmed
        if lac < 0:
            raise CursorStateError(f"cursor ledger {ledger_id} is empty")
        (last,) = await reader.read(lac, lac)
        first, end = replay_start(last, lac)
        if first < 0 or end < first:
            raise CursorStateError(f"cursor ledger {ledger_id} holds no complete snapshot")
        entries: list[bytes] = []
        for a in range(first, end + 1, _REPLAY_BATCH):
            entries += await reader.read(a, min(end, a + _REPLAY_BATCH - 1))
        return replay(entries, first), int(reader.metadata.length)
    finally:
        with contextlib.suppress(Exception):
            await reader.close()
