"""One consumer-protocol group's state (KIP-848), as Kafka's ConsumerGroup / ConsumerGroupMember
hold it: group epoch, target assignment and its epoch, members with their member epochs and
current assignments, resolved regular expressions. It changes only by applying its
`__consumer_offsets` records (`apply`), whether just written or replayed at load, so what is in
memory is always what the log says. Reconciliation is Kafka's CurrentAssignmentBuilder."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from coordinator.group.assignors import Assignment
from coordinator.group.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerKey,
)
from kafka_wire.primitives import Struct

CRecord = tuple[ConsumerKey, Struct | None]  # one consumer-protocol record, value None a tombstone

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's MemberState (its byte values are stored)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


@dataclass(frozen=True)
class ClassicMeta:
    """A member speaking the classic protocol inside a consumer group (Kafka's
    ClassicMemberMetadata): its session timeout and JoinGroup protocols (name, metadata)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    # The current assignment (ConsumerGroupCurrentMemberAssignment).
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    pending_revocation: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    # The member epoch at which each assigned partition was assigned (KIP-1251: commits from an
    # older member epoch are accepted for partitions held since then).
    assigned_at: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    classic: ClassicMeta | None = None  # set for a classic-protocol member (mixed groups)

    def holds(self) -> dict[uuid.UUID, frozenset[int]]:
        out = dict(self.assigned)
        for t, p in self.pending_revocation.items():
            out[t] = out.get(t, frozenset()) | p
        return out

    def assignment_epoch_of(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The epoch the partition was assigned at, None if it is not assigned to the member."""
        if partition not in self.assigned.get(topic_id, ()):
            return None
        return self.assigned_at.get((topic_id, partition), self.member_epoch)

    def metadata_equal(self, other: ConsumerMember) -> bool:
        return _metadata_value(self) == _metadata_value(other)

    def assignment_equal(self, other: ConsumerMember) -> bool:
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned, self.pending_revocation,
                self.assigned_at) == (other.member_epoch, other.previous_member_epoch, other.state, other.assigned,
                                      other.pending_revocation, other.assigned_at)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def with_epoch(self, epoch: int, **changes: Any) -> ConsumerMember:
        """Kafka's Builder.updateMemberEpoch: the old epoch becomes the previous one."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch, **changes)


def frozen(a: Assignment | dict[uuid.UUID, frozenset[int]]) -> dict[uuid.UUID, frozenset[int]]:
    return {t: frozenset(p) for t, p in a.items() if p}


@dataclass
class ResolvedRegex:
    topics: frozenset[str]
    version: int
    timestamp: int


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.assignment_timestamp = 0  # when the target assignment was computed (ms)
        self.members: dict[str, ConsumerMember] = {}
        self.targets: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
        self.regexes: dict[str, ResolvedRegex] = {}
        self.created = False  # a ConsumerGroupMetadata record exists

    # ---- views ---------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        """Kafka's ConsumerGroup.maybeUpdateGroupState."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        if instance_id is None:
            return None
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def partition_epochs(self) -> dict[tuple[uuid.UUID, int], int]:
        """Who holds each partition (assigned or pending revocation): its member's epoch."""
        out: dict[tuple[uuid.UUID, int], int] = {}
        for m in self.members.values():
            for a in (m.assigned, m.pending_revocation):
                for t, parts in a.items():
                    for p in parts:
                        out[(t, p)] = m.member_epoch
        return out

    def regex_subscribers(self, regex: str) -> int:
        return sum(1 for m in self.members.values() if m.subscribed_topic_regex == regex)

    def member_topics(self, m: ConsumerMember, regexes: Mapping[str, ResolvedRegex] | None = None) -> set[str]:
        """The topics a member subscribes to: its names and what its regular expression matched."""
        out = set(m.subscribed_topic_names)
        if m.subscribed_topic_regex:
            r = (self.regexes if regexes is None else regexes).get(m.subscribed_topic_regex)
            if r is not None:
                out |= r.topics
        return out

    def subscribed_topics(self) -> set[str]:
        return {n for m in self.members.values() for n in self.member_topics(m)}

    # ---- records -------------------------------------------------------------------------

    def apply(self, key: ConsumerKey, value: object | None) -> None:
        """Apply one of this group's records (value None: a tombstone), as Kafka's replay does."""
        if isinstance(key, ConsumerGroupMetadataKey):
            if value is None:
                self.created = False
                self.group_epoch = 0
            else:
                assert isinstance(value, ConsumerGroupMetadataValue)
                self.created = True
                self.group_epoch = value.epoch
                self.metadata_hash = value.metadata_hash
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            if value is None:
                self.members.pop(key.member_id, None)
            else:
                assert isinstance(value, ConsumerGroupMemberMetadataValue)
                old = self.members.get(key.member_id) or ConsumerMember(key.member_id)
                self.members[key.member_id] = replace(
                    old,
                    instance_id=value.instance_id,
                    rack_id=value.rack_id,
                    client_id=value.client_id,
                    client_host=value.client_host,
                    subscribed_topic_names=tuple(sorted(value.subscribed_topic_names)),
                    subscribed_topic_regex=value.subscribed_topic_regex,
                    rebalance_timeout_ms=value.rebalance_timeout_ms,
                    server_assignor=value.server_assignor,
                    classic=None if value.classic_member_metadata is None else ClassicMeta(
                        value.classic_member_metadata.session_timeout_ms,
                        tuple((p.name, bytes(p.metadata))
                              for p in value.classic_member_metadata.supported_protocols)),
                )
        elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
            if value is None:
                m = self.members.get(key.member_id)
                if m is not None:
                    self.members[key.member_id] = replace(
                        m, member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE, assigned={},
                        pending_revocation={})
            else:
                assert isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
                m = self.members.get(key.member_id) or ConsumerMember(key.member_id)
                try:
                    state = MemberState(value.state)
                except ValueError:
                    state = MemberState.UNKNOWN
                self.members[key.member_id] = replace(
                    m,
                    member_epoch=value.member_epoch,
                    previous_member_epoch=value.previous_member_epoch,
                    state=state,
                    assigned={t.topic_id: frozenset(t.partitions) for t in value.assigned_partitions},
                    assigned_at={(t.topic_id, p): e for t in value.assigned_partitions
                                 if t.assignment_epochs is not None
                                 for p, e in zip(t.partitions, t.assignment_epochs, strict=False)},
                    pending_revocation={t.topic_id: frozenset(t.partitions) for t in value.partitions_pending_revocation},
                )
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
            if value is None:
                self.targets.pop(key.member_id, None)
            else:
                assert isinstance(value, ConsumerGroupTargetAssignmentMemberValue)
                self.targets[key.member_id] = {t.topic_id: frozenset(t.partitions) for t in value.topic_partitions}
        elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
            if value is None:
                self.assignment_epoch = 0
            else:
                assert isinstance(value, ConsumerGroupTargetAssignmentMetadataValue)
                self.assignment_epoch = value.assignment_epoch
                self.assignment_timestamp = value.assignment_timestamp
        elif isinstance(key, ConsumerGroupRegularExpressionKey):
            if value is None:
                self.regexes.pop(key.regular_expression, None)
            else:
                assert isinstance(value, ConsumerGroupRegularExpressionValue)
                self.regexes[key.regular_expression] = ResolvedRegex(
                    frozenset(value.topics), value.version, value.timestamp)
        # ConsumerGroupPartitionMetadata (deprecated since 4.0: the hash replaced it) holds nothing we use.

    # ---- record builders (Kafka's GroupCoordinatorRecordHelpers) ----------------------------

    def epoch_record(self, epoch: int, metadata_hash: int) -> CRecord:
        return (
            ConsumerGroupMetadataKey(group_id=self.group_id),
            ConsumerGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash))

    def member_record(self, m: ConsumerMember) -> CRecord:
        return (
            ConsumerGroupMemberMetadataKey(group_id=self.group_id, member_id=m.member_id), _metadata_value(m))

    def target_record(self, member_id: str, a: dict[uuid.UUID, frozenset[int]]) -> CRecord:
        tps = [ConsumerGroupTargetAssignmentMemberValue.TopicPartition(topic_id=t, partitions=sorted(p))
               for t, p in sorted(a.items())]
        return (
            ConsumerGroupTargetAssignmentMemberKey(group_id=self.group_id, member_id=member_id),
            ConsumerGroupTargetAssignmentMemberValue(topic_partitions=tps))

    def target_epoch_record(self, epoch: int, now_ms: int) -> CRecord:
        return (
            ConsumerGroupTargetAssignmentMetadataKey(group_id=self.group_id),
            ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch, assignment_timestamp=now_ms))

    def current_record(self, m: ConsumerMember) -> CRecord:
        def tps(a: dict[uuid.UUID, frozenset[int]], epochs: bool = False
                ) -> list[ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions]:
            return [ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions(
                topic_id=t, partitions=sorted(p),
                assignment_epochs=[m.assigned_at.get((t, x), m.member_epoch) for x in sorted(p)] if epochs else None)
                for t, p in sorted(a.items())]

        return (
            ConsumerGroupCurrentMemberAssignmentKey(group_id=self.group_id, member_id=m.member_id),
            ConsumerGroupCurrentMemberAssignmentValue(
                member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=int(m.state),
                assigned_partitions=tps(m.assigned, True), partitions_pending_revocation=tps(m.pending_revocation)))

    def regex_record(self, regex: str, resolved: ResolvedRegex | None) -> CRecord:
        key = ConsumerGroupRegularExpressionKey(group_id=self.group_id, regular_expression=regex)
        if resolved is None:
            return (key, None)
        return (key, ConsumerGroupRegularExpressionValue(
            topics=sorted(resolved.topics), version=resolved.version, timestamp=resolved.timestamp))

    def member_tombstones(self, member_id: str) -> list[CRecord]:
        """Kafka's removeMember: the order matters (current, target, then subscription)."""
        return [
            (ConsumerGroupCurrentMemberAssignmentKey(group_id=self.group_id, member_id=member_id), None),
            (ConsumerGroupTargetAssignmentMemberKey(group_id=self.group_id, member_id=member_id), None),
            (ConsumerGroupMemberMetadataKey(group_id=self.group_id, member_id=member_id), None),
        ]

    def group_tombstones(self) -> list[CRecord]:
        """Kafka's ConsumerGroup.createGroupTombstoneRecords (the group must be empty)."""
        out: list[CRecord] = []
        for mid in list(self.members):
            out.extend(self.member_tombstones(mid))
        for regex in self.regexes:
            out.append(self.regex_record(regex, None))
        out.append((ConsumerGroupTargetAssignmentMetadataKey(group_id=self.group_id), None))
        out.append((ConsumerGroupPartitionMetadataKey(group_id=self.group_id), None))
        out.append((ConsumerGroupMetadataKey(group_id=self.group_id), None))
        return out


def preferred_assignor(members: Iterable[ConsumerMember]) -> str | None:
    """The server assignor most members name (Kafka's computePreferredServerAssignor)."""
    votes: dict[str, int] = {}
    for m in members:
        if m.server_assignor:
            votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
    return max(sorted(votes), key=lambda a: votes[a]) if votes else None


def _metadata_value(m: ConsumerMember) -> ConsumerGroupMemberMetadataValue:
    return ConsumerGroupMemberMetadataValue(
        instance_id=m.instance_id,
        rack_id=m.rack_id,
        client_id=m.client_id,
        client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex,
        rebalance_timeout_ms=m.rebalance_timeout_ms,
        server_assignor=m.server_assignor,
        classic_member_metadata=None if m.classic is None else ConsumerGroupMemberMetadataValue.ClassicMemberMetadata(
            session_timeout_ms=m.classic.session_timeout_ms,
            supported_protocols=[ConsumerGroupMemberMetadataValue.ClassicProtocol(name=n, metadata=md)
                                 for n, md in m.classic.protocols]),
    )


def reconcile(
    member: ConsumerMember,
    target_epoch: int,
    target: dict[uuid.UUID, frozenset[int]],
    subscribed_ids: set[uuid.UUID],
    partition_epochs: dict[tuple[uuid.UUID, int], int],
    owned: dict[uuid.UUID, set[int]] | None,
) -> ConsumerMember:
    """Kafka's CurrentAssignmentBuilder.build: the member's next current assignment. Partitions
    leaving it are revoked first (the member keeps its epoch until it reports them gone);
    partitions another member still holds are given only once released."""

    def owns_revoked(pending: dict[uuid.UUID, frozenset[int]]) -> bool:
        if owned is None:
            return True
        return any(p in pending.get(t, ()) for t, parts in owned.items() for p in parts)

    def next_assignment(epoch: int) -> ConsumerMember:
        unreleased = False
        assigned: dict[uuid.UUID, frozenset[int]] = {}
        revoking: dict[uuid.UUID, frozenset[int]] = {}
        pending_assign: dict[uuid.UUID, set[int]] = {}
        for tid in set(target) | set(member.assigned):
            tgt = target.get(tid, frozenset()) if tid in subscribed_ids else frozenset()
            cur = member.assigned.get(tid, frozenset())
            keep = cur & tgt
            if keep:
                assigned[tid] = keep
            if cur - keep:
                revoking[tid] = cur - keep
            todo = set(tgt - keep)
            mine = member.pending_revocation.get(tid, frozenset())
            held = {p for p in todo if partition_epochs.get((tid, p), -1) != -1 and p not in mine}
            if held:
                unreleased = True
                todo -= held
            if todo:
                pending_assign[tid] = todo
        at = {(t, p): member.assigned_at.get((t, p), member.member_epoch) for t, ps in assigned.items() for p in ps}
        if revoking and owns_revoked(revoking):
            return member.with_epoch(epoch, state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned,
                                     pending_revocation=revoking, assigned_at=at)
        for tid, parts in pending_assign.items():
            assigned[tid] = assigned.get(tid, frozenset()) | parts
            at.update({(tid, p): target_epoch for p in parts})
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return member.with_epoch(target_epoch, state=state, assigned=assigned, pending_revocation={}, assigned_at=at)

    st = member.state
    if st is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return next_assignment(member.member_epoch)
        return member
    if st is MemberState.UNREVOKED_PARTITIONS:
        if owns_revoked(member.pending_revocation):
            return member
        return next_assignment(member.member_epoch)
    if st is MemberState.UNRELEASED_PARTITIONS:
        return next_assignment(member.member_epoch)
    return next_assignment(target_epoch)
