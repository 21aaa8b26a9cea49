"""One share group's membership as the coordinator holds it: members with their epochs and
subscriptions, the group epoch and the target assignment (Kafka's ShareGroup / SimpleAssignor:
every member gets partitions, several members may share one)."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

from store.clock import TimerHandle

# topic name -> (topic id, partition count)
TopicsMetadata = dict[str, tuple[uuid.UUID, int]]
# topic id -> sorted partitions
Assignment = dict[uuid.UUID, list[int]]


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None = None
    member_epoch: int = 0
    subscribed: list[str] = field(default_factory=list)
    assignment: Assignment = field(default_factory=dict)
    sent_assignment: Assignment | None = None  # what the member was last told
    timer: TimerHandle | None = None

    def cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    topics: TopicsMetadata = field(default_factory=dict)  # of the subscribed topics, at the last assignment

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}

    def assign(self) -> None:
        """Recompute every member's target assignment (the simple assignor) at the group epoch."""
        for m in self.members.values():
            m.assignment = {}
        for name, (tid, partitions) in sorted(self.topics.items()):
            subs = sorted(mid for mid, m in self.members.items() if name in m.subscribed)
            if not subs or partitions <= 0:
                continue
            if len(subs) <= partitions:
                # Fewer members than partitions: partitions spread over the members.
                for p in range(partitions):
                    self.members[subs[p % len(subs)]].assignment.setdefault(tid, []).append(p)
            else:
                # More members than partitions: every member gets one, partitions are shared.
                for i, mid in enumerate(subs):
                    self.members[mid].assignment.setdefault(tid, []).append(i % partitions)
        self.assignment_epoch = self.group_epoch
