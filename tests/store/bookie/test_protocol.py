"""The bookie protocol through an in-process server: the client API, errors, abuse."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from store.bookie import protocol as p
from store.bookie.bookie import Bookie, BookieConfig
from store.bookie.client import BookieClient, BookiePool
from store.bookie.entry import pack_entry, unpack_entry
from store.bookie.errors import (
    BadRequestError,
    BookieUnavailableError,
    DigestMismatchError,
    FencedError,
    NoEntryError,
    NoLedgerError,
    Status,
)
from store.bookie.server import BookieServer
from store.bookie.storage import StorageConfig
from tests.support.wait import eventually


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[BookieServer]:
    cfg = BookieConfig(storage=StorageConfig(flush_interval=3600, compaction_interval=3600))
    b = Bookie(tmp_path / "d", config=cfg)
    await b.start()
    s = BookieServer(b, max_frame=1 << 20)
    await s.listen()
    yield s
    await s.close()
    await b.close()


@pytest.fixture
async def client(server: BookieServer) -> AsyncIterator[BookieClient]:
    c = BookieClient(server.address, request_timeout=5)
    await c.connect()
    yield c
    await c.close()


async def test_add_read_lac_fence_delete(client: BookieClient) -> None:
    entries = [pack_entry(3, i, i - 1, b"v%d" % i) for i in range(100)]
    await asyncio.gather(*(client.add(3, e) for e in entries))  # pipelined on one connection
    assert await client.read_lac(3) == (98, 99)
    assert await client.read(3, 42) == entries[42]
    assert await client.read(3, -1) == entries[99]
    assert await client.read_range(3, 10, 19) == entries[10:20]
    assert await client.fence(3) == (98, 99)
    with pytest.raises(FencedError):
        await client.add(3, pack_entry(3, 100, 99, b"old writer"))
    await client.add(3, pack_entry(3, 100, 99, b"recovery"), recovery=True)
    assert await client.fence(3) == (99, 100)
    await client.delete_ledger(3)
    with pytest.raises(NoLedgerError):
        await client.read_lac(3)


async def test_fence_unknown_ledger_blocks_later_adds(client: BookieClient) -> None:
    assert await client.fence(77) == (-1, -1)
    with pytest.raises(FencedError):
        await client.add(77, pack_entry(77, 0, -1, b"x"))
    # A fencing read on a ledger with no entries: fences, then "no entry".
    with pytest.raises(NoEntryError):
        await client.read(78, 0, fence=True)
    with pytest.raises(FencedError):
        await client.add(78, pack_entry(78, 0, -1, b"x"))


async def test_errors_for_one_request_only(client: BookieClient) -> None:
    await client.add(1, pack_entry(1, 0, -1, b"a"))
    bad = bytearray(pack_entry(1, 1, 0, b"b"))
    bad[-1] ^= 0x40
    results = await asyncio.gather(
        client.add(1, bytes(bad)),
        client.read(1, 5),
        client.read(999, 0),
        client.add(2, pack_entry(1, 1, 0, b"wrong ledger")),
        client.read_range(1, 0, 0),
        return_exceptions=True,
    )
    assert isinstance(results[0], DigestMismatchError)
    assert isinstance(results[1], NoEntryError)
    assert isinstance(results[2], NoLedgerError)
    assert isinstance(results[3], BadRequestError)
    assert results[4] == [pack_entry(1, 0, -1, b"a")]
    assert "checksum" in str(results[0])


def parked_polls(server: BookieServer, ledger_id: int) -> int:
    """LAC long polls the bookie holds for a ledger (known to it or not yet)."""
    return len(server.bookie.storage.lac_polls.waiting.get(ledger_id, []))


async def test_long_poll_wakes_on_add_and_times_out(client: BookieClient, server: BookieServer) -> None:
    await client.add(4, pack_entry(4, 0, -1, b"0"))
    assert await client.wait_lac(4, -1, 0.05) == -1  # LAC -1: nothing new within the timeout
    waiter = asyncio.create_task(client.wait_lac(4, -1, 30))
    await eventually(lambda: parked_polls(server, 4) == 1)
    assert not waiter.done()
    await client.add(4, pack_entry(4, 1, 0, b"1"))  # carries LAC 0
    assert await asyncio.wait_for(waiter, 10) == 0
    assert await client.wait_lac(4, -1, 5) == 0  # already past: immediate


async def test_long_poll_on_unknown_ledger_parks_until_it_appears(
    client: BookieClient, server: BookieServer
) -> None:
    # A reader may poll before the writer's first add reaches this bookie: no NO_LEDGER.
    assert await client.wait_lac(404, -1, 0.05) == -1  # times out like any poll
    assert server.bookie.storage.lac_polls.waiting == {}  # the timed-out poll left nothing behind
    waiter = asyncio.create_task(client.wait_lac(404, -1, 30))
    await eventually(lambda: parked_polls(server, 404) == 1)
    assert not waiter.done()
    await client.add(404, pack_entry(404, 0, -1, b"0"))  # creates the ledger, LAC still -1
    assert 404 in server.bookie.storage.ledgers and parked_polls(server, 404) == 1  # still parked
    assert not waiter.done()
    await client.add(404, pack_entry(404, 1, 0, b"1"))
    assert await asyncio.wait_for(waiter, 10) == 0
    # Fencing and reads of an unknown ledger still answer at once, as before.
    with pytest.raises(NoLedgerError):
        await client.read(405, 0)
    with pytest.raises(NoLedgerError):
        await client.read_lac(405)
    # A parked poll on a ledger that gets deleted fails; polls on deleted ledgers fail at once.
    parked = asyncio.create_task(client.wait_lac(406, -1, 30))
    await eventually(lambda: parked_polls(server, 406) == 1)
    await client.delete_ledger(406)
    with pytest.raises(NoLedgerError):
        await asyncio.wait_for(parked, 10)
    with pytest.raises(NoLedgerError):
        await client.wait_lac(406, -1, 1)
    assert server.bookie.storage.lac_polls.waiting == {}


async def _raw(server: BookieServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(server.host, server.port)


async def _response(reader: asyncio.StreamReader) -> tuple[int, int, int, bytes]:
    head = await asyncio.wait_for(reader.readexactly(p.HEADER_SIZE), 10)
    flen, op, status, rid = p.HEADER.unpack(head)
    body = await reader.readexactly(flen - p.FRAME_OVERHEAD)
    return op, status, rid, body


@pytest.mark.parametrize(
    "junk",
    [
        struct.pack(">i", -5) + b"\x01\x00" + struct.pack(">Q", 9),  # negative length
        struct.pack(">i", 1 << 30) + b"\x01\x00" + struct.pack(">Q", 9),  # oversized
        struct.pack(">i", 3) + b"abc",  # shorter than a header
    ],
    ids=["negative", "oversized", "too-short"],
)
async def test_bad_frame_lengths_error_and_close_only_that_connection(
    server: BookieServer, client: BookieClient, junk: bytes
) -> None:
    await client.add(1, pack_entry(1, 0, -1, b"a"))
    reader, writer = await _raw(server)
    writer.write(junk)
    _op, status, rid, body = await _response(reader)
    assert status == Status.BAD_REQUEST and b"frame length" in body
    if len(junk) >= p.HEADER_SIZE:
        assert rid == 9
    assert await asyncio.wait_for(reader.read(), 10) == b""  # closed
    writer.close()
    assert await client.read(1, 0) == pack_entry(1, 0, -1, b"a")  # others unaffected


async def test_malformed_bodies_and_unknown_ops_keep_connection(server: BookieServer) -> None:
    reader, writer = await _raw(server)
    writer.writelines(p.encode(p.Op.READ, 0, 1, b"short"))  # body too short
    writer.writelines(p.encode(99, 0, 2, b""))  # unknown op
    writer.writelines(p.encode(p.Op.ADD, 0, 3, struct.pack(">q", 1) + b"tiny"))  # entry < header
    writer.writelines(p.encode(p.Op.ADD, 0, 4, b"xx"))  # no ledger id
    writer.writelines(p.encode(p.Op.READ_RANGE, 0, 5, p.RANGE_REQ.pack(1, 5, 2, 100)))  # last < first
    writer.writelines(p.encode(p.Op.READ_LAC, 0, 6, p.LEDGER.pack(12345)))
    got = {}
    for _ in range(6):
        _op, status, rid, body = await _response(reader)
        got[rid] = (status, body)
    assert got[1][0] == Status.BAD_REQUEST
    assert got[2][0] == Status.BAD_REQUEST and b"unknown op" in got[2][1]
    assert got[3][0] == Status.BAD_REQUEST
    assert got[4][0] == Status.BAD_REQUEST
    assert got[5][0] == Status.BAD_REQUEST
    assert got[6][0] == Status.NO_LEDGER
    # Still usable after all that.
    e = pack_entry(8, 0, -1, b"fine")
    writer.writelines(p.encode(p.Op.ADD, 0, 7, p.LEDGER.pack(8), e))
    assert (await _response(reader))[1:3] == (Status.OK, 7)
    writer.close()


async def test_garbage_and_truncated_frames_while_another_client_is_served(
    server: BookieServer, client: BookieClient
) -> None:
    stop = asyncio.Event()
    served = 0

    async def steady() -> None:
        nonlocal served
        eid = 0
        while not stop.is_set():
            await client.add(50, pack_entry(50, eid, eid - 1, b"steady"))
            assert await client.read(50, eid) == pack_entry(50, eid, eid - 1, b"steady")
            eid += 1
            served += 1

    task = asyncio.create_task(steady())
    # Random garbage: its first 4 bytes read as a huge length -> error + close.
    reader, writer = await _raw(server)
    writer.write(b"\xde\xad\xbe\xef" * 1000)
    data = await asyncio.wait_for(reader.read(), 10)  # until the server closes
    _, _, status, _ = p.HEADER.unpack_from(data)
    assert status == Status.BAD_REQUEST
    writer.close()
    # A truncated frame followed by a disconnect: nothing breaks.
    reader, writer = await _raw(server)
    writer.write(p.encode(p.Op.ADD, 0, 1, b"x" * 100)[0] + b"x" * 10)
    await writer.drain()
    writer.close()
    # A frame trickled in byte by byte is still parsed.
    reader, writer = await _raw(server)
    frame = b"".join(p.encode(p.Op.READ_LAC, 0, 77, p.LEDGER.pack(50)))
    for i in range(len(frame)):
        writer.write(frame[i : i + 1])
        await writer.drain()
        await asyncio.sleep(0)
    _, status, rid, _body = await _response(reader)
    assert (status, rid) == (Status.OK, 77)
    writer.close()
    before = served
    await eventually(lambda: served > before)  # still serving the steady client after all that
    stop.set()
    await task
    assert served > 0


async def test_client_reconnects_and_reports_unavailable(tmp_path: Path) -> None:
    b = Bookie(tmp_path / "d")
    await b.start()
    s = BookieServer(b)
    await s.listen()
    c = BookieClient(s.address, connect_timeout=2, request_timeout=2)
    await c.add(1, pack_entry(1, 0, -1, b"a"))  # lazy connect
    port = s.port
    await s.close()
    with pytest.raises(BookieUnavailableError):
        await c.read(1, 0)
    s2 = BookieServer(b, port=port)
    await s2.listen()
    assert await c.read(1, 0) == pack_entry(1, 0, -1, b"a")  # reconnected
    await c.close()
    await s2.close()
    await b.close()
    with pytest.raises(BookieUnavailableError):
        await BookieClient(f"127.0.0.1:{port}", connect_timeout=1).read_lac(1)


async def test_pool_shares_connections(server: BookieServer) -> None:
    pool = BookiePool()
    a, b = pool.get(server.address), pool.get(server.address)
    assert a is b
    await a.add(1, pack_entry(1, 0, -1, b"x"))
    _, _eid, _, payload = unpack_entry(await b.read(1, 0), 1, 0)
    assert bytes(payload) == b"x"
    await pool.close_all()


async def test_client_refuses_oversized_requests_locally(client: BookieClient) -> None:
    big = pack_entry(1, 0, -1, bytes(p.DEFAULT_MAX_FRAME))
    with pytest.raises(BadRequestError):
        await client.add(1, big)
    with pytest.raises(BadRequestError):
        client.add_nowait(1, big)
    await client.add(1, pack_entry(1, 0, -1, b"small"))  # connection unharmed
    fut = client.add_nowait(1, pack_entry(1, 1, 0, b"fast path"))
    await fut
    assert await client.read_lac(1) == (0, 1)


async def test_long_poll_timeouts_do_not_pile_up(client: BookieClient, server: BookieServer) -> None:
    await client.add(6, pack_entry(6, 0, -1, b"0"))
    for _ in range(5):
        assert await client.wait_lac(6, 5, 0.01) == 5
    assert server.bookie.storage.lac_polls.waiting.get(6, []) == []
