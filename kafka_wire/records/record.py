"""Records inside a batch's (decompressed) records section: lazy parsing with every length
checked against the bytes present, and encoding for the builder. For rare paths only (the
hot path never parses records)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

from kafka_wire.exceptions import DecodeError
from kafka_wire.records.exceptions import InvalidBatch
from kafka_wire.varint import read_varint, read_varlong, write_varint, write_varlong

Header = tuple[str, bytes | None]
_Buf = bytes | bytearray | memoryview


class Record(NamedTuple):
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


def _read_bytes(data: bytes, pos: int, rend: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(data, pos)
    if n < 0:
        return None, pos
    if n > rend - pos:
        raise InvalidBatch(f"field of {n} bytes overruns its record", offset=pos)
    return data[pos : pos + n], pos + n


def _spans(data: _Buf, count: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each of exactly `count` records filling exactly `data` (each after its
    length varint), else InvalidBatch (CORRUPT_MESSAGE)."""
    pos, end = 0, len(data)
    try:
        for _ in range(count):
            length, pos = read_varint(data, pos)
            if length < 1 or length > end - pos:
                raise InvalidBatch(f"record length {length} does not fit in {end - pos} bytes", offset=pos)
            yield pos, pos + length
            pos += length
    except InvalidBatch:
        raise
    except DecodeError as e:
        raise InvalidBatch(e.what, offset=e.offset) from e
    if pos != end:
        raise InvalidBatch(f"{end - pos} bytes left after {count} records", offset=pos)


def iter_records(data: bytes, count: int) -> Iterator[Record]:
    """Exactly `count` records filling exactly `data`, else InvalidBatch (CORRUPT_MESSAGE)."""
    pos = 0
    try:
        for start, rend in _spans(data, count):
            pos = start + 1  # attributes: unused in v2
            ts_delta, pos = read_varlong(data, pos)
            off_delta, pos = read_varint(data, pos)
            if pos > rend:
                raise InvalidBatch("record header overruns the record", offset=pos)
            key, pos = _read_bytes(data, pos, rend)
            value, pos = _read_bytes(data, pos, rend)
            n_headers, pos = read_varint(data, pos)
            if n_headers < 0 or pos > rend:
                raise InvalidBatch(f"invalid header count {n_headers}", offset=pos)
            headers: list[Header] = []
            for _ in range(n_headers):  # each header takes >= 2 bytes, so rend bounds this
                hkey, pos = _read_bytes(data, pos, rend)
                if hkey is None:
                    raise InvalidBatch("null header key", offset=pos)
                hval, pos = _read_bytes(data, pos, rend)
                if pos > rend:
                    raise InvalidBatch("header overruns the record", offset=pos)
                headers.append((hkey.decode("utf-8"), hval))
            if pos != rend:
                raise InvalidBatch(f"record declares {rend - start} bytes but holds {pos - start}", offset=pos)
            yield Record(off_delta, ts_delta, key, value, tuple(headers))
    except UnicodeDecodeError as e:
        raise InvalidBatch("header key is not UTF-8", offset=pos) from e
    except InvalidBatch:
        raise
    except DecodeError as e:
        raise InvalidBatch(e.what, offset=e.offset) from e


def _skip_varint(data: _Buf, pos: int, end: int) -> int:
    """The position after the varint at `pos` (its value unread); past `end` if it overruns."""
    while pos < end and data[pos] & 0x80:
        pos += 1
    return pos + 1 if pos < end else end + 1


def keyless_records(data: _Buf, count: int) -> list[int]:
    """The indexes of the records without a key (key length -1) among exactly `count` records
    filling exactly `data`, else InvalidBatch (CORRUPT_MESSAGE). Walks each record's length
    and the varints before its key length and jumps to the next record: no Record objects, no
    copies of keys, values or headers (what comes after the key length is not looked at)."""
    out: list[int] = []
    try:
        for index, (start, rend) in enumerate(_spans(data, count)):
            # attributes (1 byte), then timestampDelta and offsetDelta, skipped
            p = _skip_varint(data, _skip_varint(data, start + 1, rend), rend)
            if p >= rend:
                raise InvalidBatch("record header overruns the record", offset=start)
            key_length, p = read_varint(data, p)
            if p > rend or key_length > rend - p:
                raise InvalidBatch(f"key of {key_length} bytes overruns its record", offset=p)
            if key_length < 0:
                out.append(index)
    except InvalidBatch:
        raise
    except DecodeError as e:
        raise InvalidBatch(e.what, offset=e.offset) from e
    return out


def _bytes_field(b: bytes | None) -> bytes:
    if b is None:
        return write_varint(-1)
    return write_varint(len(b)) + b


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
) -> bytes:
    parts = [
        b"\x00",
        write_varlong(timestamp_delta),
        write_varint(offset_delta),
        _bytes_field(key),
        _bytes_field(value),
    ]
    parts.append(write_varint(len(headers)))
    for hk, hv in headers:
        parts.append(_bytes_field(hk.encode("utf-8")))
        parts.append(_bytes_field(hv))
    body = b"".join(parts)
    return write_varint(len(body)) + body
