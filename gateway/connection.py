"""One client connection: size-prefixed frames in, responses out in request order (Kafka's
pipelining contract), each request's effects applied in request order.

Kafka handles a connection's requests one at a time, so a request sees every effect of those
sent before it. Here a handler starts once the previous one has returned or declared its effects
applied (RequestContext.effects_applied): a Produce does so once its batches are sequenced, so
the durability waits of pipelined produces overlap; any request other than a Produce also
waits for those earlier produces to be answered (a Fetch after a Produce sees its records; an
acks=0 Produce, which answers nothing, ends once its batches are durable).

Frames are read by store.framing.FramedProtocol: small frames are parsed out of one reusable
receive buffer (copied once, so handlers own a writable bytearray), a large one is read straight
into its own writable buffer (from MAPPED_FROM bytes a mapping: store.framing.mapped_buffer).
A size below 0 or above socket.request.max.bytes closes the connection, as Kafka does; so does
any request we cannot decode. Bad input only ever ends its own connection.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import TYPE_CHECKING, cast

from gateway.context import RequestContext
from gateway.dispatch import (
    API_VERSIONS_KEY,
    CloseConnection,
    Reply,
    decode_body,
    encode_reply,
    error_body,
    unexpected_error,
    version_range,
)
from gateway.errors import KafkaApiError
from gateway.handlers.registry import HANDLERS
from gateway.handlers.spec import Buffer, HandlerSpec
from gateway.metrics import request_done, request_started
from kafka_wire.errors import ErrorCode
from kafka_wire.exceptions import DecodeError
from kafka_wire.frames import decode_request_header
from kafka_wire.messages.api_versions import ApiVersionsResponse
from kafka_wire.messages.request_header import RequestHeader
from kafka_wire.primitives import EncodeError
from store.framing import MAPPED_FROM, BackpressuredProtocol

if TYPE_CHECKING:
    from gateway.services import GatewayServices

log = logging.getLogger(__name__)



class _Slot:
    """One request's place in the response order."""

    __slots__ = ("close", "done", "reply", "size")

    def __init__(self, size: int) -> None:
        self.done = False
        self.reply: Reply | None = None
        self.close = False
        self.size = size


class KafkaConnection(BackpressuredProtocol):
    def __init__(self, services: GatewayServices, connections: set[KafkaConnection]) -> None:
        # `connections`: the listener's open connections (it closes them on shutdown and
        # counts them); this one is in it from connection_made to connection_lost.
        config = services.config
        super().__init__(max_frame=config.socket_request_max_bytes, mapped_from=MAPPED_FROM)
        self.services = services
        self._connections = connections
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self._pending: collections.deque[_Slot] = collections.deque()
        self._pending_bytes = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self._max_frame = config.socket_request_max_bytes
        self._max_inflight = config.max_inflight_requests
        self._close_when_drained = False
        self._draining = False
        self._doomed = False
        self._idle = asyncio.Event()  # set while no request awaits its response
        self._idle.set()
        self._applied_tail: asyncio.Future[None] | None = None  # the last request's effects applied
        self._durability: set[asyncio.Future[None]] = set()  # answered when durable: produces in flight

    # -- transport callbacks --

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = f"{peer[0]}:{peer[1]}"
        self._connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._connections.discard(self)
        for t in list(self._tasks):
            t.cancel()
        self._pending.clear()
        self._idle.set()

    def eof_received(self) -> bool | None:
        # Half-closed by the client: answer what is pending, then close.
        if not self._pending:
            return None
        self._close_when_drained = True
        return True

    def close(self) -> None:
        self._closing = True
        if self.transport is not None:
            self.transport.close()

    def stop_reading(self) -> None:
        """For shutdown: take no new requests; those in flight still get their answers."""
        self._draining = True
        if self.transport is not None and not self._closing:
            self.transport.pause_reading()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    def abort(self, why: str) -> None:
        if not self._closing:
            log.info("closing connection from %s: %s", self.peer, why)
        self._closing = True
        if self.transport is not None:
            self.transport.abort()

    # -- framing (store.framing.FramedProtocol) --

    def framing_stopped(self) -> bool:
        return self._closing or self._doomed

    def bad_frame_size(self, size: int, rest: memoryview) -> None:
        self.abort(f"invalid request size {size} (socket.request.max.bytes={self._max_frame})")

    def frame_received(self, frame: bytearray | memoryview, owned: bool) -> None:
        # Handlers patch produce data in place, so each request owns a writable buffer: a
        # frame in the shared receive buffer is copied once, a large one already has its own.
        self._on_frame(frame if owned else bytearray(frame))

    # -- requests --

    def _on_frame(self, frame: bytearray | memoryview) -> None:
        slot = _Slot(len(frame))
        self._idle.clear()
        self._pending.append(slot)
        self._pending_bytes += slot.size
        try:
            header, pos = decode_request_header(memoryview(frame))
        except DecodeError as e:
            self._fail(slot, f"bad request header: {e}")
            return
        spec = HANDLERS.get(header.api_key)
        versions = version_range(spec) if spec is not None else None
        if header.api_key == API_VERSIONS_KEY and (versions is None or header.api_version > versions[1]):
            # Kafka (KIP-511) answers a too-new ApiVersions at v0, listing only ApiVersions' own
            # range so the client retries with a version we know.
            lo, hi = versions if versions is not None else (0, 0)
            body = ApiVersionsResponse(error_code=int(ErrorCode.UNSUPPORTED_VERSION), api_keys=[
                ApiVersionsResponse.ApiVersion(api_key=API_VERSIONS_KEY, min_version=lo, max_version=hi)])
            slot.reply = encode_reply(API_VERSIONS_KEY, 0, header.correlation_id, body)
            self._finish(slot)
            return
        if spec is None or versions is None or not versions[0] <= header.api_version <= versions[1]:
            self._fail(slot, f"unsupported api key {header.api_key} version {header.api_version}")
            return
        loop = asyncio.get_running_loop()
        prev, applied = self._applied_tail, loop.create_future()
        self._applied_tail = applied
        task = loop.create_task(self._run(slot, spec, header, frame, pos, prev, applied))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._update_reading()

    async def _run(self, slot: _Slot, spec: HandlerSpec, header: RequestHeader, frame: bytearray | memoryview, pos: int,
                   prev: asyncio.Future[None] | None, applied: asyncio.Future[None]) -> None:
        key, version = header.api_key, header.api_version
        started = request_started()
        durable: asyncio.Future[None] | None = None

        def on_applied(durability_pending: bool) -> None:
            nonlocal durable
            if applied.done():
                return
            if durability_pending:
                durable = applied.get_loop().create_future()
                self._durability.add(durable)
            applied.set_result(None)

        try:
            if prev is not None and not prev.done():
                await prev
            if self._durability and not spec.overlaps_durability:
                await asyncio.wait(list(self._durability))
            body = decode_body(spec, version, frame, pos)
            ctx = RequestContext(key, version, header.correlation_id, header.client_id, self.peer,
                                 self.services, on_applied, header.unknown_tagged_fields)
            try:
                resp = await spec.fn(ctx, body)
            except KafkaApiError as e:
                resp = error_body(key, version, e.error_code, e.message)
            except (CloseConnection, asyncio.CancelledError):
                raise
            except Exception as e:
                err = unexpected_error(key, e)
                resp = error_body(key, version, err.error_code, err.message)
            slot.reply = None if resp is None else encode_reply(key, version, header.correlation_id, resp)
        except (CloseConnection, DecodeError, EncodeError) as e:
            slot.close = True
            log.info("closing connection from %s: api %d v%d: %s", self.peer, key, version, e)
        except asyncio.CancelledError:
            return
        except Exception:  # an encoding bug must not take the server down
            log.exception("request api %d v%d from %s failed", key, version, self.peer)
            slot.close = True
        finally:
            if not applied.done():
                applied.set_result(None)
            if durable is not None:
                self._durability.discard(durable)
                durable.set_result(None)
        request_done(key, version, started)
        self._finish(slot)

    def _fail(self, slot: _Slot, why: str) -> None:
        log.info("closing connection from %s: %s", self.peer, why)
        slot.close = True
        self._doomed = True  # read no further requests: the connection closes after earlier answers
        self._finish(slot)

    def _finish(self, slot: _Slot) -> None:
        slot.done = True
        if self._closing:
            return
        out: list[Buffer] = []
        close = False
        pending = self._pending
        while pending and pending[0].done:
            s = pending.popleft()
            self._pending_bytes -= s.size
            if s.reply is not None:
                out.extend(s.reply.buffers)
            if s.close:
                close = True
                break
        if not pending:
            self._idle.set()
        assert self.transport is not None
        if out:
            self.transport.writelines(out)
        if close or (self._close_when_drained and not pending):
            # Later requests are dropped, as Kafka drops a closed channel's queue.
            self._closing = True
            for t in list(self._tasks):
                t.cancel()
            self.transport.close()
            return
        self._update_reading()

    # -- reading backpressure (store.framing.BackpressuredProtocol) --

    def too_busy(self) -> bool:
        return len(self._pending) >= self._max_inflight or self._pending_bytes > self._max_frame

    def reading_frozen(self) -> bool:
        return self._closing or self._draining
