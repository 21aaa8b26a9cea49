"""Length-prefixed framing over asyncio: [length:int32 big-endian][frame of `length` bytes].

The one reader of such streams, used by the bookie protocol (server and client) and by the
gateway's Kafka connections. It lives in store/, the bottom layer, because everything that
frames a socket is at or above it: the gateway may import store, store may import nothing
above it, and kafka_wire does no I/O.

Reads land in a reusable receive buffer; a frame that arrived whole in it is handed over as
a view of that buffer, valid only during the callback (copy what you keep). A frame of at
least `own_buffer_from` bytes that spans reads is received straight into a buffer of its own
(a bytearray, or from `mapped_from` bytes a mapped_buffer()), handed over with owned=True: the
receiver may keep it, views of it included, with no copy.
"""

from __future__ import annotations

import asyncio
import mmap
import struct

Buffer = bytes | bytearray | memoryview

_LEN = struct.Struct(">i")
RECV_BUF = 256 << 10
OWN_BUFFER_FROM = 16 << 10
# From this size the gateway's malloc maps a buffer of its own (quire.malloc fixes glibc's
# mmap threshold here), so its large frames come as mapped_buffer()s (mapped_from).
MAPPED_FROM = 128 << 10
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # Linux


def mapped_buffer(size: int) -> memoryview:
    """A writable buffer in a private mapping of its own with its pages populated by the one
    mmap call (no page fault per 4 KiB, no zeroing pass by bytearray()); unmapped once the last
    view of it goes. For the large frames of a process whose malloc maps large buffers anyway
    (the gateway's, quire.malloc), where a bytearray() takes twice as long as this to fill."""
    return memoryview(mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | _POPULATE))


class FramedProtocol(asyncio.BufferedProtocol):
    """Subclasses implement frame_received and bad_frame_size; they stop the parsing of
    further frames (e.g. while closing) by making framing_stopped() true."""

    def __init__(
        self,
        *,
        max_frame: int,
        min_frame: int = 0,
        recv_buf: int = RECV_BUF,
        own_buffer_from: int = OWN_BUFFER_FROM,
        mapped_from: int | None = None,
    ) -> None:
        """mapped_from: frames of at least this size get a mapped_buffer() of their own instead
        of a bytearray (None: never)."""
        self.max_frame = max_frame
        self.min_frame = min_frame
        self._mapped_from = mapped_from
        self._rbuf = bytearray(recv_buf)
        self._rview = memoryview(self._rbuf)
        self._rpos = 0  # first unparsed byte
        self._rend = 0  # end of received data
        self._own_from = min(own_buffer_from, recv_buf - 4)
        self._big: bytearray | memoryview | None = None  # a frame with a buffer of its own, being filled
        self._big_filled = 0

    # -- hooks --

    def frame_received(self, frame: bytearray | memoryview, owned: bool) -> None:
        """A whole frame: owned (a buffer of its own, a bytearray or a writable memoryview, the
        receiver's to keep) or a view of the receive buffer, valid during this call only."""
        raise NotImplementedError

    def bad_frame_size(self, size: int, rest: memoryview) -> None:
        """A length outside [min_frame, max_frame]; `rest` is what follows it in the buffer.
        Nothing more is parsed from this connection."""
        raise NotImplementedError

    def framing_stopped(self) -> bool:
        return False

    # -- asyncio.BufferedProtocol --

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_filled :]
        if self._rend == len(self._rbuf):
            # Full: move the incomplete frame to the front (it is small: big ones have their own).
            n = self._rend - self._rpos
            self._rbuf[:n] = self._rview[self._rpos : self._rend]
            self._rpos, self._rend = 0, n
        return self._rview[self._rend :]

    def buffer_updated(self, nbytes: int) -> None:
        if self.framing_stopped():
            return
        big = self._big
        if big is not None:
            self._big_filled += nbytes
            if self._big_filled == len(big):
                self._big = None
                self.frame_received(big, True)
            return
        self._rend += nbytes
        self._parse()

    def _parse(self) -> None:
        mv = self._rview
        pos, end = self._rpos, self._rend
        while end - pos >= 4 and not self.framing_stopped():
            (size,) = _LEN.unpack_from(mv, pos)
            if size < self.min_frame or size > self.max_frame:
                self._rpos = self._rend = 0
                self.bad_frame_size(size, mv[pos + 4 : end])
                return
            start = pos + 4
            if end - start >= size:
                pos = start + size
                self._rpos = pos  # the callback may close and reset
                self.frame_received(mv[start:pos], False)
                continue
            if size >= self._own_from:
                mapped = self._mapped_from is not None and size >= self._mapped_from
                big = self._big = mapped_buffer(size) if mapped else bytearray(size)
                have = end - start
                big[:have] = mv[start:end]
                self._big_filled = have
                pos = end
            break
        if pos == end:
            self._rpos = self._rend = 0
        else:
            self._rpos = pos


class BackpressuredProtocol(FramedProtocol):
    """A framed server connection that stops reading while its writes back up or it is too busy
    (the gateway's and the bookie's); clients keep FramedProtocol, which always reads."""

    transport: asyncio.Transport | None

    def __init__(self, **kw: int) -> None:
        super().__init__(**kw)
        self._reading_paused = False
        self._write_paused = False

    # -- hooks --

    def too_busy(self) -> bool:
        """The subclass's own reasons to take no more frames (requests in flight, buffers)."""
        return False

    def reading_frozen(self) -> bool:
        """True once closing (or draining): reading is no longer switched on or off."""
        return False

    # -- asyncio.BaseProtocol --

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self.reading_frozen():
            return
        want_pause = self._write_paused or self.too_busy()
        if want_pause != self._reading_paused:
            self._reading_paused = want_pause
            if want_pause:
                self.transport.pause_reading()
            else:
                self.transport.resume_reading()
