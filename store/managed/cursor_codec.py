"""Binary formats of cursor state: the cursor ledger's records and the cursor's metadata node.

Cursor ledger entries (each appended by the owner; recovery replays from the last snapshot):
    DELTA     [1][base:q][mark_delete:qq][n:I][ranges:n*qqq][props]   acks since the last record
    SNAPSHOT  [2][prev_base:q][index:I][count:I][chunk bytes]          one chunk of a full state
`base` is the entry id where the snapshot a delta builds on starts. A snapshot is `count`
consecutive chunks of encode_state(); an incomplete one at the tail is ignored (its chunks carry
the base before it). props: [n:I] then per item [klen:H][k][vlen:i (-1 = removed)][v].
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from store.managed.errors import CursorStateError
from store.managed.position import Position
from store.managed.rangeset import Range, RangeSet

DELTA = 1
SNAPSHOT = 2
_Q = struct.Struct(">q")
_QQ = struct.Struct(">qq")
_QQQ = struct.Struct(">qqq")
_I = struct.Struct(">I")
_H = struct.Struct(">H")
_i = struct.Struct(">i")
_DELTA_HEAD = struct.Struct(">Bqqq")
_SNAP_HEAD = struct.Struct(">BqII")
_META_HEAD = struct.Struct(">BqB")
_META_FORMAT = 1


@dataclass
class CursorState:
    mark_delete: Position
    acked: RangeSet = field(default_factory=RangeSet)
    props: dict[str, str] = field(default_factory=dict)

    def copy(self) -> CursorState:
        return CursorState(self.mark_delete, self.acked.copy(), dict(self.props))


def _pack_props(props: dict[str, str | None]) -> bytes:
    parts = [_I.pack(len(props))]
    for k, v in props.items():
        kb = k.encode()
        parts += [_H.pack(len(kb)), kb]
        if v is None:
            parts.append(_i.pack(-1))
        else:
            vb = v.encode()
            parts += [_i.pack(len(vb)), vb]
    return b"".join(parts)


def _unpack_props(mv: memoryview, off: int) -> tuple[dict[str, str | None], int]:
    (n,) = _I.unpack_from(mv, off)
    off += 4
    out: dict[str, str | None] = {}
    for _ in range(n):
        (kl,) = _H.unpack_from(mv, off)
        k = bytes(mv[off + 2 : off + 2 + kl]).decode()
        off += 2 + kl
        (vl,) = _i.unpack_from(mv, off)
        off += 4
        if vl < 0:
            out[k] = None
        else:
            out[k] = bytes(mv[off : off + vl]).decode()
            off += vl
    return out, off


def _pack_ranges(ranges: list[Range]) -> bytes:
    return _I.pack(len(ranges)) + b"".join(_QQQ.pack(*r) for r in ranges)


def _unpack_ranges(mv: memoryview, off: int) -> tuple[list[Range], int]:
    (n,) = _I.unpack_from(mv, off)
    off += 4
    out = [_QQQ.unpack_from(mv, off + 24 * i) for i in range(n)]
    return out, off + 24 * n


def encode_state(state: CursorState, max_ranges: int | None = None) -> bytes:
    ranges = state.acked.ranges()
    if max_ranges is not None:
        ranges = ranges[:max_ranges]
    props: dict[str, str | None] = dict(state.props)
    return _QQ.pack(*state.mark_delete) + _pack_props(props) + _pack_ranges(ranges)


def decode_state(data: bytes | memoryview) -> CursorState:
    try:
        mv = memoryview(data)
        md = Position(*_QQ.unpack_from(mv, 0))
        props, off = _unpack_props(mv, 16)
        ranges, off = _unpack_ranges(mv, off)
    except (struct.error, UnicodeDecodeError) as e:
        raise CursorStateError(f"bad cursor state: {e}") from e
    return CursorState(md, RangeSet(ranges), {k: v for k, v in props.items() if v is not None})


def encode_delta(
    base: int, mark_delete: Position, ranges: list[Range], props: dict[str, str | None]
) -> bytes:
    return _DELTA_HEAD.pack(DELTA, base, *mark_delete) + _pack_ranges(ranges) + _pack_props(props)


def encode_snapshot_chunks(prev_base: int, state_bytes: bytes, chunk_size: int) -> list[bytes]:
    pieces = [state_bytes[i : i + chunk_size] for i in range(0, len(state_bytes), chunk_size)] or [b""]
    return [_SNAP_HEAD.pack(SNAPSHOT, prev_base, i, len(pieces)) + p for i, p in enumerate(pieces)]


@dataclass
class Record:
    kind: int
    base: int  # DELTA: base snapshot entry; SNAPSHOT: the base before this snapshot
    mark_delete: Position | None = None
    ranges: list[Range] | None = None
    props: dict[str, str | None] | None = None
    index: int = 0
    count: int = 0
    chunk: bytes = b""


def decode_record(data: bytes | memoryview) -> Record:
    mv = memoryview(data)
    try:
        kind = mv[0]
        if kind == DELTA:
            _, base, ml, me = _DELTA_HEAD.unpack_from(mv, 0)
            ranges, off = _unpack_ranges(mv, _DELTA_HEAD.size)
            props, _ = _unpack_props(mv, off)
            return Record(DELTA, base, Position(ml, me), ranges, props)
        if kind == SNAPSHOT:
            _, prev, idx, cnt = _SNAP_HEAD.unpack_from(mv, 0)
            return Record(SNAPSHOT, prev, index=idx, count=cnt, chunk=bytes(mv[_SNAP_HEAD.size :]))
    except (struct.error, UnicodeDecodeError, IndexError) as e:
        raise CursorStateError(f"bad cursor record: {e}") from e
    raise CursorStateError(f"unknown cursor record type {kind}")


def apply_delta(state: CursorState, rec: Record) -> None:
    assert rec.mark_delete is not None and rec.ranges is not None and rec.props is not None
    state.mark_delete = rec.mark_delete
    for lid, f, last in rec.ranges:
        state.acked.add(lid, f, last)
    state.acked.remove_upto(rec.mark_delete)
    for k, v in rec.props.items():
        if v is None:
            state.props.pop(k, None)
        else:
            state.props[k] = v


def replay(entries: list[bytes], first_entry_id: int) -> CursorState:
    """Rebuild the state from a cursor ledger's entries [first_entry_id ...], which must start
    at a complete snapshot. Trailing incomplete snapshot chunks are ignored."""
    state: CursorState | None = None
    chunks: list[bytes] = []
    for data in entries:
        rec = decode_record(data)
        if rec.kind == SNAPSHOT:
            chunks = [] if rec.index == 0 else chunks
            chunks.append(rec.chunk)
            if rec.index == rec.count - 1:
                state = decode_state(b"".join(chunks))
                chunks = []
        elif state is not None:
            apply_delta(state, rec)
        else:
            raise CursorStateError(
                f"cursor ledger replay from {first_entry_id} does not start with a snapshot"
            )
    if state is None:
        raise CursorStateError("no complete snapshot in the cursor ledger")
    return state


def replay_start(last: bytes, last_entry_id: int) -> tuple[int, int]:
    """From the last entry of a cursor ledger: (first, last) entry ids to replay."""
    rec = decode_record(last)
    if rec.kind == DELTA:
        return rec.base, last_entry_id
    snap_first = last_entry_id - rec.index
    if rec.index == rec.count - 1:
        return snap_first, last_entry_id
    return rec.base, snap_first - 1  # incomplete snapshot: replay what preceded it


def encode_meta(ledger_id: int, state: CursorState, max_ranges: int) -> bytes:
    complete = len(state.acked) <= max_ranges
    return _META_HEAD.pack(_META_FORMAT, ledger_id, int(complete)) + encode_state(state, max_ranges)


def decode_meta(data: bytes) -> tuple[int, bool, CursorState]:
    """(cursor ledger id or -1, whether the ranges are complete, state snapshot)."""
    if len(data) < _META_HEAD.size:
        raise CursorStateError("cursor metadata node too short")
    fmt, lid, complete = _META_HEAD.unpack_from(data, 0)
    if fmt != _META_FORMAT:
        raise CursorStateError(f"unsupported cursor metadata format {fmt}")
    return lid, bool(complete), decode_state(memoryview(data)[_META_HEAD.size :])
