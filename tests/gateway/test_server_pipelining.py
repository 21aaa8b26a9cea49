"""The server core in-process (handlers swapped in with monkeypatch): handlers that overlap (their
effects applied early) finishing out of order with responses in request order, acks=0-style silent handlers, error mapping, large frames through
the dedicated-buffer path, and the request size limit."""

from __future__ import annotations

import asyncio
import hashlib
import struct
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import pytest

from gateway.config import GatewayConfig
from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.registry import HANDLERS
from gateway.handlers.spec import HandlerSpec, RawResponse
from gateway.server import GatewayServer
from gateway.services import GatewayServices
from kafka_wire.errors import ErrorCode
from kafka_wire.frames import decode_response, encode_request
from kafka_wire.headers import RequestHeader
from kafka_wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

API_VERSIONS = 18
RAW_KEY = 0  # Produce's key, served by a raw test handler here


@pytest.fixture
async def server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[GatewayServer]:
    async def api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse | None:
        cid = ctx.correlation_id
        if cid % 10 == 7:
            return None  # like Produce with acks=0: nothing is sent
        if cid % 10 == 8:
            raise KafkaApiError(int(ErrorCode.INVALID_REQUEST), "told to fail")
        if cid % 10 == 9:
            raise RuntimeError("a bug in a handler")
        ctx.effects_applied(durability_pending=False)  # the next one may start: they overlap
        await asyncio.sleep((50 - cid % 50) / 1000)  # early requests finish last
        return ApiVersionsResponse(throttle_time_ms=cid)

    async def raw(ctx: RequestContext, body: memoryview) -> RawResponse:
        assert isinstance(body, memoryview) and not body.readonly
        body[0:1] = b"\x00"  # writable in place
        digest = hashlib.sha256(body).digest()
        return RawResponse([struct.pack(">i", len(body)), digest])

    monkeypatch.setitem(HANDLERS, API_VERSIONS, HandlerSpec(API_VERSIONS, api_versions, False, None, None))
    monkeypatch.setitem(HANDLERS, RAW_KEY, HandlerSpec(RAW_KEY, raw, True, None, None))
    config = GatewayConfig(listen_port=0, socket_request_max_bytes=4 << 20)
    services = cast(GatewayServices, SimpleNamespace(config=config))
    srv = GatewayServer(services)
    await srv.start()
    try:
        yield srv
    finally:
        await srv.close()


def _req(api_key: int, version: int, corr: int, body: Any) -> bytes:
    return encode_request(
        RequestHeader(api_key=api_key, api_version=version, correlation_id=corr, client_id="t"), body
    )


async def _read_frame(r: asyncio.StreamReader) -> bytes:
    (n,) = struct.unpack(">i", await r.readexactly(4))
    return await r.readexactly(n)


async def test_pipelined_responses_in_request_order(server: GatewayServer) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", server.port)
    corrs = list(range(1, 61))
    w.write(
        b"".join(
            _req(
                API_VERSIONS, 3, c, ApiVersionsRequest(client_software_name="t", client_software_version="1")
            )
            for c in corrs
        )
    )
    await w.drain()
    got = []
    for c in corrs:
        if c % 10 == 7:
            continue
        cid, resp = decode_response(API_VERSIONS, 3, await _read_frame(r))
        assert isinstance(resp, ApiVersionsResponse)
        got.append(cid)
        if c % 10 == 8:
            assert resp.error_code == ErrorCode.INVALID_REQUEST
        elif c % 10 == 9:
            assert resp.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
        else:
            assert (resp.error_code, resp.throttle_time_ms) == (0, c)
    assert got == [c for c in corrs if c % 10 != 7]
    w.close()


async def test_large_frames_raw_handler(server: GatewayServer) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", server.port)
    bodies = [bytes([i % 251]) * n for i, n in enumerate([10, 300_000, 5, 3_000_000, 262_144, 1])]
    frames = []
    for i, body in enumerate(bodies):
        head = RequestHeader(api_key=RAW_KEY, api_version=9, correlation_id=100 + i, client_id="t")
        out = bytearray(4)
        head.encode_into(out, 2)  # Produce v9 is flexible: header v2
        out += body
        out[0:4] = struct.pack(">i", len(out) - 4)
        frames.append(bytes(out))
    blob = b"".join(frames)
    for i in range(0, len(blob), 70_000):  # arbitrary split points across frames
        w.write(blob[i : i + 70_000])
        await w.drain()
    for i, body in enumerate(bodies):
        frame = await _read_frame(r)
        cid, tags, n = struct.unpack_from(">ibi", frame, 0)
        assert (cid, tags, n) == (100 + i, 0, len(body))
        assert frame[9:] == hashlib.sha256(b"\x00" + body[1:]).digest()
    w.close()


async def test_oversized_request_closes_only_that_connection(server: GatewayServer) -> None:
    r1, w1 = await asyncio.open_connection("127.0.0.1", server.port)
    r2, w2 = await asyncio.open_connection("127.0.0.1", server.port)
    w1.write(struct.pack(">i", (4 << 20) + 1) + b"\x00" * 100)
    assert await r1.read() == b""  # closed without an answer
    w2.write(_req(API_VERSIONS, 0, 1, ApiVersionsRequest()))
    cid, resp = decode_response(API_VERSIONS, 0, await _read_frame(r2))
    assert cid == 1 and isinstance(resp, ApiVersionsResponse) and resp.error_code == 0
    w1.close()
    w2.close()


async def test_close_answers_requests_in_flight(server: GatewayServer) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", server.port)
    w.write(_req(API_VERSIONS, 1, 1, ApiVersionsRequest()))  # sleeps ~49 ms in the handler
    await w.drain()
    await asyncio.sleep(0.01)
    closing = asyncio.create_task(server.close(grace=5.0))
    cid, resp = decode_response(API_VERSIONS, 1, await _read_frame(r))
    assert cid == 1 and isinstance(resp, ApiVersionsResponse) and resp.throttle_time_ms == 1
    assert await r.read() == b""  # then the connection closes
    await closing
    w.close()


async def test_bad_request_closes_after_earlier_answers(server: GatewayServer) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", server.port)
    bad = struct.pack(">hhih", 9999, 0, 2, 1) + b"x"
    w.write(_req(API_VERSIONS, 1, 1, ApiVersionsRequest()) + struct.pack(">i", len(bad)) + bad
            + _req(API_VERSIONS, 1, 3, ApiVersionsRequest()))
    await w.drain()
    cid, resp = decode_response(API_VERSIONS, 1, await _read_frame(r))
    assert cid == 1 and isinstance(resp, ApiVersionsResponse) and resp.error_code == 0
    assert await r.read() == b""  # request 3 is never answered: the connection closed
    w.close()
