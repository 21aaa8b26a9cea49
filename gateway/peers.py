"""Kafka requests from one gateway to another (a transaction coordinator asking partition
owners for markers, a partition owner asking a coordinator to verify a transaction): one
pipelined connection per peer gateway, Kafka's own wire format."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import struct
from typing import TYPE_CHECKING

from kafka_wire.api import API_NAMES
from kafka_wire.frames import decode_response, encode_request
from kafka_wire.messages.request_header import RequestHeader
from kafka_wire.primitives import Struct
from store.tasks import within

if TYPE_CHECKING:
    from gateway.cluster.membership import GatewayNode

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
CLIENT_ID = "quire-gateway"


class PeerError(Exception):
    """The peer could not be reached or the connection broke: the request may be retried."""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.waiting: dict[int, tuple[int, int, asyncio.Future[Struct]]] = {}
        self.ids = itertools.count(1)
        self.task = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        err: BaseException = PeerError("connection closed")
        try:
            while True:
                size = _SIZE.unpack(await self.reader.readexactly(4))[0]
                frame = await self.reader.readexactly(size)
                (cid,) = _SIZE.unpack_from(frame)
                entry = self.waiting.pop(cid, None)
                if entry is None:
                    continue
                key, version, fut = entry
                try:
                    _, body = decode_response(key, version, frame)
                except Exception as e:
                    if not fut.done():
                        fut.set_exception(PeerError(f"bad response: {e}"))
                    continue
                if not fut.done():
                    fut.set_result(body)
        except (OSError, asyncio.IncompleteReadError) as e:
            err = PeerError(f"connection lost: {e}")
        finally:
            self.close()
            for _, _, fut in self.waiting.values():
                if not fut.done():
                    fut.set_exception(err)
            self.waiting.clear()

    @property
    def closed(self) -> bool:
        return self.writer.is_closing() or self.task.done()

    def send(self, api_key: int, version: int, body: Struct) -> asyncio.Future[Struct]:
        cid = next(self.ids)
        fut: asyncio.Future[Struct] = asyncio.get_running_loop().create_future()
        self.waiting[cid] = (api_key, version, fut)
        header = RequestHeader(api_key=api_key, api_version=version, correlation_id=cid,
                               client_id=CLIENT_ID)
        self.writer.write(encode_request(header, body))
        return fut

    def close(self) -> None:
        self.writer.close()


class PeerClients:
    """Connections to the other gateways, opened on first use."""

    def __init__(self, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self._conns: dict[tuple[str, int], _Connection] = {}
        self._lock = asyncio.Lock()

    async def _connection(self, node: GatewayNode) -> _Connection:
        key = (node.host, node.port)
        conn = self._conns.get(key)
        if conn is not None and not conn.closed:
            return conn
        async with self._lock:
            conn = self._conns.get(key)
            if conn is None or conn.closed:
                try:
                    reader, writer = await within(asyncio.open_connection(node.host, node.port),
                                                            self.timeout_s)
                except (OSError, TimeoutError) as e:
                    raise PeerError(f"cannot reach gateway {node.node_id} at {node.host}:{node.port}: {e}") from e
                conn = self._conns[key] = _Connection(reader, writer)
            return conn

    async def request(self, node: GatewayNode, api: str, version: int, body: Struct) -> Struct:
        """Send one request and await its response; PeerError if the connection fails."""
        conn = await self._connection(node)
        fut = conn.send(API_NAMES[api].api_key, version, body)
        try:
            return await within(fut, self.timeout_s)
        except TimeoutError as e:
            conn.close()
            raise PeerError(f"gateway {node.node_id} did not answer {api} in {self.timeout_s}s") from e

    async def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
            with contextlib.suppress(BaseException):
                await conn.task
        self._conns.clear()
