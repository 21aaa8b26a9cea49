"""The bookie's TCP server (the `quire bookie` process main is quire/bookie.py).

One store.framing.FramedProtocol per connection: the socket reads into a reusable buffer and
small frames are copied out of it once; the rest of a large frame is read straight into a
buffer of its own, which its entry then is (no copy at all). Each request is answered
independently (responses may go out of order, matched by request id) and responses are
batched into one writelines per loop iteration; a READ_RANGE flagged FLAG_BACKGROUND is
written by a low-priority thread instead (background_reads.py). When the write cache is
full, ADDs wait in arrival order and the connection stops reading until a flush makes room
(backpressure). A bad request gets an error response for that request only; a frame that
breaks the framing (bad length) gets an error and the connection is closed. Other
connections are unaffected.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from typing import cast

from store.bookie import protocol as p
from store.bookie.background_reads import BackgroundReaders, BackgroundSend, SendCancelled
from store.bookie.bookie import Bookie, BookieConfig
from store.bookie.errors import BadRequestError, BookieError, Status
from store.framing import BackpressuredProtocol, Buffer

log = logging.getLogger(__name__)

_MAX_INFLIGHT = 4096  # per connection: pause reading beyond this many unanswered requests
_ADD_OK = struct.Struct(">iBBQqq")  # a whole ADD response: header, ledger, entry
_ADD_OK_LEN = _ADD_OK.size - 4


class BookieConnection(BackpressuredProtocol):
    def __init__(
        self, bookie: Bookie, max_frame: int, conns: set[BookieConnection], background: BackgroundReaders | None = None
    ) -> None:
        super().__init__(max_frame=max_frame, min_frame=p.FRAME_OVERHEAD)
        self.bookie = bookie
        self.conns = conns
        self._background = background
        # The background read writing to our socket now: every other response waits for it.
        self._bg_send: BackgroundSend | None = None
        self._bg_turn = asyncio.Lock()
        self.transport: asyncio.Transport | None = None
        self._out: list[Buffer] = []
        self._flush_scheduled = False
        self._inflight = 0
        # Adds waiting for room in the write cache, in arrival order; reading stays paused
        # until they are in (the client's own window then holds the rest: backpressure).
        self._blocked: deque[tuple[int, int, int, bytes | memoryview]] = deque()
        self._closing = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = asyncio.get_running_loop()

    # -- transport callbacks --

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses.
        self.transport = cast(asyncio.Transport, transport)
        self.conns.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.conns.discard(self)
        self._closing = True
        self._blocked.clear()
        if self._bg_send is not None:
            self._bg_send.cancelled.set()
        for t in self._tasks:
            t.cancel()

    # -- reading backpressure (store.framing.BackpressuredProtocol) --

    def too_busy(self) -> bool:
        return self._inflight >= _MAX_INFLIGHT or bool(self._blocked)

    def reading_frozen(self) -> bool:
        return self._closing

    # -- reading (store.framing.FramedProtocol): straight into our buffers --

    def framing_stopped(self) -> bool:
        return self._closing

    def bad_frame_size(self, size: int, rest: memoryview) -> None:
        op, rid = 0, 0
        if len(rest) >= p.FRAME_OVERHEAD:
            op, _, rid = p.FRAME_HEAD.unpack_from(rest, 0)
        self._fatal(op, rid, f"bad frame length {size} (allowed {p.FRAME_OVERHEAD}..{self.max_frame})")

    def frame_received(self, frame: bytearray | memoryview, owned: bool) -> None:
        op, flags, rid = p.FRAME_HEAD.unpack_from(frame, 0)
        body = p.FRAME_OVERHEAD
        if op == p.Op.ADD and len(frame) >= body + 8:
            (lid,) = p.LEDGER.unpack_from(frame, body)
            # An owned frame's entry is a view of it; otherwise the one copy, out of the read
            # buffer, as the bytes every layer keeps.
            entry = memoryview(frame)[body + 8 :]
            self._dispatch_add(flags, rid, lid, entry if owned else bytes(entry))
        else:
            self._dispatch(op, flags, rid, bytes(frame[body:]))

    # -- responses --

    def _send(self, parts: list[Buffer]) -> None:
        self._out.extend(parts)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._bg_send is not None:
            return  # a background read owns the socket; it flushes when it is done
        out, self._out = self._out, []
        if out and self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(out)

    def _ok(self, op: int, rid: int, *body: Buffer) -> None:
        self._send(p.encode(op, Status.OK, rid, *body))

    def _error(self, op: int, rid: int, status: int, message: str) -> None:
        self._send(p.encode(op, status, rid, message.encode("utf-8", "replace")))

    def _fatal(self, op: int, rid: int, message: str) -> None:
        log.warning("closing connection %s: %s", self._peer(), message)
        self._error(op, rid, Status.BAD_REQUEST, message)
        self._flush()
        self._closing = True
        assert self.transport is not None
        self.transport.close()  # sends buffered data first

    def _peer(self) -> object:
        return self.transport.get_extra_info("peername") if self.transport is not None else None

    def _done(self) -> None:
        self._inflight -= 1
        if self._reading_paused and self._inflight < _MAX_INFLIGHT // 2:
            self._update_reading()

    # -- requests --

    def _dispatch(self, op: int, flags: int, rid: int, body: bytes) -> None:
        self._inflight += 1
        if self._inflight >= _MAX_INFLIGHT:
            self._update_reading()
        try:
            if op == p.Op.ADD:
                raise BadRequestError("ADD body shorter than its ledger id")
            if op == p.Op.READ_LAC:
                (lid,) = p.LEDGER.unpack(body)
                self._ok(op, rid, p.LAC_RESP.pack(*self.bookie.read_lac(lid)))
                self._done()
                return
            coro = self._handle(op, flags, rid, body)
        except BookieError as e:
            self._error(op, rid, e.status, str(e))
            self._done()
            return
        except (struct.error, ValueError) as e:
            self._error(op, rid, Status.BAD_REQUEST, f"malformed {self._op_name(op)} request: {e}")
            self._done()
            return
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    def _op_name(op: int) -> str:
        try:
            return p.Op(op).name
        except ValueError:
            return f"op {op}"

    def _dispatch_add(self, flags: int, rid: int, lid: int, entry: bytes | memoryview) -> None:
        self._inflight += 1
        if self._inflight >= _MAX_INFLIGHT:
            self._update_reading()
        if self._blocked or not self._try_add(flags, rid, lid, entry):
            # The write cache is full: hold this add (and every later one, in order) and stop
            # reading until a flush makes room.
            self._blocked.append((flags, rid, lid, entry))
            if len(self._blocked) == 1:
                self.bookie.storage.on_room(self._unblock)
                self._update_reading()

    def _try_add(self, flags: int, rid: int, lid: int, entry: bytes | memoryview) -> bool:
        """Start an add (or answer its error); False if the write cache has no room."""
        try:
            if len(entry) < 24:
                raise BadRequestError(f"ADD of a {len(entry)}-byte entry, shorter than an entry header")
            eid = struct.unpack_from(">q", entry, 8)[0]
            recovery = bool(flags & p.FLAG_RECOVERY)
            return self.bookie.add_cb(lid, entry, recovery, lambda exc: self._add_done(exc, rid, lid, eid))
        except BookieError as e:
            self._error(p.Op.ADD, rid, e.status, str(e))
            self._done()
            return True

    def _unblock(self) -> None:
        while self._blocked and not self._closing:
            if not self._try_add(*self._blocked[0]):
                self.bookie.storage.on_room(self._unblock)
                return
            self._blocked.popleft()
        if not self._closing:
            self._update_reading()

    def _add_done(self, exc: BaseException | None, rid: int, lid: int, eid: int) -> None:
        if exc is None:  # the hot path: one pack, no list per response
            self._out.append(_ADD_OK.pack(_ADD_OK_LEN, p.Op.ADD, Status.OK, rid, lid, eid))
            if not self._flush_scheduled:
                self._flush_scheduled = True
                self._loop.call_soon(self._flush)
        else:
            status = exc.status if isinstance(exc, BookieError) else Status.IO_ERROR
            self._error(p.Op.ADD, rid, status, str(exc))
        self._done()

    async def _send_in_background(self, op: int, rid: int, lid: int, first: int, last: int, max_bytes: int) -> bool:
        """Answer a READ_RANGE from a background read thread (background_reads.py); False if
        it is the event loop's to answer after all: the socket is backed up (the thread may
        only write to a socket nothing else has bytes queued for), or no entry is on disk."""
        assert self._background is not None
        async with self._bg_turn:  # one at a time: each writes a whole frame to the socket
            t = self.transport
            if t is None or t.is_closing():
                return True  # nobody to answer
            self._flush()  # what was answered before goes before
            if t.get_write_buffer_size():
                return False
            scan = self._background.read_ahead > 0  # the sender reads ahead itself
            pieces, logs = self.bookie.range_pieces(lid, first, last, max_bytes, scan)
            try:
                if not any(isinstance(x, tuple) for x in pieces):
                    self._ok(op, rid, *cast(list[Buffer], pieces))
                    return True
                size = sum(x[2] if isinstance(x, tuple) else len(x) for x in pieces)
                send = self._bg_send = BackgroundSend([p.frame(op, Status.OK, rid, size), *pieces])
                try:
                    await asyncio.wrap_future(self._background.submit(t.get_extra_info("socket").fileno(), send))
                except SendCancelled:
                    pass
                except OSError as e:
                    # Part of the frame may be out: the stream cannot go on. The client fails
                    # over to another replica.
                    if not self._closing:
                        log.warning("closing connection %s: background read of ledger %d failed: %s", self._peer(), lid, e)
                        self._closing = True
                        t.abort()
                finally:
                    self._bg_send = None
                    self._flush()
                return True
            finally:
                self.bookie.storage.release_logs(logs)

    async def _handle(self, op: int, flags: int, rid: int, body: bytes) -> None:
        try:
            b = self.bookie
            if op == p.Op.READ:
                lid, eid = p.LEDGER_ENTRY.unpack(body)
                self._ok(op, rid, await b.read(lid, eid, fence=bool(flags & p.FLAG_FENCE)))
            elif op == p.Op.READ_RANGE:
                lid, first, last, max_bytes = p.RANGE_REQ.unpack(body)
                if not (flags & p.FLAG_BACKGROUND and self._background is not None
                        and await self._send_in_background(op, rid, lid, first, last, max_bytes)):
                    self._ok(op, rid, *await b.read_range_prefixed(lid, first, last, max_bytes))
            elif op == p.Op.READ_LAC_LONGPOLL:
                lid, prev, timeout_ms = p.LONGPOLL_REQ.unpack(body)
                lac = await b.wait_lac(lid, prev, timeout_ms / 1000)
                if lac is None:
                    self._error(op, rid, Status.TIMEOUT, f"no LAC past {prev} within {timeout_ms} ms")
                else:
                    self._ok(op, rid, p.LEDGER.pack(lac))
            elif op == p.Op.FENCE:
                (lid,) = p.LEDGER.unpack(body)
                self._ok(op, rid, p.LAC_RESP.pack(*await b.fence(lid)))
            elif op == p.Op.DELETE_LEDGER:
                (lid,) = p.LEDGER.unpack(body)
                await b.delete_ledger(lid)
                self._ok(op, rid)
            elif op == p.Op.WRITE_LAC:
                lid, lac = p.WRITE_LAC_REQ.unpack(body)
                await b.write_lac(lid, lac)
                self._ok(op, rid)
            else:
                self._error(op, rid, Status.BAD_REQUEST, f"unknown op {op}")
        except BookieError as e:
            self._error(op, rid, e.status, str(e))
        except (struct.error, ValueError) as e:
            self._error(op, rid, Status.BAD_REQUEST, f"malformed {self._op_name(op)} request: {e}")
        except OSError as e:
            log.exception("I/O error serving %s", self._op_name(op))
            self._error(op, rid, Status.IO_ERROR, f"I/O error: {e}")
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.exception("error serving %s", self._op_name(op))
            self._error(op, rid, Status.IO_ERROR, f"internal error: {e!r}")
        finally:
            self._done()


class BookieServer:
    """A Bookie plus its listening socket."""

    def __init__(self, bookie: Bookie, host: str = "127.0.0.1", port: int = 0, max_frame: int = p.DEFAULT_MAX_FRAME) -> None:
        self.bookie = bookie
        self.host = host
        self.port = port
        self.max_frame = max_frame
        self.conns: set[BookieConnection] = set()
        cfg = bookie.config
        self.background = BackgroundReaders(cfg.background_read_threads, cfg.background_read_nice,
                                            cfg.background_read_ahead)
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def listen(self, start_serving: bool = True) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: BookieConnection(self.bookie, self.max_frame, self.conns, self.background),
            self.host,
            self.port,
            reuse_address=True,
            start_serving=start_serving,
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def start_serving(self) -> None:
        assert self._server is not None
        await self._server.start_serving()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for c in list(self.conns):
            if c.transport is not None:
                c.transport.close()
        if self._server is not None:
            await self._server.wait_closed()
        await asyncio.to_thread(self.background.close)  # sends in flight see their connection closed


__all__ = ["BookieConfig", "BookieConnection", "BookieServer"]
