"""One classic group's in-memory state: members, generation, protocol, committed offsets.
Mirrors Kafka's GroupMetadata / MemberMetadata; transitions are driven by the coordinator."""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from dataclasses import dataclass, field

from coordinator.group.consumer_group import ConsumerGroup
from coordinator.group.records import OffsetCommitValue
from kafka_wire.errors import ErrorCode
from store.clock import TimerHandle


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Kafka's GroupState.validPreviousStates.
_VALID_FROM: dict[GroupState, set[GroupState]] = {
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: set(GroupState),
}


@dataclass
class JoinResult:
    error: int
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)  # id, instance, metadata


@dataclass
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


# A committed offset is held in memory exactly as its __consumer_offsets record stores it.
OffsetAndMetadata = OffsetCommitValue


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    is_new: bool = False
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[SyncResult] | None = None
    heartbeat_timer: TimerHandle | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")

    def complete_join(self, result: JoinResult) -> None:
        w, self.join_waiter = self.join_waiter, None
        if w is not None and not w.done():
            w.set_result(result)

    def complete_sync(self, result: SyncResult) -> None:
        w, self.sync_waiter = self.sync_waiter, None
        if w is not None and not w.done():
            w.set_result(result)

    def cancel_heartbeat(self) -> None:
        if self.heartbeat_timer is not None:
            self.heartbeat_timer.cancel()
            self.heartbeat_timer = None


class Group:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.previous_state = GroupState.EMPTY
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, TimerHandle | None] = {}  # MEMBER_ID_REQUIRED issued
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        self.pending_offsets: Counter[tuple[str, int]] = Counter()  # commits being written
        # Offsets committed in a producer's open transaction (TxnOffsetCommit): applied when its
        # COMMIT marker lands on this shard's partition, dropped on ABORT.
        self.txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = {}
        self.join_timer: TimerHandle | None = None
        self.initial_delay_remaining_ms = 0
        self.in_initial_delay = False
        self.sync_timer: TimerHandle | None = None
        self.state_timestamp = -1
        # Set while the group speaks the consumer protocol (KIP-848); the classic state is then Empty.
        self.consumer: ConsumerGroup | None = None

    # ---- state -------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition(self, target: GroupState) -> None:
        if self.state not in _VALID_FROM[target]:
            raise RuntimeError(f"group {self.group_id}: illegal transition {self.state} -> {target}")
        self.previous_state, self.state = self.state, target

    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    # ---- members -----------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_static_member_fenced(self, instance_id: str | None, member_id: str) -> bool:
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        member.cancel_heartbeat()
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        member = self.members.pop(old_id)
        # The old incarnation's waiting requests learn that they were fenced.
        member.complete_join(JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
        member.complete_sync(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ---- protocols ---------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        names = {n for n, _ in protocols}
        return any(all(n in {p for p, _ in m.protocols} for m in self.members.values()) for n in names)

    def select_protocol(self) -> str:
        members = list(self.members.values())
        candidates = set.intersection(*({n for n, _ in m.protocols} for m in members))
        votes = Counter(m.vote(candidates) for m in members)
        # Ties go to the first member's preference order, deterministically.
        best = max(votes.values())
        for name, _ in members[0].protocols:
            if votes.get(name) == best:
                return name
        return votes.most_common(1)[0][0]

    def member_metadata_list(self) -> list[tuple[str, str | None, bytes]]:
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]
