"""READ_RANGE flagged FLAG_BACKGROUND: sent by the bookie's low-priority threads with sendfile
from the entry logs (store/bookie/background_reads.py), through an in-process server."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from store.bookie import background_reads
from store.bookie import protocol as p
from store.bookie.bookie import Bookie, BookieConfig
from store.bookie.client import BookieClient
from store.bookie.entry import pack_entry
from store.bookie.server import BookieServer
from store.bookie.storage import StorageConfig
from tests.support.wait import eventually


def sent_in_background() -> float:
    return REGISTRY.get_sample_value("quire_bookie_background_read_bytes_total") or 0.0


async def start_server(tmp_path: Path, threads: int = 2, **config: Any) -> BookieServer:
    cfg = BookieConfig(storage=StorageConfig(flush_interval=3600, compaction_interval=3600),
                       background_read_threads=threads, **config)
    b = Bookie(tmp_path / "d", config=cfg)
    await b.start()
    s = BookieServer(b)
    await s.listen()
    return s


async def stop_server(s: BookieServer) -> None:
    await s.close()
    await s.bookie.close()


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[BookieServer]:
    s = await start_server(tmp_path)
    yield s
    await stop_server(s)


async def add_all(client: BookieClient, ledger: int, payloads: list[bytes]) -> list[bytes]:
    entries = [pack_entry(ledger, i, i - 1, v) for i, v in enumerate(payloads)]
    await asyncio.gather(*(client.add(ledger, e) for e in entries))
    return entries


async def test_background_range_reads_match_the_loops(server: BookieServer) -> None:
    plain = BookieClient(server.address)
    bulk = BookieClient(server.address, background_reads=True)
    try:
        entries = await add_all(plain, 5, [bytes([i % 251]) * (1000 + 37 * i) for i in range(300)])
        await server.bookie.storage.flush()  # to the entry logs: what a scan reads
        more = [pack_entry(5, 300 + i, 299 + i, b"cached %d" % i) for i in range(20)]
        for e in more:  # still in the write cache: the response mixes buffers and file spans
            await plain.add(5, e)
        entries += more
        before = sent_in_background()
        for first, last, max_bytes in ((0, 319, 1 << 30), (7, 150, 1 << 30), (290, 319, 1 << 30), (0, 319, 50_000)):
            want = await plain.read_range(5, first, last, max_bytes)
            got = await bulk.read_range(5, first, last, max_bytes)
            assert [bytes(e) for e in got] == [bytes(e) for e in want]
            assert [bytes(e) for e in got] == entries[first : first + len(got)]
        assert sent_in_background() > before + sum(len(e) for e in entries[:300])
        # Pipelined on one connection, with other requests between them: each answered whole.
        reads = [bulk.read_range(5, i, 319) for i in range(0, 300, 30)]
        lacs = [bulk.read_lac(5) for _ in range(10)]
        results = await asyncio.gather(*reads, *lacs)
        for i, got in zip(range(0, 300, 30), results[:10]):
            assert [bytes(e) for e in got] == entries[i:320]
        assert all(r == (318, 319) for r in results[10:])
    finally:
        await plain.close()
        await bulk.close()


async def test_background_read_of_a_cached_range_and_errors(server: BookieServer) -> None:
    bulk = BookieClient(server.address, background_reads=True)
    try:
        entries = await add_all(bulk, 6, [b"x%d" % i for i in range(10)])
        assert [bytes(e) for e in await bulk.read_range(6, 2, 8)] == entries[2:9]
        with pytest.raises(Exception, match="no entry 10"):
            await bulk.read_range(6, 10, 12)
        with pytest.raises(Exception, match="bad range"):
            await bulk.read_range(6, 5, 3)
        assert await bulk.read_lac(6) == (8, 9)  # the connection is fine after both
    finally:
        await bulk.close()


def raw_background_read(address: str, ledger: int, last: int) -> socket.socket:
    """A client that asks for a large background range and then never reads."""
    host, _, port = address.rpartition(":")
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    body = p.RANGE_REQ.pack(ledger, 0, last, 1 << 30)
    s.sendall(b"".join(p.encode(p.Op.READ_RANGE, p.FLAG_BACKGROUND, 1, body)))
    return s


async def test_a_client_that_stops_reading_holds_no_thread(tmp_path: Path) -> None:
    server = await start_server(tmp_path, threads=1)
    try:
        writer = BookieClient(server.address)
        entries = await add_all(writer, 7, [bytes(64 << 10)] * 128)  # 8 MiB: far more than the socket holds
        await server.bookie.storage.flush()
        await writer.close()
        stuck = raw_background_read(server.address, 7, 127)
        await eventually(lambda: any(c._bg_send is not None for c in server.conns))
        stuck.close()  # gone mid-response: the one thread must come free
        bulk = BookieClient(server.address, background_reads=True)
        try:
            got = await asyncio.wait_for(bulk.read_range(7, 0, 127, 1 << 30), 30)
            assert len(got) == 128 and bytes(got[-1]) == entries[-1]
        finally:
            await bulk.close()
        # A client that stays connected but never reads: closing the server cancels its send.
        idle = raw_background_read(server.address, 7, 127)
        try:
            await eventually(lambda: any(c._bg_send is not None for c in server.conns))
            await asyncio.wait_for(stop_server(server), 30)
        finally:
            idle.close()
    except BaseException:
        await stop_server(server)
        raise


def thread_nices() -> dict[int, int]:
    """This process's threads: native id -> nice level, from /proc."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[int(tid)] = int(fields[16])  # stat field 19
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread priorities through /proc")
@pytest.mark.parametrize("nice", [None, 19])
async def test_background_threads_nice(tmp_path: Path, nice: int | None) -> None:
    """At the bookie's own priority by default (a lower one waits on the GIL: see the module
    doc); at the nice level configured, that thread alone."""
    own = os.getpriority(os.PRIO_PROCESS, 0)  # the suite may run under nice itself
    config = {} if nice is None else {"background_read_nice": nice}
    before = thread_nices()
    server = await start_server(tmp_path, threads=1, **config)
    try:
        bulk = BookieClient(server.address, background_reads=True)
        try:
            entries = await add_all(bulk, 8, [b"y%d" % i for i in range(50)])
            await server.bookie.storage.flush()
            sent = sent_in_background()
            assert [bytes(e) for e in await bulk.read_range(8, 0, 49)] == entries
            await eventually(lambda: sent_in_background() > sent)  # by the background thread
        finally:
            await bulk.close()
        new = {tid: n for tid, n in thread_nices().items() if tid not in before}
        assert len(new) >= 2  # the background thread among the server's new threads
        assert [n for n in new.values() if n != own] == ([] if nice is None or nice == own else [nice])
    finally:
        await stop_server(server)


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="read-ahead through posix_fadvise")
@pytest.mark.parametrize("read_ahead", [8192, 0])
async def test_background_sends_read_ahead_a_bounded_amount(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            read_ahead: int) -> None:
    """Each span goes out in chunks of quire.bookie.background.read.ahead.bytes, the kernel
    asked for the next ones while fewer than two lie ahead of the send, from an fd of the log
    with the kernel's read-ahead off; 0 leaves it all to the kernel, on the log's plain fd."""
    events: list[tuple[str, int, int, int]] = []  # (call, fd, offset, length or advice), in call order
    fadvise, sendfile = os.posix_fadvise, os.sendfile

    def recording_fadvise(fd: int, offset: int, length: int, advice: int) -> None:
        events.append(("fadvise", fd, offset, length if advice == os.POSIX_FADV_WILLNEED else -advice))
        fadvise(fd, offset, length, advice)

    def recording_sendfile(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        n = sendfile(out_fd, in_fd, offset, count)
        events.append(("sendfile", in_fd, offset or 0, n))
        return n

    monkeypatch.setattr(os, "posix_fadvise", recording_fadvise)
    monkeypatch.setattr(os, "sendfile", recording_sendfile)
    server = await start_server(tmp_path, threads=1, background_read_ahead=read_ahead)
    try:
        plain = BookieClient(server.address)
        bulk = BookieClient(server.address, background_reads=True)
        try:
            entries = await add_all(plain, 9, [bytes([i % 251]) * (3000 + 17 * i) for i in range(100)])
            await server.bookie.storage.flush()
            assert [bytes(e) for e in await plain.read_range(9, 0, 99)] == entries  # the plain fd
            assert [bytes(e) for e in await bulk.read_range(9, 0, 99)] == entries
            fds = server.bookie.storage.logs._rfds  # (log id, for scans) -> fd
        finally:
            await bulk.close()
            await plain.close()
        plain_fds = {fd for (_, scan), fd in fds.items() if not scan}
    finally:
        await stop_server(server)
    sends = [e for e in events if e[0] == "sendfile"]
    assert sum(e[3] for e in sends) >= sum(len(e) for e in entries)  # the span, prefixes and all
    span_fd = sends[0][1]
    assert {e[1] for e in sends} == {span_fd}
    assert (span_fd in plain_fds) == (not read_ahead)
    advice = [e for e in events if e[0] == "fadvise"]
    if not read_ahead:
        assert advice == []
        return
    assert advice[0] == ("fadvise", span_fd, 0, -os.POSIX_FADV_RANDOM)  # on opening the scan fd
    asked = sent = start = sends[0][2]
    for call, fd, offset, n in events:
        assert fd == span_fd
        if call == "fadvise" and n > 0:
            assert offset == asked and 0 < n <= read_ahead  # the next chunk, in order
            assert offset < sent + 2 * read_ahead  # only while fewer than two lie ahead
            asked += n
        elif call == "sendfile":
            assert offset == sent and 0 < n <= read_ahead
            sent += n
            assert asked >= sent  # every byte sent was asked for first
    assert asked == sent > start + 3 * read_ahead


def policies(threads: set[str]) -> dict[int, int]:
    """Native id -> scheduling policy, of those of `threads` (ids in /proc/self/task) still there."""
    out = {}
    for tid in threads:
        try:
            out[int(tid)] = os.sched_getscheduler(int(tid))
        except ProcessLookupError:  # the thread ended meanwhile
            continue
    return out


@pytest.mark.skipif(not hasattr(os, "SCHED_RR") or not hasattr(os, "sched_getscheduler"),
                    reason="real-time policies through sched_setscheduler")
async def test_background_sends_step_down_from_realtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bookie whose threads run under SCHED_RR (quire.realtime.priority: the threads it starts
    inherit it) sends its background reads under SCHED_OTHER, and a thread put back under
    SCHED_RR from outside (chrt -a) steps down again at its next send; its other threads keep
    SCHED_RR."""
    sending: list[tuple[int, int]] = []  # (thread, its policy) at each span's sendfile
    sendfile_all = background_reads._sendfile_all

    def recording(*args: Any) -> int:
        sending.append((threading.get_native_id(), os.sched_getscheduler(0)))
        return sendfile_all(*args)

    monkeypatch.setattr(background_reads, "_sendfile_all", recording)
    before = set(os.listdir("/proc/self/task"))
    try:
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1))  # as apply_realtime, before the bookie starts
    except PermissionError:
        pytest.skip("SCHED_RR needs CAP_SYS_NICE or an RLIMIT_RTPRIO")
    try:
        server = await start_server(tmp_path, threads=1)
    except BaseException:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        raise
    try:
        bulk = BookieClient(server.address, background_reads=True)
        try:
            entries = await add_all(bulk, 10, [b"z%d" % i * 300 for i in range(60)])
            await server.bookie.storage.flush()
            try:  # the pool starts its thread at the first send, from this (the loop's) thread
                assert [bytes(e) for e in await bulk.read_range(10, 0, 59)] == entries
            finally:
                # the threads started while this one ran real-time: one started after it steps
                # back (a helper thread of an earlier test's) did not inherit SCHED_RR
                during = set(os.listdir("/proc/self/task"))
                os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))  # the bookie's threads keep SCHED_RR
            assert sending and {policy for _, policy in sending} == {os.SCHED_OTHER}
            thread = sending[0][0]
            assert {t for t, _ in sending} == {thread}  # the pool's one thread
            started = during - before - {str(thread)}
            assert started and set(policies(started).values()) == {os.SCHED_RR}
            os.sched_setscheduler(thread, os.SCHED_RR, os.sched_param(1))  # from outside, as chrt -a would
            del sending[:]
            assert [bytes(e) for e in await bulk.read_range(10, 0, 59)] == entries
            assert sending and set(sending) == {(thread, os.SCHED_OTHER)}
        finally:
            await bulk.close()
    finally:
        await stop_server(server)
