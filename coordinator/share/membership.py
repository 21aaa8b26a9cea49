"""ShareGroupHeartbeat and ShareGroupDescribe on one coordinator shard (Kafka 4.4's
GroupMetadataManager.shareGroupHeartbeat): members join with epoch 0 and a client-chosen member
id, leave with -1; any change of membership, subscriptions or subscribed topics' partitions bumps
the group epoch and recomputes the assignment, which members take on their next heartbeat (share
groups revoke nothing, so there is no reconciliation). Groups and members are stored as Kafka
stores them (ShareGroupMetadata, ShareGroupMemberMetadata records in the shard's log), so a
coordinator failover keeps them; members then heartbeat on at the stored epoch."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from coordinator.group.records import (
    Record,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataValue,
    encode_share_group,
    encode_share_member,
)
from coordinator.group.shard import ShardState
from coordinator.group.stored import StoredShareGroup
from coordinator.share.group import Assignment, ShareGroup, ShareMember, TopicsMetadata
from kafka_wire.errors import ErrorCode

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
ASSIGNOR_NAME = "simple"
TopicResolver = Callable[[Iterable[str]], Awaitable[TopicsMetadata]]


@dataclass
class HeartbeatResult:
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: unchanged since the member was last told


@dataclass
class ShareMemberDescription:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed: list[str]
    assignment: Assignment


@dataclass
class ShareGroupDescription:
    group_id: str
    error: int = ErrorCode.NONE
    message: str | None = None
    state: str = "Dead"
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ASSIGNOR_NAME
    members: list[ShareMemberDescription] = field(default_factory=list)


def group_record(group: ShareGroup) -> Record:
    return encode_share_group(group.group_id, ShareGroupMetadataValue(epoch=group.group_epoch))


def member_record(group: ShareGroup, m: ShareMember) -> Record:
    v = ShareGroupMemberMetadataValue(rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
                                      subscribed_topic_names=list(m.subscribed))
    return encode_share_member(group.group_id, m.member_id, v)


class ShareGroupOps(ShardState):
    async def share_heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed: list[str] | None,
        client_id: str,
        client_host: str,
        resolve: TopicResolver,
        session_timeout_ms: int | None = None,
        heartbeat_interval_ms: int | None = None,
    ) -> HeartbeatResult:
        """`session_timeout_ms`, `heartbeat_interval_ms`: the group's configs of the names
        (share.session.timeout.ms, ...), else the group.share.* settings."""
        def fail(code: int, msg: str | None = None) -> HeartbeatResult:
            return HeartbeatResult(code, msg, member_id=member_id or None, member_epoch=member_epoch)

        if not self.active:
            return fail(ErrorCode.NOT_COORDINATOR)
        if not group_id:
            return fail(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if not member_id:
            return fail(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if member_epoch < LEAVE_EPOCH:
            return fail(ErrorCode.INVALID_REQUEST, f"MemberEpoch is {member_epoch}, but must be greater than or equal to -1.")
        if member_epoch == 0 and not subscribed:
            return fail(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        if group_id in self.groups:
            return fail(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        group = self.share_groups.get(group_id)
        if member_epoch == LEAVE_EPOCH:
            if group is not None and member_id in group.members:
                err = await self._append(self._remove_share_member(group, group.members[member_id]))
                if err:
                    return fail(err)
            return HeartbeatResult(ErrorCode.NONE, member_id=member_id, member_epoch=LEAVE_EPOCH)
        member = group.members.get(member_id) if group is not None else None
        if member_epoch != 0:
            if member is None:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
            if member_epoch != member.member_epoch:
                return fail(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"The share group member has a different epoch ({member.member_epoch}) than the one in the request.",
                )
        if group is None:
            group = self.share_groups[group_id] = ShareGroup(group_id)
        changed = False
        if member is None:
            if len(group.members) >= self.share_config.max_size:
                return fail(ErrorCode.GROUP_MAX_SIZE_REACHED, f"The share group has reached its maximum capacity of {self.share_config.max_size} members.")
            member = group.members[member_id] = ShareMember(member_id, client_id, client_host, rack_id)
            changed = True
        elif member_epoch == 0:
            member.sent_assignment = None  # a rejoin: tell it the assignment again
        described = (member.client_id, member.client_host, member.rack_id)
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if subscribed is not None and sorted(subscribed) != sorted(member.subscribed):
            member.subscribed = sorted(set(subscribed))
            changed = True
        topics = await resolve(group.subscribed_topics())
        if group_id not in self.share_groups or group.members.get(member_id) is not member:
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)  # left or expired while topics were resolved
        records: list[Record] = []
        if changed or described != (member.client_id, member.client_host, member.rack_id):
            records.append(member_record(group, member))
        if changed or topics != group.topics:
            group.topics = topics
            group.group_epoch += 1
            group.assign()
            records.append(group_record(group))
        member.member_epoch = group.group_epoch
        err = await self._append(records)
        if err:
            return fail(err)
        self._schedule_share_session(group, member, session_timeout_ms)
        out = HeartbeatResult(
            ErrorCode.NONE,
            member_id=member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=heartbeat_interval_ms or self.share_config.heartbeat_interval_ms,
        )
        if member.sent_assignment != member.assignment or subscribed is not None:
            out.assignment = {t: list(ps) for t, ps in member.assignment.items()}
            member.sent_assignment = out.assignment
        return out

    def _schedule_share_session(self, group: ShareGroup, member: ShareMember, timeout_ms: int | None = None) -> None:
        member.cancel_timer()
        member.timer = self._clock.call_later(
            (timeout_ms or self.share_config.session_timeout_ms) / 1000, self._on_share_session_expired, group, member
        )

    def _on_share_session_expired(self, group: ShareGroup, member: ShareMember) -> None:
        member.timer = None
        if group.members.get(member.member_id) is member:
            log.info("share group %s: member %s session expired", group.group_id, member.member_id)
            self._spawn(self._append(self._remove_share_member(group, member)))

    def _remove_share_member(self, group: ShareGroup, member: ShareMember) -> list[Record]:
        """Remove the member and reassign; the records saying so."""
        member.cancel_timer()
        del group.members[member.member_id]
        group.group_epoch += 1
        group.assign()
        return [encode_share_member(group.group_id, member.member_id, None), group_record(group)]

    def _restore_share_groups(self, stored: dict[str, StoredShareGroup]) -> None:
        """After a load: the groups and members as stored, at the stored group epoch; the
        assignment is recomputed (a new epoch) at the first heartbeat, which resolves the topics."""
        for gid, sg in stored.items():
            assert sg.metadata is not None
            group = self.share_groups[gid] = ShareGroup(gid, group_epoch=sg.metadata.epoch)
            for mid, mv in sg.members.items():
                m = group.members[mid] = ShareMember(
                    mid, mv.client_id, mv.client_host, mv.rack_id or None,
                    member_epoch=sg.metadata.epoch, subscribed=sorted(mv.subscribed_topic_names),
                )
                self._schedule_share_session(group, m)

    def describe_share_group(self, group_id: str) -> ShareGroupDescription:
        if not self.active:
            return ShareGroupDescription(group_id, ErrorCode.NOT_COORDINATOR)
        group = self.share_groups.get(group_id)
        if group is None:
            if group_id in self.groups:
                return ShareGroupDescription(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
            return ShareGroupDescription(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        return ShareGroupDescription(
            group_id,
            state=group.state.value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            members=[
                ShareMemberDescription(
                    m.member_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
                    list(m.subscribed), {t: list(ps) for t, ps in m.assignment.items()},
                )
                for m in group.members.values()
            ],
        )

    def share_group_names(self, group: ShareGroup) -> dict[str, str]:
        """topic id hex -> name, of the group's subscribed topics."""
        return {tid.hex: name for name, (tid, _) in group.topics.items()}
