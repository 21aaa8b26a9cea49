"""Hand-tuned codecs for the two byte-heavy messages: Produce requests (v3-13) decoded into
(topic, partition, records memoryview) without touching the records, and Fetch responses
(v4-18) encoded around already-stored batch bytes without copying them.

Both follow ProduceRequest.json / FetchResponse.json exactly and are checked against the
generated codecs in kafka_wire.messages by the tests."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from kafka_wire.exceptions import DecodeError
from kafka_wire.varint import read_uvarint32, write_uvarint

Buffer = bytes | bytearray | memoryview

PRODUCE_VERSIONS = range(3, 14)
FETCH_VERSIONS = range(4, 19)

_h = struct.Struct(">h")
_i = struct.Struct(">i")
_hi = struct.Struct(">hi")
_unpack_h = _h.unpack_from
_unpack_i = _i.unpack_from
_unpack_hi = _hi.unpack_from
_unpack_ii = struct.Struct(">ii").unpack_from


# -- Produce request ---------------------------------------------------------------------------


class ProducePartition(NamedTuple):
    topic: str | uuid.UUID  # name up to v12, topic id from v13
    partition: int
    records: memoryview | None  # a slice of the request buffer: writable if the buffer is


class ProduceRequestView(NamedTuple):
    transactional_id: str | None
    acks: int
    timeout_ms: int
    partitions: list[ProducePartition]


_tnew = tuple.__new__  # builds the NamedTuple without a Python-level __new__ frame


_PR = "ProduceRequest"


def _skip_tags(b: memoryview, p: int, end: int) -> int:
    x = b[p]
    if x == 0:
        return p + 1
    n, p = read_uvarint32(b, p, _PR)
    for _ in range(n):
        _, p = read_uvarint32(b, p, _PR)
        size, p = read_uvarint32(b, p, _PR)
        p += size
        if p > end:
            raise DecodeError("tagged field overruns the message", "ProduceRequest", p)
    return p


def _text(b: memoryview, p: int, n: int, end: int) -> str:
    if p + n > end:
        raise DecodeError("string overruns the message", "ProduceRequest", p)
    try:
        return str(b[p : p + n], "utf-8")
    except UnicodeDecodeError as e:
        raise DecodeError("string is not UTF-8", "ProduceRequest", p) from e


def decode_produce_request(body: Buffer, version: int, offset: int = 0) -> ProduceRequestView:
    """Decode a Produce request body (the bytes after the request header). Record data come
    back as memoryview slices of `body`, not copied and not parsed; DecodeError for anything
    malformed."""
    if version not in PRODUCE_VERSIONS:
        raise DecodeError(f"unsupported Produce version {version}", "ProduceRequest")
    b = body if type(body) is memoryview else memoryview(body)
    if b.format != "B" or b.ndim != 1:
        b = b.cast("B")
    end = len(b)
    p = offset
    out: list[ProducePartition] = []
    try:
        if version >= 9:
            n, p = read_uvarint32(b, p, _PR)
            txn = None if n == 0 else _text(b, p, n - 1, end)
            p += max(n - 1, 0)
            acks, timeout = _unpack_hi(b, p)
            p += 6
            n_topics, p = read_uvarint32(b, p, _PR)
            n_topics -= 1
            for _ in range(n_topics):
                topic: str | uuid.UUID
                if version >= 13:
                    if p + 16 > end:
                        raise DecodeError("truncated topic id", "ProduceRequest", p)
                    topic = uuid.UUID(bytes=bytes(b[p : p + 16]))
                    p += 16
                else:
                    n, p = read_uvarint32(b, p, _PR)
                    if n == 0:
                        raise DecodeError("null topic name", "ProduceRequest", p)
                    topic = _text(b, p, n - 1, end)
                    p += n - 1
                n_parts, p = read_uvarint32(b, p, _PR)
                for _ in range(n_parts - 1):
                    part = _unpack_i(b, p)[0]
                    # records lengths of up to 2 MiB take 1-3 varint bytes: decode those inline
                    x = b[p + 4]
                    if x < 0x80:
                        n = x
                        p += 5
                    else:
                        y = b[p + 5]
                        if y < 0x80:
                            n = (x & 0x7F) | (y << 7)
                            p += 6
                        else:
                            z = b[p + 6]
                            if z < 0x80:
                                n = (x & 0x7F) | ((y & 0x7F) << 7) | (z << 14)
                                p += 7
                            else:
                                n, p = read_uvarint32(b, p + 4, _PR)
                    if n == 0:
                        out.append(_tnew(ProducePartition, (topic, part, None)))
                    else:
                        q = p + n - 1
                        if q > end:
                            raise DecodeError("records overrun the message", "ProduceRequest", p)
                        out.append(_tnew(ProducePartition, (topic, part, b[p:q])))
                        p = q
                    if b[p]:
                        p = _skip_tags(b, p, end)
                    else:
                        p += 1
                p = _skip_tags(b, p, end)
            p = _skip_tags(b, p, end)
        else:
            n = _unpack_h(b, p)[0]
            p += 2
            txn = None
            if n >= 0:
                txn = _text(b, p, n, end)
                p += n
            acks, timeout = _unpack_hi(b, p)
            n_topics = _unpack_i(b, p + 6)[0]
            p += 10
            for _ in range(n_topics):
                n = _unpack_h(b, p)[0]
                if n < 0:
                    raise DecodeError("null topic name", "ProduceRequest", p)
                name = _text(b, p + 2, n, end)
                p += 2 + n
                n_parts = _unpack_i(b, p)[0]
                p += 4
                for _ in range(n_parts):
                    part, n = _unpack_ii(b, p)
                    p += 8
                    if n < 0:
                        out.append(_tnew(ProducePartition, (name, part, None)))
                    else:
                        q = p + n
                        if q > end:
                            raise DecodeError("records overrun the message", "ProduceRequest", p)
                        out.append(_tnew(ProducePartition, (name, part, b[p:q])))
                        p = q
    except (struct.error, IndexError) as e:
        raise DecodeError("truncated input", "ProduceRequest", p) from e
    if p > end:
        raise DecodeError("truncated input", "ProduceRequest", end)
    return ProduceRequestView(txn, acks, timeout, out)


# -- Fetch response ----------------------------------------------------------------------------


@dataclass(slots=True)
class FetchPartition:
    """One partition of a Fetch response. `records` are stored batches written back to back,
    as given (bytes-like objects with 1-byte items); None writes a null records field.
    The three optional pairs are the v12+ tagged fields, written only when set."""

    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: Sequence[tuple[int, int]] | None = None  # (producer_id, first_offset)
    preferred_read_replica: int = -1
    records: Sequence[Buffer] | None = ()
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end_offset), tag 0
    current_leader: tuple[int, int] | None = None  # (leader_id, leader_epoch), tag 1
    snapshot_id: tuple[int, int] | None = None  # (end_offset, epoch), tag 2


@dataclass(slots=True)
class FetchTopic:
    topic: str | uuid.UUID  # name up to v12, topic id from v13
    partitions: list[FetchPartition] = field(default_factory=list)


class NodeEndpoint(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None = None


_p_part4 = struct.Struct(">ihqq").pack  # index, error, hw, lso
_p_part5 = struct.Struct(">ihqqq").pack  # + log start offset
_p_qq = struct.Struct(">qq").pack
_p_i = _i.pack
_p_top7 = struct.Struct(">ihi").pack  # throttle, error, session
_p_iq = struct.Struct(">iq").pack
_p_qi = struct.Struct(">qi").pack
_p_ii = struct.Struct(">ii").pack
_uv = write_uvarint  # one-byte values come from a table: nearly every length here


def _cstr(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    raw = s.encode("utf-8")
    return _uv(len(raw) + 1) + raw


def _partition_tags(p: FetchPartition) -> bytes:
    tags: list[bytes] = []
    if p.diverging_epoch is not None:
        tags.append(b"\x00\x0d" + _p_iq(*p.diverging_epoch) + b"\x00")
    if p.current_leader is not None:
        tags.append(b"\x01\x09" + _p_ii(*p.current_leader) + b"\x00")
    if p.snapshot_id is not None:
        tags.append(b"\x02\x0d" + _p_qi(*p.snapshot_id) + b"\x00")
    return _uv(len(tags)) + b"".join(tags)


def encode_fetch_response(
    version: int,
    topics: Sequence[FetchTopic],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
    node_endpoints: Sequence[NodeEndpoint] = (),
    correlation_id: int | None = None,
) -> list[Buffer]:
    """The Fetch response body as a list of buffers (for writelines or one b"".join); stored
    batches appear in it as the very objects passed in. With `correlation_id`, the list starts
    with the 4-byte frame size and the response header (v1 from Fetch v12, else v0)."""
    if version not in FETCH_VERSIONS:
        raise ValueError(f"unsupported Fetch version {version}")
    flex = version >= 12
    parts: list[Buffer] = []
    head = bytearray()
    if version >= 7:
        head += _p_top7(throttle_time_ms, error_code, session_id)
    else:
        head += _p_i(throttle_time_ms)
    head += _uv(len(topics) + 1) if flex else _p_i(len(topics))
    for t in topics:
        topic = t.topic
        if version >= 13:
            if not isinstance(topic, uuid.UUID):
                raise ValueError(f"Fetch v{version} needs topic ids, got {topic!r}")
            head += topic.bytes
        else:
            if not isinstance(topic, str):
                raise ValueError(f"Fetch v{version} needs topic names, got {topic!r}")
            raw = topic.encode("utf-8")
            head += (_uv(len(raw) + 1) if flex else _h.pack(len(raw))) + raw
        head += _uv(len(t.partitions) + 1) if flex else _p_i(len(t.partitions))
        for p in t.partitions:
            if version >= 5:
                head += _p_part5(
                    p.partition_index,
                    p.error_code,
                    p.high_watermark,
                    p.last_stable_offset,
                    p.log_start_offset,
                )
            else:
                head += _p_part4(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                head += b"\x00" if flex else b"\xff\xff\xff\xff"
            else:
                head += _uv(len(aborted) + 1) if flex else _p_i(len(aborted))
                for pid, first in aborted:
                    head += _p_qq(pid, first)
                    if flex:
                        head += b"\x00"
            if version >= 11:
                head += _p_i(p.preferred_read_replica)
            recs = p.records
            if recs is None:
                head += b"\x00" if flex else b"\xff\xff\xff\xff"
            else:
                size = 0
                for r in recs:
                    size += len(r)
                head += _uv(size + 1) if flex else _p_i(size)
                if size:
                    parts.append(bytes(head))
                    parts.extend(recs)
                    head = bytearray()
            if flex:
                if p.diverging_epoch is None and p.current_leader is None and p.snapshot_id is None:
                    head += b"\x00"
                else:
                    head += _partition_tags(p)
        if flex:
            head += b"\x00"
    if flex:
        if version >= 16 and node_endpoints:
            nodes = bytearray(_uv(len(node_endpoints) + 1))
            for ne in node_endpoints:
                nodes += _p_i(ne.node_id) + _cstr(ne.host) + _p_i(ne.port) + _cstr(ne.rack) + b"\x00"
            head += b"\x01\x00" + _uv(len(nodes)) + nodes
        else:
            head += b"\x00"
    if head:
        parts.append(bytes(head))
    if correlation_id is not None:
        hdr = _p_i(correlation_id) + (b"\x00" if flex else b"")
        total = len(hdr)
        for x in parts:
            total += len(x)
        parts.insert(0, _p_i(total) + hdr)
    return parts
