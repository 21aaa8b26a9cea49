"""Kafka's `__consumer_offsets` record formats (keys and values of OffsetCommit and
GroupMetadata records), so a shard's log reads like Kafka's own offsets topic.

Keys: int16 version then fields; versions 0-1 are offset commits, 2 is group metadata (newer
versions belong to Kafka's consumer-protocol coordinator and are skipped on replay). A null
value is a tombstone. We write OffsetCommitValue v3 and GroupMetadataValue v3, as Kafka 3.x
does, and read every older version.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kafka_wire.records import NewRecord, build_batch, iter_batches

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")


class _W:
    def __init__(self) -> None:
        self.out = bytearray()

    def i16(self, v: int) -> _W:
        self.out += _H.pack(v)
        return self

    def i32(self, v: int) -> _W:
        self.out += _I.pack(v)
        return self

    def i64(self, v: int) -> _W:
        self.out += _Q.pack(v)
        return self

    def str(self, v: str | None) -> _W:
        if v is None:
            self.out += _H.pack(-1)
        else:
            data = v.encode()
            self.out += _H.pack(len(data)) + data
        return self

    def bytes(self, v: bytes) -> _W:
        self.out += _I.pack(len(v)) + v
        return self


class _R:
    def __init__(self, data: bytes | memoryview) -> None:
        self.b = memoryview(data)
        self.p = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.p + n > len(self.b):
            raise ValueError("truncated offsets-topic record")
        v = self.b[self.p : self.p + n]
        self.p += n
        return v

    def i16(self) -> int:
        return int(_H.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_Q.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            x = self._take(1)[0]
            result |= (x & 0x7F) << shift
            if x < 0x80:
                return result
            shift += 7

    def str(self, compact: bool = False) -> str | None:
        n = self.uvarint() - 1 if compact else self.i16()
        return None if n < 0 else str(self._take(n), "utf-8")

    def bytes(self, compact: bool = False) -> bytes:
        n = self.uvarint() - 1 if compact else self.i32()
        return b"" if n < 0 else bytes(self._take(n))

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberValue] = field(default_factory=list)


def encode_offset_key(k: OffsetKey) -> bytes:
    return bytes(_W().i16(1).str(k.group).str(k.topic).i32(k.partition).out)


def encode_group_key(k: GroupKey) -> bytes:
    return bytes(_W().i16(2).str(k.group).out)


def encode_offset_value(v: OffsetValue) -> bytes:
    if v.expire_timestamp >= 0:  # only v1 carries an explicit expiry
        w = _W().i16(1).i64(v.offset).str(v.metadata).i64(v.commit_timestamp).i64(v.expire_timestamp)
    else:
        w = _W().i16(3).i64(v.offset).i32(v.leader_epoch).str(v.metadata).i64(v.commit_timestamp)
    return bytes(w.out)


def encode_group_value(v: GroupValue) -> bytes:
    w = _W().i16(3).str(v.protocol_type).i32(v.generation).str(v.protocol).str(v.leader)
    w.i64(v.current_state_timestamp).i32(len(v.members))
    for m in v.members:
        w.str(m.member_id).str(m.group_instance_id).str(m.client_id).str(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).bytes(m.subscription).bytes(m.assignment)
    return bytes(w.out)


def decode_key(data: bytes | memoryview) -> OffsetKey | GroupKey | None:
    """None for key versions this coordinator does not own (consumer-protocol records)."""
    r = _R(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.str() or "", r.str() or "", r.i32())
    if version == 2:
        return GroupKey(r.str() or "")
    return None


def decode_offset_value(data: bytes | memoryview) -> OffsetValue:
    r = _R(data)
    v = r.i16()
    if v > 4 or v < 0:
        raise ValueError(f"unknown OffsetCommitValue version {v}")
    flex = v >= 4
    offset = r.i64()
    epoch = r.i32() if v >= 3 else -1
    metadata = r.str(flex) or ""
    ts = r.i64()
    expire = r.i64() if v == 1 else -1
    return OffsetValue(offset, epoch, metadata, ts, expire)


def decode_group_value(data: bytes | memoryview) -> GroupValue:
    r = _R(data)
    v = r.i16()
    if v > 4 or v < 0:
        raise ValueError(f"unknown GroupMetadataValue version {v}")
    flex = v >= 4
    out = GroupValue(r.str(flex) or "", r.i32(), r.str(flex), r.str(flex))
    if v >= 2:
        out.current_state_timestamp = r.i64()
    count = r.uvarint() - 1 if flex else r.i32()
    for _ in range(max(count, 0)):
        member_id = r.str(flex) or ""
        instance = r.str(flex) if v >= 3 else None
        client_id = r.str(flex) or ""
        client_host = r.str(flex) or ""
        rebalance = r.i32() if v >= 1 else -1
        session = r.i32()
        sub = r.bytes(flex)
        assignment = r.bytes(flex)
        if flex:
            r.skip_tags()
        out.members.append(MemberValue(member_id, instance, client_id, client_host, rebalance, session, sub, assignment))
        if rebalance < 0:
            out.members[-1].rebalance_timeout_ms = session
    return out


Record = tuple[bytes, bytes | None]


def build_records_batch(records: list[Record]) -> bytes:
    """One uncompressed v2 batch of (key, value or None) records, offsets assigned by the log."""
    return build_batch([NewRecord(k, v) for k, v in records])


def iter_log_records(data: bytes | memoryview) -> list[tuple[bytes, bytes | None]]:
    """(key, value) of every keyed record in a run of stored batches (control batches skipped)."""
    out: list[tuple[bytes, bytes | None]] = []
    for batch in iter_batches(data):
        if batch.is_control:
            continue
        for rec in batch.records():
            if rec.key is not None:
                out.append((bytes(rec.key), None if rec.value is None else bytes(rec.value)))
    return out
