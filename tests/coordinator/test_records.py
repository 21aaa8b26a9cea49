"""The __consumer_offsets record formats and Kafka's group -> shard rule."""

from __future__ import annotations

import struct

from coordinator.group.hashing import java_string_hashcode, shard_for
from coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
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


def _s(text: str | None) -> bytes:
    """A non-flexible (int16-length) string, as Kafka's offsets-topic records hold them."""
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _b(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def test_offset_records_are_kafkas_bytes() -> None:
    # Expected bytes written out field by field from Kafka's layout (OffsetCommitKey: type 1,
    # group, topic, partition; OffsetCommitValue v3: offset, leaderEpoch, metadata, commitTimestamp).
    key = encode_offset_key(OffsetCommitKey(group="grp", topic="topic", partition=7))
    assert key == struct.pack(">h", 1) + _s("grp") + _s("topic") + struct.pack(">i", 7)
    assert decode_key(key) == OffsetCommitKey(group="grp", topic="topic", partition=7)
    v = OffsetCommitValue(offset=42, leader_epoch=3, metadata="meta", commit_timestamp=1700000000000)
    data = encode_offset_value(v)
    assert data == struct.pack(">hqi", 3, 42, 3) + _s("meta") + struct.pack(">q", 1700000000000)
    assert decode_offset_value(data) == v
    # An explicit expiry is only in v1: offset, metadata, commitTimestamp, expireTimestamp.
    with_expiry = OffsetCommitValue(offset=5, metadata="", commit_timestamp=10, expire_timestamp=20)
    data = encode_offset_value(with_expiry)
    assert data == struct.pack(">hq", 1, 5) + _s("") + struct.pack(">qq", 10, 20)
    assert decode_offset_value(data) == with_expiry


def test_old_offset_value_versions_decode() -> None:
    v0 = struct.pack(">hq", 0, 99) + struct.pack(">h", 2) + b"md" + struct.pack(">q", 123)
    assert decode_offset_value(v0) == OffsetCommitValue(offset=99, leader_epoch=-1, metadata="md", commit_timestamp=123)
    # v4 is flexible: compact string and a tagged-field section.
    v4 = struct.pack(">hqi", 4, 7, 2) + bytes([3]) + b"ab" + struct.pack(">q", 5) + b"\x00"
    assert decode_offset_value(v4) == OffsetCommitValue(offset=7, leader_epoch=2, metadata="ab", commit_timestamp=5)
    # Key type 0 (Kafka 0.8.2's offset key) has type 1's fields.
    legacy = struct.pack(">h", 0) + _s("g") + _s("t") + struct.pack(">i", 1)
    assert decode_key(legacy) == OffsetCommitKey(group="g", topic="t", partition=1)


def test_group_records_are_kafkas_bytes() -> None:
    members = [
        MemberMetadata(member_id="m1", group_instance_id=None, client_id="c1", client_host="/h1",
                       rebalance_timeout=300, session_timeout=100, subscription=b"sub1", assignment=b"as1"),
        MemberMetadata(member_id="m2", group_instance_id="inst-2", client_id="c2", client_host="/h2",
                       rebalance_timeout=300, session_timeout=100, subscription=b"sub2", assignment=b""),
    ]
    gv = GroupMetadataValue(protocol_type="consumer", generation=4, protocol="range", leader="m1",
                            current_state_timestamp=1234, members=members)
    key = encode_group_key(GroupMetadataKey(group="grp"))
    assert key == struct.pack(">h", 2) + _s("grp")
    assert decode_key(key) == GroupMetadataKey(group="grp")
    # GroupMetadataValue v3, as Kafka 4.4 writes it.
    expected = struct.pack(">h", 3) + _s("consumer") + struct.pack(">i", 4) + _s("range") + _s("m1")
    expected += struct.pack(">qi", 1234, 2)
    for m, instance, sub, assignment in (("m1", None, b"sub1", b"as1"), ("m2", "inst-2", b"sub2", b"")):
        expected += _s(m) + _s(instance) + _s("c" + m[1]) + _s("/h" + m[1]) + struct.pack(">ii", 300, 100)
        expected += _b(sub) + _b(assignment)
    assert encode_group_value(gv) == expected
    assert decode_group_value(expected) == gv
    empty = GroupMetadataValue(protocol_type="consumer", generation=5, protocol=None, leader=None,
                               current_state_timestamp=9, members=[])
    assert decode_group_value(encode_group_value(empty)) == empty


def test_group_value_v0_reads_rebalance_timeout_as_session_timeout() -> None:
    v0 = struct.pack(">h", 0) + _s("consumer") + struct.pack(">i", 1) + _s("range") + _s("m") + struct.pack(">i", 1)
    v0 += _s("m") + _s("c") + _s("/h") + struct.pack(">i", 777) + _b(b"s") + _b(b"a")
    (m,) = decode_group_value(v0).members
    assert m.session_timeout == m.rebalance_timeout == 777 and m.group_instance_id is None


def test_other_share_and_streams_group_keys_are_skipped() -> None:
    # 12-15: share-group records this coordinator does not write; 17+: streams groups'.
    assert decode_key(struct.pack(">h", 12) + b"\x00\x01x") is None
    assert decode_key(struct.pack(">h", 17) + b"\x00\x01x") is None


def test_share_group_records_round_trip() -> None:
    from coordinator.group.records import (
        ShareGroupMemberMetadataKey,
        ShareGroupMemberMetadataValue,
        ShareGroupMetadataKey,
        ShareGroupMetadataValue,
        decode_share_group_value,
        decode_share_member_value,
        encode_share_group,
        encode_share_member,
    )

    key, value = encode_share_group("g", ShareGroupMetadataValue(epoch=4))
    assert key == struct.pack(">h", 11) + _s("g") and value is not None
    assert decode_key(key) == ShareGroupMetadataKey(group_id="g")
    assert decode_share_group_value(value).epoch == 4
    key, value = encode_share_member("g", "m", ShareGroupMemberMetadataValue(client_id="c", client_host="/h",
                                                                              subscribed_topic_names=["t"]))
    assert decode_key(key) == ShareGroupMemberMetadataKey(group_id="g", member_id="m")
    assert value is not None and decode_share_member_value(value).subscribed_topic_names == ["t"]
    assert encode_share_member("g", "m", None)[1] is None


def test_consumer_group_records_round_trip() -> None:
    from coordinator.group.records import (
        ConsumerGroupMetadataKey,
        ConsumerGroupMetadataValue,
        decode_consumer_value,
        encode_consumer_record,
    )

    key, value = encode_consumer_record(ConsumerGroupMetadataKey(group_id="g"), ConsumerGroupMetadataValue(epoch=7))
    assert key == struct.pack(">h", 3) + _s("g") and value is not None
    k = decode_key(key)
    assert k == ConsumerGroupMetadataKey(group_id="g")
    assert decode_consumer_value(k, value) == ConsumerGroupMetadataValue(epoch=7)


def test_records_batch_round_trip_with_tombstones() -> None:
    recs = [
        (encode_offset_key(OffsetCommitKey(group="g", topic="t", partition=0)),
         encode_offset_value(OffsetCommitValue(offset=1))),
        (encode_group_key(GroupMetadataKey(group="g")), None),
    ]
    batch = build_records_batch(recs)
    assert iter_log_records(batch + batch) == recs + recs
