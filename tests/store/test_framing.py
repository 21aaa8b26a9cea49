"""store/framing.py: frames split across reads, buffers of their own (bytearray or mapped)."""

from __future__ import annotations

import os
import struct

from store.framing import FramedProtocol


class _Frames(FramedProtocol):
    def __init__(self, **kw: int) -> None:
        super().__init__(max_frame=8 << 20, **kw)
        self.got: list[tuple[bytes, type, bool, bool]] = []

    def frame_received(self, frame: bytearray | memoryview, owned: bool) -> None:
        writable = not memoryview(frame).readonly
        self.got.append((bytes(frame), type(frame), owned, writable))


def _feed(proto: FramedProtocol, data: bytes, step: int) -> None:
    """As the event loop does: fill what get_buffer hands out, at most `step` bytes a read."""
    pos = 0
    while pos < len(data):
        buf = proto.get_buffer(-1)
        n = min(step, len(buf), len(data) - pos)
        buf[:n] = data[pos : pos + n]
        proto.buffer_updated(n)
        pos += n


def _framed(*payloads: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def test_large_frames_get_a_mapped_buffer_of_their_own_from_mapped_from() -> None:
    small, mid, big = b"s" * 100, os.urandom(50_000), os.urandom(300_000)
    proto = _Frames(mapped_from=128 << 10)
    _feed(proto, _framed(small, mid, big, small), step=20_000)
    assert [g[0] for g in proto.got] == [small, mid, big, small]
    (_, _, own_small, _), (_, t_mid, own_mid, w_mid), (_, t_big, own_big, w_big), _ = proto.got
    assert not own_small  # a view of the receive buffer
    assert own_mid and t_mid is bytearray and w_mid  # spans reads, below mapped_from
    assert own_big and t_big is memoryview and w_big  # writable: handlers patch in place


def test_without_mapped_from_large_frames_are_bytearrays() -> None:
    big = os.urandom(300_000)
    proto = _Frames()
    _feed(proto, _framed(big), step=64 << 10)
    assert proto.got == [(big, bytearray, True, True)]
