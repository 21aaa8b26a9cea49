"""The __consumer_offsets record formats and Kafka's group -> shard rule."""

from __future__ import annotations

import struct

from coordinator.group.hashing import java_string_hashcode, shard_for
from coordinator.group.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    build_records_batch,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    iter_log_records,
)


def test_java_hashcode_matches_java() -> None:
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert java_string_hashcode("\u00e9t\u00e9-\U0001f600") == java_hash_reference("\u00e9t\u00e9-\U0001f600")


def java_hash_reference(s: str) -> int:
    h = 0
    units = struct.unpack(f">{len(s.encode('utf-16-be')) // 2}H", s.encode("utf-16-be"))
    for u in units:
        h = (h * 31 + u) % 2**32
    return h - 2**32 if h >= 2**31 else h


def test_shard_rule_is_kafkas() -> None:
    assert shard_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    assert shard_for("hello", 50) == 99162322 % 50
    neg = "Aa" * 7 + "zzz"
    h = java_string_hashcode(neg)
    assert shard_for(neg, 16) == abs(h) % 16
    assert all(0 <= shard_for(f"group-{i}", 16) < 16 for i in range(200))


def test_offset_records_round_trip() -> None:
    key = encode_offset_key(OffsetKey("grp", "topic", 7))
    assert key[:2] == b"\x00\x01"
    assert decode_key(key) == OffsetKey("grp", "topic", 7)
    v = OffsetValue(42, 3, "meta", 1700000000000)
    data = encode_offset_value(v)
    assert data[:2] == b"\x00\x03"
    assert decode_offset_value(data) == v
    with_expiry = OffsetValue(5, -1, "", 10, 20)
    assert encode_offset_value(with_expiry)[:2] == b"\x00\x01"
    assert decode_offset_value(encode_offset_value(with_expiry)) == with_expiry


def test_old_offset_value_versions_decode() -> None:
    v0 = struct.pack(">hq", 0, 99) + struct.pack(">h", 2) + b"md" + struct.pack(">q", 123)
    assert decode_offset_value(v0) == OffsetValue(99, -1, "md", 123, -1)
    # v4 is flexible: compact string and a tagged-field section.
    v4 = struct.pack(">hqi", 4, 7, 2) + bytes([3]) + b"ab" + struct.pack(">q", 5) + b"\x00"
    assert decode_offset_value(v4) == OffsetValue(7, 2, "ab", 5, -1)


def test_group_records_round_trip() -> None:
    gv = GroupValue(
        "consumer",
        4,
        "range",
        "m1",
        1234,
        [
            MemberValue("m1", None, "c1", "/h1", 300, 100, b"sub1", b"as1"),
            MemberValue("m2", "inst-2", "c2", "/h2", 300, 100, b"sub2", b""),
        ],
    )
    assert decode_key(encode_group_key(GroupKey("grp"))) == GroupKey("grp")
    assert decode_group_value(encode_group_value(gv)) == gv
    empty = GroupValue("consumer", 5, None, None, 9, [])
    assert decode_group_value(encode_group_value(empty)) == empty


def test_unknown_key_versions_are_skipped() -> None:
    assert decode_key(struct.pack(">h", 3) + b"\x00\x01x") is None


def test_records_batch_round_trip_with_tombstones() -> None:
    recs = [
        (encode_offset_key(OffsetKey("g", "t", 0)), encode_offset_value(OffsetValue(1))),
        (encode_group_key(GroupKey("g")), None),
    ]
    batch = build_records_batch(recs)
    assert iter_log_records(batch + batch) == recs + recs
