"""Background range reads: READ_RANGE requests a client flags FLAG_BACKGROUND (bulk scans,
e.g. the Spark data source reading closed ledgers) are sent by a small pool of threads, with
sendfile straight from the entry logs, instead of by the event loop that takes the adds.

A scan's bytes then cost the bookie no pread copy and no user-space send, and what they do
cost (the kernel's page-cache-to-socket work) runs off the loop, which the adds wait for.
BookKeeper keeps reads and writes on separate thread pools for the same reason.

The threads keep the bookie's CPU priority unless told otherwise
(quire.bookie.background.read.nice). A lower one inverts priorities through the GIL: a thread
back from sendfile or poll waits for the GIL, asks the loop to drop it after the switch
interval, and CPython's loop thread then waits, at its next release, until that thread has
taken it, which a low-priority thread on busy CPUs does late. bench/gil_priority.py measures
it: with both CPUs busy, a 1 ms round of a main thread whose process had another thread taking
the GIL between short syscalls ran late by (p99.9) 9-13 ms with that thread at nice 0, 41-45
ms at nice 10 and 380 ms under SCHED_IDLE (once 1.4 s).

Under a real-time policy, though, they step down: a bookie run with quire.realtime.priority (its
threads under SCHED_RR, so that the write path's wake-ups take a CPU from batch work at once)
would otherwise run its scans' sends at the same real-time priority as the adds, and a woken
add waited behind a send on its CPU. Each send first puts its thread back under SCHED_OTHER if
it finds it real-time, inherited at the thread's start or set later from outside (`chrt -a`).
In a probe (standalone, three bookies, every thread under SCHED_RR from the start, a 20 MB/s
producer, warm direct scans, 3 windows of 12 s each): the producer's p99 went from 10-11 ms
alone to 15 ms during the scans with the sends real-time, to 12 ms with them stepped down. In
bench/spark_scan.py's real-time control, direct scans took the p99 to x1.50 of alone in bench 38
and x1.33 and x1.50 in benches 39 and 40, after this change.

The threads read ahead of what they send themselves, a bounded amount: each span goes out in
chunks of quire.bookie.background.read.ahead.bytes (512 KiB), with the kernel asked
(POSIX_FADV_WILLNEED) for the next chunks while fewer than two lie ahead of the send, on an fd
of the log with the kernel's own read-ahead off (EntryLogs.acquire(scan=True)). The kernel's
read-ahead (8 MiB a stream on the virtual disk benches run on) queued so many reads ahead of the
journal's writes that its fdatasync waited behind them. In a probe (standalone, three bookies,
a 20 MB/s producer, the page cache dropped at each scan window's start, 3 windows each): the
kernel's read-ahead read 1,123-2,319 MiB from disk per 12 s scan window of a 1 GiB topic, and
the producer's p99 was 183, 41 and 26 ms (alone 15-24); with the bounded read-ahead the scans
read 544-1,046 MiB and the p99 was 21, 29 and 32 ms (alone 8-15). A full scan of the topic
alone from a cold page cache ran at 117 and 143 MiB/s with the kernel's read-ahead, 176 and
224 MiB/s with the bounded one. 0 leaves read-ahead to the kernel.

The thread writes to the connection's socket directly (a dup of its fd), so the connection
holds its other responses back while one runs and only starts one when its transport has
nothing buffered (server.BookieConnection).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import select
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from store.bookie.entry_log import FileSpan
from store.bookie.journal import FADVISE, IOV_MAX
from store.bookie.metrics import BACKGROUND_READ_BYTES, BACKGROUND_READ_METRICS
from store.framing import Buffer

log = logging.getLogger(__name__)

Piece = Buffer | FileSpan

_POLL_MS = 200  # how often a send blocked on a full socket looks whether it was cancelled
DEFAULT_READ_AHEAD = 512 << 10  # bytes a background send reads ahead a chunk (module doc)
# The real-time policies a background send steps down from (module doc); none where the
# platform has no sched_getscheduler (macOS).
_REALTIME = frozenset({os.SCHED_RR, os.SCHED_FIFO}) if hasattr(os, "sched_getscheduler") else frozenset()


class SendCancelled(Exception):
    """The connection went away while its background send waited for room in the socket."""


@dataclass
class BackgroundSend:
    """One response for a background thread to write: buffers and entry-log spans, in order."""

    pieces: list[Piece]
    cancelled: threading.Event = field(default_factory=threading.Event)


class BackgroundReaders:
    """The bookie's pool of background send threads, each at nice `nice` (0: unchanged; see the
    module doc before lowering it), reading ahead `read_ahead` bytes a chunk (0: the kernel's
    read-ahead; spans then come from the logs' plain fds)."""

    def __init__(self, threads: int = 2, nice: int = 0, read_ahead: int = DEFAULT_READ_AHEAD) -> None:
        self.nice = nice
        self.read_ahead = max(0, read_ahead) if FADVISE else 0
        BACKGROUND_READ_METRICS.register()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, threads), thread_name_prefix="background-read", initializer=self._lower_priority
        )

    def _lower_priority(self) -> None:
        if self.nice <= 0:
            return
        try:
            # Linux: setpriority on a thread id renices that thread only.
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.nice)
        except (OSError, AttributeError) as e:  # not permitted, or not Linux: serve at the normal priority
            log.info("background read thread keeps its priority: %s", e)

    def submit(self, sock_fd: int, send: BackgroundSend) -> concurrent.futures.Future[int]:
        """Write `send` to the socket (a dup of sock_fd, so the transport closing meanwhile
        cannot hand its number to another file); the future gives the bytes written."""
        fd = os.dup(sock_fd)
        try:
            return self._pool.submit(_send_all, fd, send, self.read_ahead)
        except BaseException:
            os.close(fd)
            raise

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _step_down_from_realtime() -> None:
    """This thread back under SCHED_OTHER if it runs real-time (module doc); its nice level, kept
    by the kernel meanwhile, applies again."""
    try:
        if os.sched_getscheduler(0) in _REALTIME:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except OSError as e:  # pragma: no cover - a kernel that refuses: the send goes out all the same
        log.info("background read thread keeps its real-time policy: %s", e)


def _send_all(fd: int, send: BackgroundSend, read_ahead: int) -> int:
    try:
        if _REALTIME:
            _step_down_from_realtime()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        total = 0
        buffers: list[Buffer] = []
        for piece in send.pieces:
            if isinstance(piece, tuple):
                if buffers:
                    total += _writev_all(fd, buffers, poller, send.cancelled)
                    buffers = []
                total += _sendfile_all(fd, *piece, poller, send.cancelled, read_ahead)
            else:
                buffers.append(piece)
        if buffers:
            total += _writev_all(fd, buffers, poller, send.cancelled)
        BACKGROUND_READ_BYTES.inc(total)
        return total
    finally:
        os.close(fd)


def _wait_writable(poller: select.poll, cancelled: threading.Event) -> None:
    while not poller.poll(_POLL_MS):
        if cancelled.is_set():
            raise SendCancelled("connection closed during a background read")
    if cancelled.is_set():
        raise SendCancelled("connection closed during a background read")


def _sendfile_all(fd: int, in_fd: int, offset: int, length: int, poller: select.poll,
                  cancelled: threading.Event, read_ahead: int = 0) -> int:
    """Send a span of an entry log; read_ahead > 0: in chunks of that size, the kernel asked
    for the next chunks while fewer than two lie ahead of the send (the module doc)."""
    end = offset + length
    ahead = offset  # the kernel has been asked for the span up to here
    while offset < end:
        if read_ahead:
            while ahead < min(end, offset + 2 * read_ahead):
                n = min(read_ahead, end - ahead)
                os.posix_fadvise(in_fd, ahead, n, os.POSIX_FADV_WILLNEED)  # starts the reads, waits for none
                ahead += n
        try:
            n = os.sendfile(fd, in_fd, offset, min(end - offset, read_ahead) if read_ahead else end - offset)
        except BlockingIOError:
            _wait_writable(poller, cancelled)
            continue
        if n == 0:  # the file ends before the span its index gave: never send a short frame
            raise OSError(f"entry log ended {end - offset} bytes early at offset {offset}")
        offset += n
    return length


def _writev_all(fd: int, buffers: Sequence[Buffer], poller: select.poll, cancelled: threading.Event) -> int:
    views = [memoryview(b).cast("B") for b in buffers]
    total = sum(len(v) for v in views)
    i = 0
    while i < len(views):
        try:
            n = os.writev(fd, views[i : i + IOV_MAX])
        except BlockingIOError:
            _wait_writable(poller, cancelled)
            continue
        while n:  # drop what went out; the rest of a partly sent buffer stays
            k = min(n, len(views[i]))
            views[i] = views[i][k:]
            n -= k
            if not views[i]:
                i += 1
        while i < len(views) and not views[i]:
            i += 1
    return total
