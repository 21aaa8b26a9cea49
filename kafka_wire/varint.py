"""Varints as Kafka uses them: unsigned (LEB128) in flexible message encodings, zigzag-signed in
record batches. Readers take a buffer and a position and return (value, new position).

The one varint codec: the generated message codecs (through kafka_wire.primitives), the
hand-tuned Produce/Fetch codecs (kafka_wire.hotpath) and the record codecs all use these."""

from __future__ import annotations

from kafka_wire.exceptions import DecodeError

_Buf = bytes | bytearray | memoryview


def read_uvarint(buf: _Buf, pos: int, limit_bytes: int = 5) -> tuple[int, int]:
    """Unsigned varint of at most `limit_bytes` bytes (5 for int32, 10 for int64)."""
    result = 0
    shift = 0
    end = len(buf)
    for i in range(limit_bytes):
        if pos >= end:
            raise DecodeError("truncated varint", offset=pos)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            if limit_bytes == 5 and result > 0xFFFFFFFF:
                raise DecodeError("varint out of int32 range", offset=pos - i - 1)
            return result, pos
        shift += 7
    raise DecodeError(f"varint longer than {limit_bytes} bytes", offset=pos - limit_bytes)


def read_uvarint32(b: _Buf, p: int, where: str = "") -> tuple[int, int]:
    """Unsigned varint of at most 5 bytes that fits 32 bits, as flexible message encodings
    use for lengths, counts and tags (the one-byte case first: it is nearly every one)."""
    n = len(b)
    if p >= n:
        raise DecodeError("truncated input", where, p)
    x = b[p]
    if x < 0x80:
        return x, p + 1
    start = p
    result = x & 0x7F
    shift = 7
    p += 1
    while True:
        if p >= n:
            raise DecodeError("truncated input", where, p)
        x = b[p]
        p += 1
        result |= (x & 0x7F) << shift
        if x < 0x80:
            if result > 0xFFFFFFFF:
                raise DecodeError("varint out of 32-bit range", where, start)
            return result, p
        shift += 7
        if shift >= 35:
            raise DecodeError("varint longer than 5 bytes", where, start)


def read_varint(buf: _Buf, pos: int) -> tuple[int, int]:
    """Zigzag-signed int32 varint."""
    u, pos = read_uvarint(buf, pos, 5)
    return (u >> 1) ^ -(u & 1), pos


def read_varlong(buf: _Buf, pos: int) -> tuple[int, int]:
    """Zigzag-signed int64 varint."""
    u, pos = read_uvarint(buf, pos, 10)
    if u >= 1 << 64:
        raise DecodeError("varlong out of int64 range", offset=pos)
    return (u >> 1) ^ -(u & 1), pos


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def write_uvarint(value: int) -> bytes:
    if value < 0x80:
        if value < 0:
            raise ValueError(f"unsigned varint cannot hold {value}")
        return _ONE_BYTE[value]
    out = bytearray()
    write_uvarint_into(out, value)
    return bytes(out)


def write_uvarint_into(out: bytearray, value: int) -> None:
    """Append an unsigned varint (value >= 0) to out."""
    if value < 0x80:
        out.append(value)
        return
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(value: int) -> bytes:
    """Zigzag-signed int32 varint."""
    return write_uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(value: int) -> bytes:
    """Zigzag-signed int64 varint."""
    return write_uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def uvarint_size(value: int) -> int:
    n = 1
    while value >= 0x80:
        value >>= 7
        n += 1
    return n
