"""The bookie's TCP server and the `quire bookie` process entry point (run_bookie).

One asyncio Protocol per connection parses frames straight from a bytearray, answers each
request independently (responses may go out of order, matched by request id) and batches
responses into one writelines per loop iteration. A bad request gets an error response for
that request only; a frame that breaks the framing (bad length) gets an error and the
connection is closed. Other connections are unaffected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import struct
import sys
from pathlib import Path
from typing import cast

from store.bookie import protocol as p
from store.bookie.bookie import Bookie, BookieConfig
from store.bookie.errors import BadRequestError, BookieError, Status

log = logging.getLogger(__name__)

_MAX_INFLIGHT = 4096  # per connection: pause reading beyond this many unanswered requests


class BookieConnection(asyncio.Protocol):
    def __init__(self, bookie: Bookie, max_frame: int, conns: set[BookieConnection]) -> None:
        self.bookie = bookie
        self.max_frame = max_frame
        self.conns = conns
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._out: list[bytes | memoryview] = []
        self._flush_scheduled = False
        self._inflight = 0
        self._reading_paused = False
        self._write_paused = False
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
        for t in self._tasks:
            t.cancel()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    def _update_reading(self) -> None:
        assert self.transport is not None
        want_pause = self._write_paused or self._inflight >= _MAX_INFLIGHT
        if want_pause != self._reading_paused and not self._closing:
            self._reading_paused = want_pause
            if want_pause:
                self.transport.pause_reading()
            else:
                self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        buf = self._buf
        buf += data
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (flen,) = struct.unpack_from(">i", buf, pos)
            if flen < p.FRAME_OVERHEAD or flen > self.max_frame:
                op, rid = 0, 0
                if end - pos >= p.HEADER_SIZE:
                    _, op, _, rid = p.HEADER.unpack_from(buf, pos)
                self._fatal(op, rid, f"bad frame length {flen} (allowed {p.FRAME_OVERHEAD}..{self.max_frame})")
                return
            if end - pos < 4 + flen:
                break
            _, op, flags, rid = p.HEADER.unpack_from(buf, pos)
            if op == p.Op.ADD and flen >= p.FRAME_OVERHEAD + 8:
                # The hot path: copy the entry out once, as the bytes every layer keeps.
                (lid,) = p.LEDGER.unpack_from(buf, pos + p.HEADER_SIZE)
                entry = bytes(buf[pos + p.HEADER_SIZE + 8 : pos + 4 + flen])
                pos += 4 + flen
                self._dispatch_add(flags, rid, lid, entry)
                continue
            body = bytes(buf[pos + p.HEADER_SIZE : pos + 4 + flen])
            pos += 4 + flen
            self._dispatch(op, flags, rid, body)
        if pos:
            del buf[:pos]

    # -- responses --

    def _send(self, parts: list[bytes | memoryview]) -> None:
        self._out.extend(parts)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out, self._out = self._out, []
        if out and self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(out)

    def _ok(self, op: int, rid: int, *body: bytes | memoryview) -> None:
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

    def _dispatch_add(self, flags: int, rid: int, lid: int, entry: bytes) -> None:
        self._inflight += 1
        if self._inflight >= _MAX_INFLIGHT:
            self._update_reading()
        try:
            if len(entry) < 24:
                raise BadRequestError(f"ADD of a {len(entry)}-byte entry, shorter than an entry header")
            eid = struct.unpack_from(">q", entry, 8)[0]
            recovery = bool(flags & p.FLAG_RECOVERY)
            if not self.bookie.add_cb(lid, entry, recovery, lambda exc: self._add_done(exc, rid, lid, eid)):
                task = self._loop.create_task(self._add_slow(rid, lid, eid, entry, flags))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        except BookieError as e:
            self._error(p.Op.ADD, rid, e.status, str(e))
            self._done()

    def _add_done(self, exc: BaseException | None, rid: int, lid: int, eid: int) -> None:
        if exc is None:
            self._ok(p.Op.ADD, rid, p.LEDGER_ENTRY.pack(lid, eid))
        else:
            status = exc.status if isinstance(exc, BookieError) else Status.IO_ERROR
            self._error(p.Op.ADD, rid, status, str(exc))
        self._done()

    async def _add_slow(self, rid: int, lid: int, eid: int, entry: bytes, flags: int) -> None:
        try:
            await self.bookie.add(lid, entry, bool(flags & p.FLAG_RECOVERY))
        except BookieError as e:
            self._error(p.Op.ADD, rid, e.status, str(e))
        except OSError as e:
            self._error(p.Op.ADD, rid, Status.IO_ERROR, str(e))
        else:
            self._ok(p.Op.ADD, rid, p.LEDGER_ENTRY.pack(lid, eid))
        finally:
            self._done()

    async def _handle(self, op: int, flags: int, rid: int, body: bytes) -> None:
        try:
            b = self.bookie
            if op == p.Op.READ:
                lid, eid = p.LEDGER_ENTRY.unpack(body)
                self._ok(op, rid, await b.read(lid, eid, fence=bool(flags & p.FLAG_FENCE)))
            elif op == p.Op.READ_RANGE:
                lid, first, last, max_bytes = p.RANGE_REQ.unpack(body)
                entries = await b.read_range(lid, first, last, max_bytes)
                self._ok(op, rid, *p.encode_range(entries))
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
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def listen(self, start_serving: bool = True) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: BookieConnection(self.bookie, self.max_frame, self.conns),
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


async def _serve(data_dir: Path, journal_dir: Path, host: str, port: int, meta_url: str, rack: str | None) -> int:
    from store.bookie.registration import CookieMismatchError, Registration, check_cookie
    from store.meta.api import open_meta

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    exit_code = 0
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    address = f"{host}:{port}"
    meta = open_meta(meta_url)
    await meta.start()
    try:
        try:
            instance_id = await check_cookie(meta, address, data_dir, journal_dir)
        except CookieMismatchError as e:
            print(f"quire bookie {address}: {e}", file=sys.stderr)
            log.error("%s", e)
            return 2
        bookie = Bookie(data_dir, journal_dir)
        server = BookieServer(bookie, host, port)
        # Hold the port before touching the directories: no second bookie at this address.
        await server.listen(start_serving=False)
        try:
            await bookie.start()
            await server.start_serving()
            reg = Registration(meta, address, rack, instance_id, data_dir, journal_dir)

            def session_lost() -> None:
                nonlocal exit_code
                log.error("metadata session lost: stopping, this bookie can no longer be trusted as alive")
                exit_code = 3
                stop.set()

            meta.add_session_listener(session_lost)
            await reg.register()
            log.info("bookie %s serving (instance %s)", address, instance_id)

            async def refresh() -> None:
                while True:
                    await asyncio.sleep(30)
                    try:
                        await reg.refresh()
                    except Exception as e:
                        log.warning("could not refresh registration: %s", e)

            refresher = asyncio.create_task(refresh())
            await stop.wait()
            refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await refresher
            if exit_code == 0:
                with contextlib.suppress(Exception):
                    await reg.unregister()
        finally:
            await server.close()
            await bookie.close()
    finally:
        with contextlib.suppress(Exception):
            await meta.close()
    return exit_code


def run_bookie(
    *, data_dir: str, journal_dir: str | None, host: str, port: int, meta_url: str, rack: str | None
) -> int:
    """Run a bookie until SIGTERM/SIGINT (clean shutdown, everything flushed); the exit code."""
    d = Path(data_dir).absolute()
    j = Path(journal_dir).absolute() if journal_dir else d / "journal"
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run  # type: ignore[assignment]
    try:
        return runner(_serve(d, j, host, port, meta_url, rack))
    except OSError as e:
        print(f"quire bookie {host}:{port}: {e}", file=sys.stderr)
        return 1


__all__ = ["BookieConfig", "BookieConnection", "BookieServer", "run_bookie"]
