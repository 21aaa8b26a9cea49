"""A group shard's state as its `__consumer_offsets` records leave it: the latest group
metadata and committed offsets per group, tombstones applied. The one replay of a group log,
used by the coordinator loading a shard and by `quire admin` reading one without owning it."""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator.group.consumer_group import ConsumerGroup
from coordinator.group.records import (
    CONSUMER_RECORDS,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    decode_consumer_value,
    decode_group_value,
    decode_key,
    decode_offset_value,
    decode_share_group_value,
    decode_share_member_value,
)
from kafka_wire.records import iter_batches
from kafka_wire.records.control import read_end_txn_marker

TopicPartition = tuple[str, int]


@dataclass
class StoredGroup:
    """What a group's records say, replayed in order."""

    group: str
    shard: int
    metadata: GroupMetadataValue | None = None  # the latest GroupMetadata record (None: none, or deleted)
    offsets: dict[TopicPartition, OffsetCommitValue] = field(default_factory=dict)
    consumer: ConsumerGroup | None = None  # a consumer-protocol group's state (KIP-848)
    # producer id -> offsets of its transaction still open at the end of the log
    txn_offsets: dict[int, dict[TopicPartition, OffsetCommitValue]] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """As of the latest stored metadata: a coordinator loading the shard restores classic
        members as Stable; rebalances in progress are not stored."""
        if self.consumer is not None:
            return self.consumer.state.value
        return "Stable" if self.metadata is not None and self.metadata.members else "Empty"


@dataclass
class StoredShareGroup:
    """A share group as its records leave it: the group epoch and the members' metadata."""

    group: str
    shard: int
    metadata: ShareGroupMetadataValue | None = None
    members: dict[str, ShareGroupMemberMetadataValue] = field(default_factory=dict)


class GroupLogReplay:
    """Apply a shard's stored batches in order, then take `groups()`. With `skip_unreadable`
    (a reader that must not fail on what it cannot decode, e.g. a newer coordinator's record
    types) undecodable records are skipped; otherwise they raise ValueError."""

    def __init__(self, shard: int, *, skip_unreadable: bool = False) -> None:
        self.shard = shard
        self.skip_unreadable = skip_unreadable
        self._groups: dict[str, StoredGroup] = {}
        self._share: dict[str, StoredShareGroup] = {}

    def _group(self, group: str) -> StoredGroup:
        g = self._groups.get(group)
        if g is None:
            g = self._groups[group] = StoredGroup(group, self.shard)
        return g

    def apply(self, batches: bytes | memoryview) -> None:
        """Apply a run of whole record batches. Offsets of a transactional batch wait for their
        producer's marker: COMMIT applies them, ABORT drops them."""
        for batch in iter_batches(batches):
            pid = batch.producer_id if batch.is_transactional else -1
            if batch.is_control:
                marker = read_end_txn_marker(batch) if pid >= 0 else None
                if marker is not None:
                    self._end_txn(pid, marker.commit)
                continue
            for rec in batch.records():
                if rec.key is not None:
                    self._apply_record(pid, bytes(rec.key), None if rec.value is None else bytes(rec.value))

    def _end_txn(self, pid: int, commit: bool) -> None:
        for g in self._groups.values():
            pending = g.txn_offsets.pop(pid, None)
            if pending and commit:
                g.offsets.update(pending)

    def _apply_record(self, pid: int, key: bytes, value: bytes | None) -> None:
        try:
            k = decode_key(key)
            if isinstance(k, OffsetCommitKey):
                g = self._group(k.group)
                tp = (k.topic, k.partition)
                if pid >= 0:
                    if value is not None:
                        g.txn_offsets.setdefault(pid, {})[tp] = decode_offset_value(value)
                elif value is None:
                    g.offsets.pop(tp, None)
                else:
                    g.offsets[tp] = decode_offset_value(value)
            elif isinstance(k, GroupMetadataKey):
                self._group(k.group).metadata = None if value is None else decode_group_value(value)
            elif isinstance(k, ShareGroupMetadataKey):
                sg = self._share.setdefault(k.group_id, StoredShareGroup(k.group_id, self.shard))
                sg.metadata = None if value is None else decode_share_group_value(value)
            elif isinstance(k, ShareGroupMemberMetadataKey):
                sg = self._share.setdefault(k.group_id, StoredShareGroup(k.group_id, self.shard))
                if value is None:
                    sg.members.pop(k.member_id, None)
                else:
                    sg.members[k.member_id] = decode_share_member_value(value)
            elif k is not None and k.API_KEY in CONSUMER_RECORDS:
                g = self._group(k.group_id)
                if g.consumer is None:
                    g.consumer = ConsumerGroup(k.group_id)
                g.consumer.apply(k, None if value is None else decode_consumer_value(k, value))
                if not g.consumer.created and not g.consumer.members:
                    g.consumer = None  # deleted (its metadata tombstone)
        except ValueError:
            if not self.skip_unreadable:
                raise
            # a record we cannot read says nothing about the groups we can

    def share_groups(self) -> dict[str, StoredShareGroup]:
        """Every share group not deleted."""
        return {gid: g for gid, g in self._share.items() if g.metadata is not None}

    def groups(self) -> dict[str, StoredGroup]:
        """Every group with metadata or offsets left (deleted groups are gone)."""
        return {gid: g for gid, g in self._groups.items()
                if g.metadata is not None or g.offsets or g.txn_offsets or g.consumer is not None}
