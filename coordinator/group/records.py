"""Kafka's `__consumer_offsets` records, so a shard's log reads like Kafka's own offsets topic.

The codecs are generated from Kafka's schemas (kafka-group-coordinator's OffsetCommitKey/Value,
GroupMetadataKey/Value, the ConsumerGroup* records and the share groups'
ShareGroupMetadata/ShareGroupMemberMetadata, see kafka_wire/codegen/jars.py); this module adds
what the schemas leave to the coordinator: a key starts with an int16 that is the record type
(0-1 offset commits, 2 group metadata, 3-8 and 16 the consumer group protocol's, 10 share-group
members, 11 share-group metadata; the other share and the streams group types are skipped on
replay), a value starts with its own int16 version, a null value is a tombstone, and which value
versions are written: OffsetCommitValue v1 when the commit carries an explicit expiry, else v3,
GroupMetadataValue v3 and every ConsumerGroup* and ShareGroup* value v0, as Kafka 4.4 writes
them. Every older value version is read.
"""

from __future__ import annotations

import struct

from kafka_wire.api import decode_versioned, encode_versioned
from kafka_wire.exceptions import DecodeError
from kafka_wire.messages.consumer_group_current_member_assignment_key import (
    ConsumerGroupCurrentMemberAssignmentKey,
)
from kafka_wire.messages.consumer_group_current_member_assignment_value import (
    ConsumerGroupCurrentMemberAssignmentValue,
)
from kafka_wire.messages.consumer_group_member_metadata_key import ConsumerGroupMemberMetadataKey
from kafka_wire.messages.consumer_group_member_metadata_value import ConsumerGroupMemberMetadataValue
from kafka_wire.messages.consumer_group_metadata_key import ConsumerGroupMetadataKey
from kafka_wire.messages.consumer_group_metadata_value import ConsumerGroupMetadataValue
from kafka_wire.messages.consumer_group_partition_metadata_key import ConsumerGroupPartitionMetadataKey
from kafka_wire.messages.consumer_group_partition_metadata_value import ConsumerGroupPartitionMetadataValue
from kafka_wire.messages.consumer_group_regular_expression_key import ConsumerGroupRegularExpressionKey
from kafka_wire.messages.consumer_group_regular_expression_value import ConsumerGroupRegularExpressionValue
from kafka_wire.messages.consumer_group_target_assignment_member_key import (
    ConsumerGroupTargetAssignmentMemberKey,
)
from kafka_wire.messages.consumer_group_target_assignment_member_value import (
    ConsumerGroupTargetAssignmentMemberValue,
)
from kafka_wire.messages.consumer_group_target_assignment_metadata_key import (
    ConsumerGroupTargetAssignmentMetadataKey,
)
from kafka_wire.messages.consumer_group_target_assignment_metadata_value import (
    ConsumerGroupTargetAssignmentMetadataValue,
)
from kafka_wire.messages.group_metadata_key import GroupMetadataKey
from kafka_wire.messages.group_metadata_value import GroupMetadataValue
from kafka_wire.messages.offset_commit_key import OffsetCommitKey
from kafka_wire.messages.offset_commit_value import OffsetCommitValue
from kafka_wire.messages.share_group_member_metadata_key import ShareGroupMemberMetadataKey
from kafka_wire.messages.share_group_member_metadata_value import ShareGroupMemberMetadataValue
from kafka_wire.messages.share_group_metadata_key import ShareGroupMetadataKey
from kafka_wire.messages.share_group_metadata_value import ShareGroupMetadataValue
from kafka_wire.primitives import Struct
from kafka_wire.records import NewRecord, build_batch, iter_batches

__all__ = [
    "CONSUMER_RECORDS",
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataKey",
    "ConsumerGroupPartitionMetadataValue",
    "ConsumerGroupRegularExpressionKey",
    "ConsumerGroupRegularExpressionValue",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "ConsumerKey",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "Record",
    "ShareGroupMemberMetadataKey",
    "ShareGroupMemberMetadataValue",
    "ShareGroupMetadataKey",
    "ShareGroupMetadataValue",
    "build_records_batch",
    "decode_consumer_value",
    "decode_group_value",
    "decode_key",
    "decode_offset_value",
    "decode_share_group_value",
    "decode_share_member_value",
    "encode_consumer_record",
    "encode_group_key",
    "encode_group_value",
    "encode_offset_key",
    "encode_offset_value",
    "encode_share_group",
    "encode_share_member",
    "iter_log_records",
]

MemberMetadata = GroupMetadataValue.MemberMetadata

# Record types (the key's leading int16). Type 0 is the offset-commit key of Kafka 0.8.2
# (LegacyOffsetCommitKey), field for field the same as type 1's.
LEGACY_OFFSET_COMMIT = 0
OFFSET_COMMIT = OffsetCommitKey.API_KEY  # 1
GROUP_METADATA = GroupMetadataKey.API_KEY  # 2
SHARE_GROUP_MEMBER_METADATA = ShareGroupMemberMetadataKey.API_KEY  # 10
SHARE_GROUP_METADATA = ShareGroupMetadataKey.API_KEY  # 11
_KEY_SCHEMA_VERSION = 0  # both key schemas have the one version 0
_GROUP_VALUE_VERSION = 3
_TYPE = struct.Struct(">h")


def encode_offset_key(k: OffsetCommitKey) -> bytes:
    return _TYPE.pack(OFFSET_COMMIT) + k.encode(_KEY_SCHEMA_VERSION)


def encode_group_key(k: GroupMetadataKey) -> bytes:
    return _TYPE.pack(GROUP_METADATA) + k.encode(_KEY_SCHEMA_VERSION)


def encode_offset_value(v: OffsetCommitValue) -> bytes:
    # Only v1 carries an explicit expiry (OffsetCommit v2-v4's retention time).
    return encode_versioned(v, 1 if v.expire_timestamp >= 0 else 3)


def encode_group_value(v: GroupMetadataValue) -> bytes:
    return encode_versioned(v, _GROUP_VALUE_VERSION)


# The consumer group protocol's records (KIP-848): record type -> (key schema, value schema).
CONSUMER_RECORDS: dict[int, tuple[type[Struct], type[Struct]]] = {
    k.API_KEY: (k, v)
    for k, v in (
        (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
        (ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue),
        (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
        (ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue),
        (ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue),
        (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue),
        (ConsumerGroupRegularExpressionKey, ConsumerGroupRegularExpressionValue),
    )
}
ConsumerKey = (
    ConsumerGroupMetadataKey | ConsumerGroupPartitionMetadataKey | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey | ConsumerGroupRegularExpressionKey
)
_CONSUMER_VALUE_VERSION = 0  # every ConsumerGroup* value schema has the one version 0


def encode_consumer_record(key: ConsumerKey, value: Struct | None) -> tuple[bytes, bytes | None]:
    """(key, value) of one consumer-protocol record; value None is the key's tombstone."""
    k = _TYPE.pack(key.API_KEY) + key.encode(_KEY_SCHEMA_VERSION)
    return k, None if value is None else encode_versioned(value, _CONSUMER_VALUE_VERSION)


def decode_consumer_value(key: ConsumerKey, data: bytes | memoryview) -> object:
    _, v = decode_versioned(CONSUMER_RECORDS[key.API_KEY][1], data)
    return v


def encode_share_group(group_id: str, v: ShareGroupMetadataValue | None) -> Record:
    """A share group's metadata record (None: its tombstone)."""
    key = _TYPE.pack(SHARE_GROUP_METADATA) + ShareGroupMetadataKey(group_id=group_id).encode(_KEY_SCHEMA_VERSION)
    return key, None if v is None else encode_versioned(v, 0)


def encode_share_member(group_id: str, member_id: str, v: ShareGroupMemberMetadataValue | None) -> Record:
    """A share-group member's record (None: its tombstone)."""
    k = ShareGroupMemberMetadataKey(group_id=group_id, member_id=member_id)
    return _TYPE.pack(SHARE_GROUP_MEMBER_METADATA) + k.encode(_KEY_SCHEMA_VERSION), (
        None if v is None else encode_versioned(v, 0))


def decode_share_group_value(data: bytes | memoryview) -> ShareGroupMetadataValue:
    _, v = decode_versioned(ShareGroupMetadataValue, data)
    assert isinstance(v, ShareGroupMetadataValue)
    return v


def decode_share_member_value(data: bytes | memoryview) -> ShareGroupMemberMetadataValue:
    _, v = decode_versioned(ShareGroupMemberMetadataValue, data)
    assert isinstance(v, ShareGroupMemberMetadataValue)
    return v


AnyKey = (
    OffsetCommitKey | GroupMetadataKey | ConsumerKey | ShareGroupMetadataKey | ShareGroupMemberMetadataKey
)


def decode_key(data: bytes | memoryview) -> AnyKey | None:
    """None for record types this coordinator does not own (the other share and the streams
    group records)."""
    b = memoryview(data)
    if len(b) < 2:
        raise DecodeError("truncated record type", "__consumer_offsets key", 0)
    (kind,) = _TYPE.unpack_from(b)
    if kind in (LEGACY_OFFSET_COMMIT, OFFSET_COMMIT):
        return OffsetCommitKey.decode(b[2:], _KEY_SCHEMA_VERSION)
    if kind == GROUP_METADATA:
        return GroupMetadataKey.decode(b[2:], _KEY_SCHEMA_VERSION)
    schemas = CONSUMER_RECORDS.get(kind)
    if schemas is not None:
        return schemas[0].decode(b[2:], _KEY_SCHEMA_VERSION)  # type: ignore[return-value]
    if kind == SHARE_GROUP_METADATA:
        return ShareGroupMetadataKey.decode(b[2:], _KEY_SCHEMA_VERSION)
    if kind == SHARE_GROUP_MEMBER_METADATA:
        return ShareGroupMemberMetadataKey.decode(b[2:], _KEY_SCHEMA_VERSION)
    return None


def decode_offset_value(data: bytes | memoryview) -> OffsetCommitValue:
    _, v = decode_versioned(OffsetCommitValue, data)
    assert isinstance(v, OffsetCommitValue)
    return v


def decode_group_value(data: bytes | memoryview) -> GroupMetadataValue:
    version, v = decode_versioned(GroupMetadataValue, data)
    assert isinstance(v, GroupMetadataValue)
    if version == 0:  # v0 has no rebalance timeout: Kafka reads it as the session timeout
        for m in v.members:
            m.rebalance_timeout = m.session_timeout
    return v


Record = tuple[bytes, bytes | None]


def build_records_batch(records: list[Record], producer: tuple[int, int] | None = None) -> bytes:
    """One uncompressed v2 batch of (key, value or None) records, offsets assigned by the log;
    with `producer` = (id, epoch), a transactional batch of that producer (TxnOffsetCommit)."""
    if producer is None:
        return build_batch([NewRecord(k, v) for k, v in records])
    return build_batch([NewRecord(k, v) for k, v in records], producer_id=producer[0],
                       producer_epoch=producer[1], transactional=True)


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
