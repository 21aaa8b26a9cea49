"""Reader/writer helpers and base class for the generated codecs in kafka_wire.messages.

Readers take (buf, pos, where) and return (value, new pos); `buf` is a memoryview over the
whole input, `where` names the field for errors. Every length and count is checked against the
bytes remaining before anything is allocated, and every failure is a DecodeError. Writers append
to a bytearray.
"""

from __future__ import annotations

import builtins
import struct
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple, NoReturn, TypeVar
from uuid import UUID

from kafka_wire.exceptions import DecodeError
from kafka_wire.varint import read_uvarint32 as r_uvarint
from kafka_wire.varint import write_uvarint_into as w_uvarint

__all__ = ["DecodeError", "EncodeError", "FieldInfo", "Struct"]

Buf = bytes | bytearray | memoryview
# `records` fields: decoded as a zero-copy memoryview slice, encoded from any bytes-like or None.
Records = bytes | bytearray | memoryview | None
TaggedFields = tuple[tuple[int, bytes], ...]
ZERO_UUID = UUID(int=0)
_T = TypeVar("_T", bound="Struct")

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_unpack_h = _I16.unpack_from
_unpack_i = _I32.unpack_from
_pack_h = _I16.pack
_pack_i = _I32.pack
pack_i32 = _I32.pack
NO_TAGS: TaggedFields = ()


class FieldInfo(NamedTuple):
    """Schema of one field, kept on each generated class as `_FIELDS`."""

    attr: str
    type: str  # Kafka's type: "int32", "string", "[]int32", "[]SomeStruct", "SomeStruct"
    versions: tuple[int, int]
    nullable: tuple[int, int] | None  # versions in which null is allowed
    tag: int | None
    ignorable: bool
    struct: builtins.type[Struct] | None


class EncodeError(ValueError):
    """A value that cannot be written in the requested version (Kafka's UnsupportedVersionException
    on write), or that does not fit its wire type."""


def truncated(where: str, pos: int) -> NoReturn:
    raise DecodeError("truncated input", where, pos)


def null_error(where: str, pos: int) -> NoReturn:
    raise DecodeError("null value for a non-nullable field", where, pos)


# ---------------------------------------------------------------------------------- reading


def _len16(b: memoryview, p: int, w: str) -> tuple[int, int]:
    if p + 2 > len(b):
        truncated(w, p)
    return _unpack_h(b, p)[0], p + 2


def _len32(b: memoryview, p: int, w: str) -> tuple[int, int]:
    if p + 4 > len(b):
        truncated(w, p)
    return _unpack_i(b, p)[0], p + 4


def _clen(b: memoryview, p: int, w: str) -> tuple[int, int]:
    """Compact length: varint holding length + 1, 0 for null (returned as -1)."""
    u, p = r_uvarint(b, p, w)
    return u - 1, p


def _text(b: memoryview, p: int, ln: int, start: int, w: str) -> tuple[str, int]:
    end = p + ln
    if end > len(b):
        raise DecodeError(f"string length {ln} exceeds the {len(b) - p} bytes remaining", w, start)
    try:
        return str(b[p:end], "utf-8"), end
    except UnicodeDecodeError as e:
        raise DecodeError(f"invalid UTF-8 ({e.reason})", w, p + e.start) from None


def r_str(b: memoryview, p: int, w: str) -> tuple[str | None, int]:
    """int16-length string; None for null."""
    ln, q = _len16(b, p, w)
    if ln < 0:
        if ln == -1:
            return None, q
        raise DecodeError(f"negative string length {ln}", w, p)
    return _text(b, q, ln, p, w)


def r_cstr(b: memoryview, p: int, w: str) -> tuple[str | None, int]:
    """Compact (varint length + 1) string; None for null."""
    if p < len(b) and b[p] < 0x80:  # one-byte length
        ln, q = b[p] - 1, p + 1
    else:
        ln, q = _clen(b, p, w)
    if ln < 0:
        return None, q
    if ln > 0x7FFF:
        raise DecodeError(f"string length {ln} exceeds 32767", w, p)
    return _text(b, q, ln, p, w)


def _blob(b: memoryview, p: int, ln: int, start: int, w: str) -> memoryview:
    end = p + ln
    if end > len(b):
        raise DecodeError(f"length {ln} exceeds the {len(b) - p} bytes remaining", w, start)
    return b[p:end]


def r_bytes(b: memoryview, p: int, w: str) -> tuple[bytes | None, int]:
    ln, q = _len32(b, p, w)
    if ln < 0:
        if ln == -1:
            return None, q
        raise DecodeError(f"negative bytes length {ln}", w, p)
    return bytes(_blob(b, q, ln, p, w)), q + ln


def r_cbytes(b: memoryview, p: int, w: str) -> tuple[bytes | None, int]:
    ln, q = _clen(b, p, w)
    if ln < 0:
        return None, q
    return bytes(_blob(b, q, ln, p, w)), q + ln


def r_recs(b: memoryview, p: int, w: str) -> tuple[memoryview | None, int]:
    """Records: a zero-copy slice of the input."""
    ln, q = _len32(b, p, w)
    if ln < 0:
        if ln == -1:
            return None, q
        raise DecodeError(f"negative records length {ln}", w, p)
    return _blob(b, q, ln, p, w), q + ln


def r_crecs(b: memoryview, p: int, w: str) -> tuple[memoryview | None, int]:
    ln, q = _clen(b, p, w)
    if ln < 0:
        return None, q
    return _blob(b, q, ln, p, w), q + ln


def _check_count(b: memoryview, p: int, n: int, minsize: int, start: int, w: str) -> None:
    if n * (minsize or 1) > len(b) - p:
        raise DecodeError(f"array count {n} exceeds what the {len(b) - p} bytes remaining can hold", w,
                          start)


def r_alen(b: memoryview, p: int, minsize: int, w: str) -> tuple[int, int]:
    """int32 array count, -1 for null, checked against the bytes remaining (each element needs
    at least `minsize` bytes)."""
    n, q = _len32(b, p, w)
    if n < 0:
        if n == -1:
            return -1, q
        raise DecodeError(f"negative array count {n}", w, p)
    _check_count(b, q, n, minsize, p, w)
    return n, q


def r_calen(b: memoryview, p: int, minsize: int, w: str) -> tuple[int, int]:
    if p < len(b) and b[p] < 0x80:  # one-byte count: the usual case
        n = b[p] - 1
        if n * (minsize or 1) > len(b) - p - 1:
            _check_count(b, p + 1, n, minsize, p, w)
        return n, p + 1
    n, q = _clen(b, p, w)
    if n >= 0:
        _check_count(b, q, n, minsize, p, w)
    return n, q


_ARRAY_FORMATS: dict[tuple[int, str], struct.Struct] = {}


def r_fixed_array(b: memoryview, p: int, n: int, code: str, size: int) -> tuple[list[Any], int]:
    """n fixed-size numbers in one unpack (the count was already checked)."""
    fmt = _ARRAY_FORMATS.get((n, code))
    if fmt is None:
        fmt = struct.Struct(f">{n}{code}")
        if n <= 64:  # keep the cache small
            _ARRAY_FORMATS[(n, code)] = fmt
    return list(fmt.unpack_from(b, p)), p + n * size


def r_tags(b: memoryview, p: int, w: str) -> tuple[list[tuple[int, memoryview]], int]:
    """A tagged-field section: (tag, payload) pairs."""
    n = len(b)
    if p < n and b[p] == 0:  # no tagged fields: the common case
        return [], p + 1
    start = p
    count, p = r_uvarint(b, p, w)
    if count * 2 > n - p:
        raise DecodeError(f"tagged field count {count} exceeds the bytes remaining", w, start)
    out: list[tuple[int, memoryview]] = []
    for _ in range(count):
        tag, p = r_uvarint(b, p, w)
        size, q = r_uvarint(b, p, w)
        end = q + size
        if end > n:
            raise DecodeError(f"tagged field {tag} size {size} exceeds the bytes remaining", w, p)
        out.append((tag, b[q:end]))
        p = end
    return out, p


def decode_tagged(fn: Callable[[memoryview, int, str], tuple[Any, int]], data: memoryview, w: str) -> Any:
    """Decode a known tagged field's payload, which must be consumed exactly."""
    value, q = fn(data, 0, w)
    if q != len(data):
        raise DecodeError(f"tagged field payload has {len(data) - q} unread bytes", w, q)
    return value


# ---------------------------------------------------------------------------------- writing


def _utf8(s: object, w: str) -> bytes:
    if not isinstance(s, str):
        raise EncodeError(f"{w}: expected str, got {type(s).__name__}")
    data = s.encode("utf-8")
    if len(data) > 0x7FFF:
        raise EncodeError(f"{w}: string of {len(data)} bytes is longer than 32767")
    return data


def w_str(out: bytearray, s: str | None, w: str) -> None:
    if s is None:
        raise EncodeError(f"{w}: null is not allowed in this version")
    data = _utf8(s, w)
    out += _pack_h(len(data))
    out += data


def w_nstr(out: bytearray, s: str | None, w: str) -> None:
    if s is None:
        out += b"\xff\xff"
    else:
        data = _utf8(s, w)
        out += _pack_h(len(data))
        out += data


def w_cstr(out: bytearray, s: str | None, w: str) -> None:
    if s is None:
        raise EncodeError(f"{w}: null is not allowed in this version")
    data = _utf8(s, w)
    w_uvarint(out, len(data) + 1)
    out += data


def w_ncstr(out: bytearray, s: str | None, w: str) -> None:
    if s is None:
        out.append(0)
    else:
        data = _utf8(s, w)
        w_uvarint(out, len(data) + 1)
        out += data


def w_bytes(out: bytearray, v: Buf | None, w: str) -> None:
    if v is None:
        raise EncodeError(f"{w}: null is not allowed in this version")
    out += _pack_i(len(v) if not isinstance(v, memoryview) else v.nbytes)
    out += v


def w_nbytes(out: bytearray, v: Buf | None, w: str) -> None:
    if v is None:
        out += b"\xff\xff\xff\xff"
    else:
        out += _pack_i(len(v) if not isinstance(v, memoryview) else v.nbytes)
        out += v


def w_cbytes(out: bytearray, v: Buf | None, w: str) -> None:
    if v is None:
        raise EncodeError(f"{w}: null is not allowed in this version")
    w_uvarint(out, (len(v) if not isinstance(v, memoryview) else v.nbytes) + 1)
    out += v


def w_ncbytes(out: bytearray, v: Buf | None, w: str) -> None:
    if v is None:
        out.append(0)
    else:
        w_uvarint(out, (len(v) if not isinstance(v, memoryview) else v.nbytes) + 1)
        out += v


def w_tags(out: bytearray, tags: list[tuple[int, bytes]]) -> None:
    """Tagged-field section, tags in ascending order."""
    if len(tags) > 1:
        tags.sort(key=lambda t: t[0])
    w_uvarint(out, len(tags))
    for tag, payload in tags:
        w_uvarint(out, tag)
        w_uvarint(out, len(payload))
        out += payload


def tagged_payload(fn: Callable[[bytearray, Any, str], None], value: Any, w: str) -> bytes:
    buf = bytearray()
    fn(buf, value, w)
    return bytes(buf)


def not_in_version(w: str, version: int) -> NoReturn:
    raise EncodeError(f"{w}: a non-default value cannot be written in version {version}")


# ---------------------------------------------------------------------------------- base class


class Struct:
    """Base of every generated message and nested struct."""

    __slots__ = ()
    _DEC: ClassVar[dict[int, Callable[[memoryview, int], tuple[Any, int]]]] = {}
    _ENC: ClassVar[dict[int, Callable[[Any, bytearray], None]]] = {}
    _FIELDS: ClassVar[tuple[FieldInfo, ...]] = ()

    @classmethod
    def decode(cls: type[_T], buf: Buf, version: int) -> _T:
        """Decode exactly the whole buffer."""
        b = buf if isinstance(buf, memoryview) else memoryview(buf)
        obj, p = cls.decode_from(b, 0, version)
        if p != len(b):
            raise DecodeError(f"{len(b) - p} unexpected trailing bytes", cls.__qualname__, p)
        return obj

    @classmethod
    def decode_from(cls: type[_T], buf: Buf, pos: int, version: int) -> tuple[_T, int]:
        """Decode one value starting at `pos`; returns it and the position after it."""
        fn = cls._DEC.get(version)
        if fn is None:
            raise DecodeError(f"unsupported version {version}", cls.__qualname__, pos)
        b = buf if isinstance(buf, memoryview) else memoryview(buf)
        if b.format != "B" or b.ndim != 1:
            b = b.cast("B")
        try:
            return fn(b, pos)
        except DecodeError:
            raise
        except (struct.error, IndexError, ValueError, OverflowError) as e:  # pragma: no cover
            raise DecodeError(f"malformed input ({e})", cls.__qualname__, pos) from None

    def encode(self, version: int) -> bytes:
        out = bytearray()
        self.encode_into(out, version)
        return bytes(out)

    def encode_into(self, out: bytearray, version: int) -> None:
        fn = self._ENC.get(version)
        if fn is None:
            raise EncodeError(f"{type(self).__qualname__}: unsupported version {version}")
        try:
            fn(self, out)
        except struct.error as e:
            raise EncodeError(f"{type(self).__qualname__}: value out of range for its wire type ({e})") from None

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        slots: tuple[str, ...] = self.__slots__
        return all(getattr(self, s) == getattr(other, s) for s in slots)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        slots: tuple[str, ...] = self.__slots__
        parts = ", ".join(f"{s}={getattr(self, s)!r}" for s in slots)
        return f"{type(self).__qualname__}({parts})"
