"""Which shard of the offsets topic holds a group: Kafka's rule, bit for bit."""

from __future__ import annotations


def java_string_hashcode(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, int32 wrap-around)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def shard_for(group_id: str, shards: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount`."""
    h = java_string_hashcode(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % shards
