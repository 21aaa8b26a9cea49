"""Client connection to one bookie: pipelined requests over one TCP connection.

Many requests may be in flight; responses are matched by request id (they may come back out
of order). Frames queued during one loop iteration go out in a single writelines call.
Errors come back as store.bookie.errors classes; connection problems and timeouts raise
BookieUnavailableError, and the next request reconnects. Entries are returned packed, not
verified: the caller checks them with store.bookie.entry.unpack_entry. Responses are read by
store.framing.FramedProtocol: a large one (READ_RANGE) lands in a buffer of its own and its
entries are views of it.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from typing import cast

from store.bookie import protocol as p
from store.bookie.errors import BadRequestError, BookieError, BookieUnavailableError, Status, error_for
from store.framing import Buffer, FramedProtocol
from store.metrics import BookieLatency
from store.tasks import within

_MAX_RESPONSE = 1 << 30


def _check_size(parts: list[Buffer]) -> None:
    # The bookie would reject it and drop the connection, failing every other request on it.
    n = sum(len(x) for x in parts) - 4
    if n > p.DEFAULT_MAX_FRAME:
        raise BadRequestError(f"request of {n} bytes exceeds the {p.DEFAULT_MAX_FRAME}-byte frame limit")


class _Conn(FramedProtocol):
    def __init__(self, address: str, request_timeout: float) -> None:
        super().__init__(max_frame=_MAX_RESPONSE, min_frame=p.FRAME_OVERHEAD)
        self.address = address
        self.request_timeout = request_timeout
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        # Requests with the default timeout, in send order (so deadline order): one sweeper
        # expires them, no timer per request. Others (long polls) get their own timer.
        self.pending: dict[int, tuple[asyncio.Future[Buffer], float]] = {}
        self.timed: dict[int, tuple[asyncio.Future[Buffer], asyncio.TimerHandle]] = {}
        self.closed = False
        self._sweeper: asyncio.TimerHandle | None = None
        self._out: list[Buffer] = []
        self._flush_scheduled = False
        self._drained: asyncio.Future[None] | None = None
        self.latency = BookieLatency(address, request_timeout)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses.
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        why = f"connection to bookie {self.address} lost" + (f": {exc}" if exc else "")
        if self._sweeper is not None:
            self._sweeper.cancel()
        futs = [f for f, _ in self.pending.values()]
        for f, timer in self.timed.values():
            timer.cancel()
            futs.append(f)
        self.pending, self.timed = {}, {}
        for fut in futs:
            if not fut.done():
                fut.set_exception(BookieUnavailableError(why))
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def pause_writing(self) -> None:
        if self._drained is None or self._drained.done():
            self._drained = self.loop.create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    async def drain(self) -> None:
        if self._drained is not None and not self._drained.done():
            await self._drained

    # -- reading (store.framing.FramedProtocol) --

    def framing_stopped(self) -> bool:
        return self.closed

    def bad_frame_size(self, size: int, rest: memoryview) -> None:
        self.abort(f"bad response frame length {size}")

    def frame_received(self, frame: bytearray | memoryview, owned: bool) -> None:
        _op, status, rid = p.FRAME_HEAD.unpack_from(frame, 0)
        entry = self.pending.pop(rid, None)
        if entry is not None:
            fut = entry[0]
            self.latency.observe(_op, entry[1], self.loop.time())
        else:
            timed = self.timed.pop(rid, None)
            if timed is None:
                return  # timed out already
            fut = timed[0]
            timed[1].cancel()
        if fut.done():
            return
        # A large response (a READ_RANGE) arrived in a buffer of its own: its entries stay
        # views of it, no copy. A small one is copied out of the shared receive buffer.
        body = memoryview(frame)[p.FRAME_OVERHEAD :] if owned else bytes(frame[p.FRAME_OVERHEAD :])
        if status == Status.OK:
            fut.set_result(body)
        else:
            fut.set_exception(error_for(status, bytes(body).decode("utf-8", "replace")))

    def abort(self, why: str) -> None:
        if self.transport is not None:
            self.transport.abort()
        self.connection_lost(OSError(why))

    def submit(self, rid: int, parts: list[Buffer], limit_s: float | None) -> asyncio.Future[Buffer]:
        fut: asyncio.Future[Buffer] = self.loop.create_future()
        if limit_s is None:
            self.pending[rid] = (fut, self.loop.time() + self.request_timeout)
            if self._sweeper is None:
                self._sweeper = self.loop.call_later(self._sweep_interval(), self._sweep)
        else:
            self.timed[rid] = (fut, self.loop.call_later(limit_s, self._expire_timed, rid, limit_s))
        self._out.extend(parts)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)
        return fut

    def _flush(self) -> None:
        self._flush_scheduled = False
        out, self._out = self._out, []
        if out and not self.closed and self.transport is not None:
            self.transport.writelines(out)

    def _sweep_interval(self) -> float:
        return min(1.0, max(0.01, self.request_timeout / 10))

    def _sweep(self) -> None:
        self._sweeper = None
        now = self.loop.time()
        expired = []
        for rid, (_, deadline) in self.pending.items():
            if deadline > now:
                break
            expired.append(rid)
        for rid in expired:
            fut, _ = self.pending.pop(rid)
            if not fut.done():
                fut.set_exception(self._timeout_error(self.request_timeout))
        if self.pending and not self.closed:
            self._sweeper = self.loop.call_later(self._sweep_interval(), self._sweep)

    def _expire_timed(self, rid: int, limit_s: float) -> None:
        entry = self.timed.pop(rid, None)
        if entry is not None and not entry[0].done():
            entry[0].set_exception(self._timeout_error(limit_s))

    def _timeout_error(self, limit_s: float) -> BookieUnavailableError:
        return BookieUnavailableError(f"request to bookie {self.address} timed out after {limit_s:g} s")


class BookieClient:
    def __init__(
        self, address: str, *, connect_timeout: float = 5.0, request_timeout: float = 10.0, background_reads: bool = False
    ) -> None:
        """background_reads: flag range reads FLAG_BACKGROUND (bulk scans the bookie serves at
        a lower priority than adds; for a client that adds nothing on this connection, as a
        response to anything else waits behind each such read)."""
        self.address = address
        self._range_flags = p.FLAG_BACKGROUND if background_reads else 0
        host, _, port = address.rpartition(":")
        self._host = host.strip("[]")
        self._port = int(port)
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self._conn: _Conn | None = None
        self._connecting: asyncio.Lock | None = None
        self._ids = itertools.count(1)
        self._closed = False

    async def connect(self) -> None:
        """Open the connection (requests also reconnect lazily if it dropped)."""
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._conn is not None and not self._conn.closed:
                return
            self._closed = False
            loop = asyncio.get_running_loop()
            try:
                _, conn = await within(loop.create_connection(
                    lambda: _Conn(self.address, self.request_timeout), self._host, self._port
                ), self.connect_timeout)
            except (OSError, TimeoutError) as e:
                raise BookieUnavailableError(f"cannot connect to bookie {self.address}: {e or 'timed out'}") from None
            self._conn = conn

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    async def _call(self, op: int, flags: int, body: list[Buffer], limit_s: float | None = None) -> Buffer:
        conn = self._conn
        if conn is None or conn.closed:
            if self._closed:
                raise BookieUnavailableError(f"client for bookie {self.address} is closed")
            await self.connect()
            conn = self._conn
            assert conn is not None
        if conn._drained is not None and not conn._drained.done():
            await conn.drain()
            if conn.closed:
                raise BookieUnavailableError(f"connection to bookie {self.address} lost")
        rid = next(self._ids)
        parts = p.encode(op, flags, rid, *body)
        _check_size(parts)
        return await conn.submit(rid, parts, limit_s)

    def add_nowait(self, ledger_id: int, entry: Buffer | list[Buffer], *, recovery: bool = False) -> asyncio.Future[Buffer]:
        """Fast path of add() for pipelining writers: no coroutine or task per entry. The
        future resolves once the add is durable, or fails like add(). If not connected (or
        the send buffer is full), it falls back to a task running add(). `entry` may come in
        pieces (store.bookie.entry.pack_entry_parts): they go out in one writelines, uncopied."""
        conn = self._conn
        flags = p.FLAG_RECOVERY if recovery else 0
        pieces = entry if isinstance(entry, list) else [entry]
        if conn is None or conn.closed or (conn._drained is not None and not conn._drained.done()):
            return asyncio.ensure_future(self._call(p.Op.ADD, flags, [p.LEDGER.pack(ledger_id), *pieces]))
        rid = next(self._ids)
        parts = p.encode(p.Op.ADD, flags, rid, p.LEDGER.pack(ledger_id), *pieces)
        _check_size(parts)
        return conn.submit(rid, parts, None)

    async def add(self, ledger_id: int, entry: Buffer | list[Buffer], *, recovery: bool = False) -> None:
        """Add a packed entry (whole or in pieces); returns once the bookie has it durably journaled."""
        flags = p.FLAG_RECOVERY if recovery else 0
        pieces = entry if isinstance(entry, list) else [entry]
        await self._call(p.Op.ADD, flags, [p.LEDGER.pack(ledger_id), *pieces])

    async def read(self, ledger_id: int, entry_id: int, *, fence: bool = False) -> Buffer:
        """One packed entry (entry_id -1: the last one the bookie has)."""
        flags = p.FLAG_FENCE if fence else 0
        return await self._call(p.Op.READ, flags, [p.LEDGER_ENTRY.pack(ledger_id, entry_id)])

    async def read_range(self, ledger_id: int, first: int, last: int, max_bytes: int = 4 << 20) -> list[memoryview]:
        """Packed entries first.. in order, as many whole ones as fit max_bytes (at least one);
        fewer than asked if the bookie lacks one (NoEntryError if it lacks `first`)."""
        body = await self._call(p.Op.READ_RANGE, self._range_flags, [p.RANGE_REQ.pack(ledger_id, first, last, max_bytes)])
        try:
            return p.decode_range(body)
        except ValueError as e:
            raise BookieError(f"bad READ_RANGE response from {self.address}: {e}") from None

    async def read_lac(self, ledger_id: int) -> tuple[int, int]:
        """(lac, last_entry_id) as this bookie knows them; -1 when none."""
        lac, last = p.LAC_RESP.unpack(await self._call(p.Op.READ_LAC, 0, [p.LEDGER.pack(ledger_id)]))
        return lac, last

    async def wait_lac(self, ledger_id: int, previous_lac: int, timeout: float) -> int:  # noqa: ASYNC109
        """Long poll: the LAC once it exceeds previous_lac, or previous_lac after `timeout` s."""
        ms = max(0, min(int(timeout * 1000), 0xFFFFFFFF))
        body = p.LONGPOLL_REQ.pack(ledger_id, previous_lac, ms)
        try:
            resp = await self._call(p.Op.READ_LAC_LONGPOLL, 0, [body], timeout + self.request_timeout)
        except BookieError as e:
            if e.status == Status.TIMEOUT:
                return previous_lac
            raise
        return int(struct.unpack(">q", resp)[0])

    async def fence(self, ledger_id: int) -> tuple[int, int]:
        """Fence the ledger durably on this bookie; (lac, last_entry_id) after fencing."""
        lac, last = p.LAC_RESP.unpack(await self._call(p.Op.FENCE, 0, [p.LEDGER.pack(ledger_id)]))
        return lac, last

    async def delete_ledger(self, ledger_id: int) -> None:
        await self._call(p.Op.DELETE_LEDGER, 0, [p.LEDGER.pack(ledger_id)])

    async def write_lac(self, ledger_id: int, lac: int) -> None:
        """Send the writer's explicit LAC (durable on the bookie when this returns).
        FencedError on a fenced ledger, NoLedgerError on a deleted one."""
        await self._call(p.Op.WRITE_LAC, 0, [p.WRITE_LAC_REQ.pack(ledger_id, lac)])

    async def close(self) -> None:
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None and conn.transport is not None:
            conn.transport.close()
            if not conn.closed:
                conn.connection_lost(None)

    @property
    def in_flight(self) -> int:
        c = self._conn
        return len(c.pending) + len(c.timed) if c is not None else 0


class BookiePool:
    """One shared BookieClient per bookie address (background_reads: see BookieClient)."""

    def __init__(self, *, connect_timeout: float = 5.0, request_timeout: float = 10.0, background_reads: bool = False) -> None:
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.background_reads = background_reads
        self._clients: dict[str, BookieClient] = {}

    def get(self, address: str) -> BookieClient:
        c = self._clients.get(address)
        if c is None:
            c = self._clients[address] = BookieClient(
                address, connect_timeout=self.connect_timeout, request_timeout=self.request_timeout,
                background_reads=self.background_reads,
            )
        return c

    async def close_all(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            await c.close()
