"""Committed offsets and the admin side of a shard: OffsetCommit, OffsetFetch, DescribeGroups,
ListGroups, DeleteGroups, OffsetDelete, with Kafka's validation rules."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from coordinator.group.group import Group, GroupState, OffsetAndMetadata
from coordinator.group.records import (
    GroupMetadataKey,
    Record,
    encode_consumer_record,
    encode_group_key,
    encode_share_group,
)
from coordinator.group.shard import ShardState
from coordinator.share.config import SHARE_PROTOCOL_TYPE
from kafka_wire.api import decode_versioned, schema_class
from kafka_wire.errors import ErrorCode

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
CLASSIC = "classic"
CONSUMER = "consumer"


@dataclass
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass
class GroupDescription:
    error: int
    group_id: str
    state: str = GroupState.DEAD.value
    protocol_type: str = ""
    protocol_data: str = ""
    members: list[MemberDescription] = field(default_factory=list)
    message: str | None = None


@dataclass
class FetchedOffset:
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str | None = ""
    error: int = ErrorCode.NONE


def subscribed_topics(group: Group) -> set[str] | None:
    """Topics the members of a "consumer" group subscribe to (None if unknown)."""
    if group.protocol_type != "consumer" or not group.protocol_name:
        return None
    out: set[str] = set()
    cls = schema_class("ConsumerProtocolSubscription")
    try:
        for m in group.members.values():
            _, sub = decode_versioned(cls, m.metadata(group.protocol_name))
            out.update(sub.topics)  # type: ignore[attr-defined]
    except Exception:
        return None
    return out


class OffsetOps(ShardState):
    def _validate_offset_commit(self, group: Group, generation_id: int, member_id: str, instance_id: str | None) -> int:
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id >= 0 or member_id or instance_id is not None:
            if instance_id is not None:
                current = group.static_members.get(instance_id)
                if current is None:
                    return ErrorCode.UNKNOWN_MEMBER_ID
                if current != member_id:
                    return ErrorCode.FENCED_INSTANCE_ID
            elif not group.has(member_id):
                return ErrorCode.UNKNOWN_MEMBER_ID
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not group.is_(GroupState.EMPTY):
            # Only members may commit to a group that has members.
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def _validate_consumer_commit(
        self, group: Group, member_epoch: int, member_id: str, api_version: int, tps: list[TopicPartition],
        *, transactional: bool = False, instance_id: str | None = None,
    ) -> int | dict[TopicPartition, int]:
        """Kafka's ConsumerGroup.validateOffsetCommit: one error for the request, or one per
        partition when an older member epoch commits (KIP-1251: accepted for the partitions the
        member has held since that epoch). A transactional commit may come from a producer that
        names no member (epoch -1, no member id or instance id)."""
        cg = group.consumer
        assert cg is not None
        if member_epoch < 0 and not cg.members:
            return ErrorCode.NONE
        if transactional and member_epoch == -1 and not member_id and instance_id is None:
            return ErrorCode.NONE
        member = cg.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.classic is not None:  # a classic member: its generation is its member epoch
            return ErrorCode.NONE if member_epoch == member.member_epoch else ErrorCode.ILLEGAL_GENERATION
        if api_version < 9 and not transactional:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch == member.member_epoch:
            return ErrorCode.NONE
        if member_epoch > member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        image = self.topics_view()
        out: dict[TopicPartition, int] = {}
        for tp in tps:
            meta = image.get(tp[0])
            at = member.assignment_epoch_of(meta.topic_id, tp[1]) if meta is not None else None
            out[tp] = ErrorCode.NONE if at is not None and at <= member_epoch else ErrorCode.STALE_MEMBER_EPOCH
        return out

    async def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        api_version: int = 8,
    ) -> dict[TopicPartition, int]:
        """`generation_id` is the member epoch of a consumer-protocol group's member."""

        def all_(err: int) -> dict[TopicPartition, int]:
            return dict.fromkeys(offsets, err)

        if not self.active:
            return all_(ErrorCode.NOT_COORDINATOR)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # OffsetCommit v9+ (KIP-848) names the missing group.
                return all_(ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9 else ErrorCode.ILLEGAL_GENERATION)
            group = self.groups[group_id] = Group(group_id)
        partition_errors: dict[TopicPartition, int] = {}
        err: int
        if group.consumer is not None:
            checked = self._validate_consumer_commit(group, generation_id, member_id, api_version, list(offsets))
            if isinstance(checked, dict):
                partition_errors = {tp: e for tp, e in checked.items() if e}
                offsets = {tp: om for tp, om in offsets.items() if tp not in partition_errors}
                err = ErrorCode.NONE
            else:
                err = checked
        else:
            err = self._validate_offset_commit(group, generation_id, member_id, instance_id)
        if err:
            self._maybe_drop(group)
            return all_(err)
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return all_(ErrorCode.REBALANCE_IN_PROGRESS)
        member = group.members.get(member_id)
        if member is not None and not group.is_(GroupState.EMPTY):
            self._schedule_heartbeat(group, member)
        out: dict[TopicPartition, int] = dict(partition_errors)
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if len(om.metadata.encode()) > self.config.offset_metadata_max_bytes:
                out[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = om
        if valid:
            records = [self.offset_record(group_id, tp, om) for tp, om in valid.items()]
            group.pending_offsets.update(valid.keys())
            try:
                err = await self._append(records)
            finally:
                group.pending_offsets.subtract(valid.keys())
                group.pending_offsets = +group.pending_offsets
            if not err and self.groups.get(group_id) is group:
                group.offsets.update(valid)
            for tp in valid:
                out[tp] = err
        self._maybe_drop(group)
        return out

    async def txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        api_version: int = 5,
    ) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: offsets written in the producer's transaction, pending until its
        marker lands on this shard (`complete_txn`). Kafka 4.4's validation of the member:
        v6 (KIP-1319) is the first to answer GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH, older
        versions get ILLEGAL_GENERATION instead; a stale epoch on any partition fails the whole
        request (no partial commit inside a transaction)."""
        def all_(err: int) -> dict[TopicPartition, int]:
            return dict.fromkeys(offsets, err)

        if not self.active:
            return all_(ErrorCode.NOT_COORDINATOR)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return all_(ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 6 else ErrorCode.ILLEGAL_GENERATION)
            group = self.groups[group_id] = Group(group_id)
        if group.is_(GroupState.DEAD):
            return all_(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.consumer is not None:
            checked = self._validate_consumer_commit(
                group, generation_id, member_id, api_version, list(offsets), transactional=True, instance_id=instance_id
            )
            err = checked if isinstance(checked, int) else next((e for e in checked.values() if e), ErrorCode.NONE)
            if err == ErrorCode.STALE_MEMBER_EPOCH and api_version < 6:
                err = ErrorCode.ILLEGAL_GENERATION
            if err:
                return all_(err)
        else:
            if group.is_static_member_fenced(instance_id, member_id):
                return all_(ErrorCode.FENCED_INSTANCE_ID)
            if member_id and not group.has(member_id):
                self._maybe_drop(group)
                return all_(ErrorCode.UNKNOWN_MEMBER_ID)
            if generation_id >= 0 and generation_id != group.generation_id:
                self._maybe_drop(group)
                return all_(ErrorCode.ILLEGAL_GENERATION)
        out: dict[TopicPartition, int] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if len(om.metadata.encode()) > self.config.offset_metadata_max_bytes:
                out[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = om
        if valid:
            records = [self.offset_record(group_id, tp, om) for tp, om in valid.items()]
            err = await self._append(records, (producer_id, producer_epoch))
            if not err and self.groups.get(group_id) is group:
                group.txn_offsets.setdefault(producer_id, {}).update(valid)
            for tp in valid:
                out[tp] = err
        self._maybe_drop(group)
        return out

    def complete_txn(self, producer_id: int, commit: bool) -> None:
        """The producer's marker is on this shard's partition: its transaction's offsets become
        the committed ones (COMMIT) or are dropped (ABORT)."""
        for group in list(self.groups.values()):
            pending = group.txn_offsets.pop(producer_id, None)
            if pending and commit:
                group.offsets.update(pending)
            self._maybe_drop(group)

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool = False,
        member_id: str | None = None, member_epoch: int = -1,
    ) -> tuple[int, list[FetchedOffset]]:
        """(group error, offsets); partitions None means every committed one. A consumer-protocol
        member (OffsetFetch v9+) names itself and its epoch."""
        if not self.active:
            return ErrorCode.NOT_COORDINATOR, []
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.NONE, [FetchedOffset(t, p) for t, p in partitions or []]
        cg = group.consumer
        if cg is not None and not (member_epoch < 0 and member_id is None):
            # Kafka's ConsumerGroup.validateOffsetFetch.
            member = cg.members.get(member_id or "")
            if member is None:
                return ErrorCode.UNKNOWN_MEMBER_ID, []
            if member_epoch != member.member_epoch:
                return ErrorCode.STALE_MEMBER_EPOCH, []
        tps = partitions if partitions is not None else sorted(group.offsets)
        out = []
        for tp in tps:
            if require_stable and (group.pending_offsets.get(tp) or any(tp in o for o in group.txn_offsets.values())):
                out.append(FetchedOffset(tp[0], tp[1], error=ErrorCode.UNSTABLE_OFFSET_COMMIT))
                continue
            om = group.offsets.get(tp)
            if om is None:
                out.append(FetchedOffset(tp[0], tp[1]))
            else:
                out.append(FetchedOffset(tp[0], tp[1], om.offset, om.leader_epoch, om.metadata))
        return ErrorCode.NONE, out

    async def expire_offsets(self, now: int) -> int:
        """Kafka's offsets retention: offsets of empty groups (counted from when the group
        became empty) and of simple-commit groups (from each commit) older than
        offsets_retention_ms, or past an explicit expiry, are deleted; an empty group left
        with no offsets is deleted too. Returns the number of offsets removed."""
        if not self.active:
            return 0
        retention = self.config.offsets_retention_ms
        removed = 0
        for gid, group in list(self.groups.items()):
            if group.protocol_type is not None and not group.is_(GroupState.EMPTY):
                continue
            if group.consumer is not None and group.consumer.members:
                continue
            expired = []
            for tp, om in group.offsets.items():
                if group.pending_offsets.get(tp):
                    continue
                if om.expire_timestamp >= 0:
                    due = om.expire_timestamp <= now
                else:
                    base = group.state_timestamp if group.protocol_type is not None and group.state_timestamp >= 0 else om.commit_timestamp
                    due = base + retention <= now
                if due:
                    expired.append(tp)
            if not expired:
                continue
            records = [self.offset_record(gid, tp, None) for tp in expired]
            drop_group = len(expired) == len(group.offsets) and group.is_(GroupState.EMPTY) and not group.members
            if drop_group:
                records += self._group_tombstones(group)
            if await self._append(records):
                continue
            for tp in expired:
                group.offsets.pop(tp, None)
            removed += len(expired)
            if drop_group and not group.offsets and not group.members and self.groups.get(gid) is group:
                group.transition(GroupState.DEAD)
                self._cancel_group_timers(group)
                del self.groups[gid]
        return removed

    @staticmethod
    def _group_tombstones(group: Group) -> list[Record]:
        """The records deleting a group's metadata, of whichever protocol it speaks."""
        if group.consumer is not None:
            return [encode_consumer_record(k, v) for k, v in group.consumer.group_tombstones()]
        return [(encode_group_key(GroupMetadataKey(group=group.group_id)), None)]

    def committed(self) -> dict[str, dict[TopicPartition, int]]:
        """Every group's committed offsets (for cursors and lag)."""
        return {gid: {tp: om.offset for tp, om in g.offsets.items()} for gid, g in self.groups.items()}

    # ---- admin ---------------------------------------------------------------------------

    def describe(self, group_id: str) -> GroupDescription:
        if not self.active:
            return GroupDescription(ErrorCode.NOT_COORDINATOR, group_id)
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            if group_id in self.share_groups:
                # Kafka's classicGroup(): a share group is not a classic group either.
                return GroupDescription(ErrorCode.GROUP_ID_NOT_FOUND, group_id,
                                        message=f"Group {group_id} is not a classic group.")
            return GroupDescription(ErrorCode.GROUP_ID_NOT_FOUND, group_id, message=f"Group {group_id} not found.")
        if group.consumer is not None:
            # Kafka's classicGroup(): DescribeGroups describes classic groups only.
            return GroupDescription(ErrorCode.GROUP_ID_NOT_FOUND, group_id,
                                    message=f"Group {group_id} is not a classic group.")
        stable = group.is_(GroupState.STABLE)
        members = [
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return GroupDescription(
            ErrorCode.NONE,
            group_id,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    def list_groups(
        self, states: list[str] | None = None, types: list[str] | None = None
    ) -> list[tuple[str, str, str, str]]:
        """(group id, protocol type, state, group type) of every live group, filtered."""
        if not self.active:
            return []
        want_states = {s.lower() for s in states} if states else None
        want_types = {t.lower() for t in types} if types else None
        out = []
        for gid, g in self.groups.items():
            if g.is_(GroupState.DEAD):
                continue
            if g.consumer is not None:
                state, gtype, ptype = g.consumer.state.value, CONSUMER, CONSUMER
            else:
                state, gtype, ptype = g.state.value, CLASSIC, g.protocol_type or ""
            if want_states is not None and state.lower() not in want_states:
                continue
            if want_types is not None and gtype not in want_types:
                continue
            out.append((gid, ptype, state, gtype))
        for gid, sg in self.share_groups.items():
            if want_states is not None and sg.state.value.lower() not in want_states:
                continue
            if want_types is not None and SHARE_PROTOCOL_TYPE not in want_types:
                continue
            out.append((gid, SHARE_PROTOCOL_TYPE, sg.state.value, SHARE_PROTOCOL_TYPE))
        return out

    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for gid in group_ids:
            if not self.active:
                out[gid] = ErrorCode.NOT_COORDINATOR
                continue
            group = self.groups.get(gid)
            share = self.share_groups.get(gid)
            if share is not None:
                # Share-partition state stays with the partitions' cursors (DeleteShareGroupOffsets).
                if share.members:
                    out[gid] = ErrorCode.NON_EMPTY_GROUP
                else:
                    err = await self._append([encode_share_group(gid, None)])
                    if not err and self.share_groups.get(gid) is share:
                        del self.share_groups[gid]
                    out[gid] = err
            elif group is None or group.is_(GroupState.DEAD):
                out[gid] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_(GroupState.EMPTY) or group.members or group.pending_members or (
                group.consumer is not None and group.consumer.members
            ):
                out[gid] = ErrorCode.NON_EMPTY_GROUP
            else:
                records: list[Record] = [self.offset_record(gid, tp, None) for tp in group.offsets]
                records += self._group_tombstones(group)
                err = await self._append(records)
                if not err and self.groups.get(gid) is group:
                    group.transition(GroupState.DEAD)
                    self._cancel_group_timers(group)
                    del self.groups[gid]
                out[gid] = err
        return out

    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, int]]:
        if not self.active:
            return ErrorCode.NOT_COORDINATOR, {}
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        out: dict[TopicPartition, int] = {}
        if group.consumer is not None or (group.protocol_type == "consumer" and not group.is_(GroupState.EMPTY)):
            subscribed = (group.consumer.subscribed_topics() if group.consumer is not None
                          else subscribed_topics(group) or set())
            deletable = []
            for tp in partitions:
                if tp[0] in subscribed:
                    out[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    deletable.append(tp)
        elif group.is_(GroupState.EMPTY):
            deletable = list(partitions)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        present = [tp for tp in deletable if tp in group.offsets]
        err = await self._append([self.offset_record(group_id, tp, None) for tp in present])
        if err:
            return err, {}
        for tp in present:
            group.offsets.pop(tp, None)
        for tp in deletable:
            out[tp] = ErrorCode.NONE
        return ErrorCode.NONE, out
