"""The consumer group protocol of one shard (KIP-848): ConsumerGroupHeartbeat (join, heartbeat,
leave, static membership), ConsumerGroupDescribe, session and rebalance timeouts, with Kafka 4.4's
GroupMetadataManager rules and error messages. Every change is a list of ConsumerGroup* records:
written to the shard's log first, then applied to memory by the same code that replays them."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import re2

from coordinator.group.assignors import ASSIGNORS, AssignorMember, TopicMeta
from coordinator.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    CRecord,
    MemberState,
    ResolvedRegex,
    frozen,
    preferred_assignor,
    reconcile,
)
from coordinator.group.group import Group, GroupState, JoinResult, SyncResult
from coordinator.group.records import GroupMetadataKey, Record, encode_consumer_record, encode_group_key
from coordinator.group.shard import ShardState
from kafka_wire.errors import ErrorCode
from store.clock import TimerHandle

log = logging.getLogger(__name__)

Frozen = dict[uuid.UUID, frozenset[int]]
CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1  # ConsumerGroupHeartbeat v1 (KIP-1082)


@dataclass
class ConsumerHeartbeat:
    """A ConsumerGroupHeartbeat request, as the coordinator needs it."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: dict[uuid.UUID, set[int]] | None = None  # TopicPartitions (None: not sent)
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1
    # The group's configs consumer.session.timeout.ms / consumer.heartbeat.interval.ms /
    # consumer.assignment.interval.ms (None: the group.consumer.* settings), read by the handler.
    session_timeout_ms: int | None = None
    heartbeat_interval_ms: int | None = None
    assignment_interval_ms: int | None = None  # consumer.assignment.interval.ms


@dataclass
class HeartbeatAnswer:
    error: int = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Frozen | None = None


class Refusal(Exception):
    """A request Kafka refuses: its error code and message."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_COMPILED: dict[str, Any] = {}


def compile_regex(regex: str) -> Any:
    """RE2 syntax, as Kafka's RE2/J; InvalidRegularExpression's message when it does not parse."""
    p = _COMPILED.get(regex)
    if p is None:
        try:
            p = re2.compile(regex)
        except re2.error as e:
            raise Refusal(ErrorCode.INVALID_REGULAR_EXPRESSION,
                          f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}.") from None
        if len(_COMPILED) > 1000:
            _COMPILED.clear()
        _COMPILED[regex] = p
    return p


def new_member_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _metadata_hash(topics: Mapping[str, TopicMeta]) -> int:
    """A 64-bit digest of the subscribed topics (name, id, partition count): a change means a
    rebalance (the role of Kafka's ConsumerGroupMetadataValue.MetadataHash)."""
    if not topics:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(topics):
        t = topics[name]
        h.update(f"{name}\0{t.topic_id.hex}\0{t.partitions}\n".encode())
    return int.from_bytes(h.digest(), "big", signed=True)


class ConsumerGroupOps(ShardState):
    """ConsumerGroupHeartbeat and ConsumerGroupDescribe over the shard's groups (a group speaking
    the consumer protocol is a Group whose `consumer` is set)."""

    _consumer_timers: dict[tuple[str, str, str], TimerHandle]
    _group_locks: dict[str, asyncio.Lock]
    _regex_version: int
    _session_ms: dict[str, int]  # groups with their own consumer.session.timeout.ms
    _assignment_interval_ms: dict[str, int]  # groups with their own consumer.assignment.interval.ms

    async def load(self) -> None:
        self._consumer_timers = {}
        self._group_locks = {}
        self._session_ms = {}
        self._assignment_interval_ms = {}
        self._regex_version = 0
        await super().load()
        for group in self.groups.values():
            if group.consumer is not None:
                for m in group.consumer.members.values():
                    self._schedule_session(group.group_id, m.member_id, m)

    def unload(self) -> None:
        for h in getattr(self, "_consumer_timers", {}).values():
            h.cancel()
        self._consumer_timers = {}
        super().unload()

    # ---- ConsumerGroupHeartbeat -------------------------------------------------------------

    async def consumer_heartbeat(self, hb: ConsumerHeartbeat) -> HeartbeatAnswer:
        if not self.active:
            return HeartbeatAnswer(ErrorCode.NOT_COORDINATOR)
        if hb.group_id in self.share_groups:
            return HeartbeatAnswer(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {hb.group_id} is not a consumer group.")
        try:
            self._validate(hb)
            if hb.session_timeout_ms is None:
                self._session_ms.pop(hb.group_id, None)
            else:
                self._session_ms[hb.group_id] = hb.session_timeout_ms
            if hb.assignment_interval_ms is None:
                self._assignment_interval_ms.pop(hb.group_id, None)
            else:
                self._assignment_interval_ms[hb.group_id] = hb.assignment_interval_ms
            async with self._lock(hb.group_id):
                if not self.active:
                    return HeartbeatAnswer(ErrorCode.NOT_COORDINATOR)
                if hb.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                    return await self._leave(hb)
                return await self._heartbeat(hb)
        except Refusal as r:
            return HeartbeatAnswer(r.code, r.message)

    def _now_ms(self) -> int:
        return int(self._clock.time() * 1000)  # the shard's clock: timers and intervals agree

    def _lock(self, group_id: str) -> asyncio.Lock:
        lock = self._group_locks.get(group_id)
        if lock is None:
            lock = self._group_locks[group_id] = asyncio.Lock()
        return lock

    def _validate(self, hb: ConsumerHeartbeat) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        assignors = self.config.consumer_assignors.split(",")

        def bad(msg: str) -> Refusal:
            return Refusal(ErrorCode.INVALID_REQUEST, msg)

        if (hb.api_version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION or hb.member_epoch > 0
                or hb.member_epoch == LEAVE_GROUP_MEMBER_EPOCH) and hb.member_id == "":
            raise bad("MemberId can't be empty.")
        if hb.group_id == "":
            raise bad("GroupId can't be empty.")
        if hb.instance_id == "":
            raise bad("InstanceId can't be empty.")
        if hb.rack_id == "":
            raise bad("RackId can't be empty.")
        if hb.member_epoch == 0:
            if hb.rebalance_timeout_ms == -1:
                raise bad("RebalanceTimeoutMs must be provided in first request.")
            if hb.owned is None or hb.owned:
                raise bad("TopicPartitions must be empty when (re-)joining.")
            if hb.subscribed_topic_names is None and hb.subscribed_topic_regex is None:
                raise bad("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
        elif hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if hb.instance_id is None:
                raise bad("InstanceId can't be null.")
        elif hb.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise bad("MemberEpoch is invalid.")
        if hb.server_assignor is not None and hb.server_assignor not in assignors:
            raise Refusal(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {hb.server_assignor} is not supported. "
                          f"Supported assignors: {', '.join(assignors)}.")

    def consumer_group(self, group_id: str) -> ConsumerGroup:
        """Kafka's consumerGroup(groupId): GROUP_ID_NOT_FOUND unless it is a consumer group."""
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            raise Refusal(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if group.consumer is None:
            raise Refusal(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        return group.consumer

    async def _heartbeat(self, hb: ConsumerHeartbeat) -> HeartbeatAnswer:
        gid, cfg = hb.group_id, self.config
        group = self.groups.get(gid)
        pre: list[Record] = []  # classic records replaced by the new consumer group
        cg = group.consumer if group is not None else None
        conversion: list[CRecord] = []
        if cg is None:
            if hb.member_epoch != 0:
                if group is None:
                    raise Refusal(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {gid} not found.")
                raise Refusal(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
            if group is not None and (group.members or group.pending_members or not group.is_(GroupState.EMPTY)):
                # Kafka's online upgrade: the classic group and its members become a consumer group.
                conversion = self._upgrade_records(group)
            if group is not None and group.generation_id > 0:
                # The classic group's metadata goes (maybeDeleteEmptyClassicGroup when it is
                # empty); its offsets stay.
                pre.append((encode_group_key(GroupMetadataKey(group=gid)), None))
            cg = ConsumerGroup(gid)
            # Kafka 4.3+'s ModernGroup starts at group and target epoch 1.
            cg.group_epoch = cg.assignment_epoch = 1
            for k, v in conversion:
                cg.apply(k, v)
        mid = hb.member_id or new_member_id()
        if len(cg.members) >= cfg.consumer_max_size and (not hb.member_id or hb.member_id not in cg.members):
            raise Refusal(ErrorCode.GROUP_MAX_SIZE_REACHED,
                          f"The consumer group has reached its maximum capacity of {cfg.consumer_max_size} members.")
        joining = hb.member_epoch == 0
        replaced: ConsumerMember | None = None
        if hb.instance_id is None:
            member = cg.members.get(mid)
            if member is None:
                if not joining:
                    raise Refusal(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
                member = ConsumerMember(mid)
            self._check_epoch(member, hb)
        else:
            existing = cg.static_member(hb.instance_id)
            if joining:
                if existing is None:
                    member = cg.members.get(mid) or ConsumerMember(mid)
                    self._check_epoch(member, hb)
                else:
                    if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                        raise Refusal(ErrorCode.UNRELEASED_INSTANCE_ID,
                                      f"Static member {mid} with instance id {hb.instance_id} cannot join the group "
                                      f"because the instance id is owned by {existing.member_id} member.")
                    member = replace(existing, member_id=mid, member_epoch=0, previous_member_epoch=0)
                    replaced = existing
            else:
                if existing is None:
                    raise Refusal(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {hb.instance_id} is unknown.")
                if existing.member_id != mid:
                    raise Refusal(ErrorCode.FENCED_INSTANCE_ID,
                                  f"Static member {mid} with instance id {hb.instance_id} was fenced by member "
                                  f"{existing.member_id}.")
                self._check_epoch(existing, hb)
                member = existing

        updated = replace(
            member,
            instance_id=hb.instance_id if hb.instance_id is not None else member.instance_id,
            rack_id=hb.rack_id if hb.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=hb.rebalance_timeout_ms if hb.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
            server_assignor=hb.server_assignor if hb.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=(tuple(sorted(set(hb.subscribed_topic_names)))
                                    if hb.subscribed_topic_names is not None else member.subscribed_topic_names),
            subscribed_topic_regex=(hb.subscribed_topic_regex if hb.subscribed_topic_regex is not None
                                    else member.subscribed_topic_regex),
            client_id=hb.client_id,
            client_host=hb.client_host,
        )
        reconciled = await self._update_member(gid, cg, member, updated, replaced, hb.owned, pre, conversion)
        full = joining or (hb.rebalance_timeout_ms != -1 and hb.subscribed_topic_names is not None
                           and hb.owned is not None)
        return HeartbeatAnswer(
            member_id=mid,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=hb.heartbeat_interval_ms or cfg.consumer_heartbeat_interval_ms,
            assignment=dict(reconciled.assigned) if full or reconciled.assigned != member.assigned else None,
        )

    async def _update_member(
        self, gid: str, cg: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember,
        replaced: ConsumerMember | None, owned: dict[uuid.UUID, set[int]] | None, pre: list[Record],
        conversion: list[CRecord] | None = None,
    ) -> ConsumerMember:
        """Steps 1-3 of Kafka's consumerGroupHeartbeat for a member, whichever protocol it speaks:
        its new metadata (the group epoch moves when its subscription does), the target
        assignment if the epoch moved, its reconciliation; written, then applied. Returns the
        member as reconciled; Refusal if the write fails."""
        mid = updated.member_id
        records: list[CRecord] = []
        targets: dict[str, Frozen] = dict(cg.targets)
        members = dict(cg.members)
        if replaced is not None:
            # Kafka's replaceMember: the new incarnation takes the old one's assignments.
            records += cg.member_tombstones(replaced.member_id)
            records += [cg.member_record(member), cg.target_record(mid, cg.targets.get(replaced.member_id, {})),
                        cg.current_record(member)]
            targets[mid] = targets.pop(replaced.member_id, {})
            del members[replaced.member_id]
        bump = False
        if (mid not in cg.members and replaced is None) or not updated.metadata_equal(member):
            records.append(cg.member_record(updated))
            if updated.subscribed_topic_names != member.subscribed_topic_names:
                bump = True
        if updated.subscribed_topic_regex != member.subscribed_topic_regex and updated.subscribed_topic_regex:
            compile_regex(updated.subscribed_topic_regex)
        members[mid] = updated

        image = self.topics_view()
        regexes, regex_records = self._resolve_regexes(cg, members, image)
        records += regex_records
        if any(r[1] is not None for r in regex_records):
            bump = True
        effective = {m.member_id: cg.member_topics(m, regexes) & image.keys() for m in members.values()}
        if effective[mid] != cg.member_topics(member) & image.keys():
            bump = True
        subscribed = {n: image[n] for topics in effective.values() for n in topics}
        mhash = _metadata_hash(subscribed)
        epoch = cg.group_epoch
        if bump or mhash != cg.metadata_hash:
            epoch += 1
            records.append(cg.epoch_record(epoch, mhash))

        target_epoch = cg.assignment_epoch
        if epoch > cg.assignment_epoch:
            wait = cg.assignment_timestamp + self._assignment_interval(gid) - self._now_ms()
            if wait <= 0:
                records += self._assign(cg, members, effective, subscribed, targets, epoch)
                target_epoch = epoch
            else:
                # Kafka 4.3+: one target assignment per group.consumer.assignment.interval.ms;
                # the group is Assigning until then.
                self._schedule(gid, "", "assign", wait, None)
        target = targets.get(mid, {})

        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            held = {k: v for k, v in cg.partition_epochs().items()}
            if replaced is not None:
                for t, parts in (*replaced.assigned.items(), *replaced.pending_revocation.items()):
                    for p in parts:
                        held.pop((t, p), None)
            reconciled = reconcile(updated, target_epoch, target, {image[n].topic_id for n in effective[mid]},
                                   held, owned)
            if not reconciled.assignment_equal(updated) or (mid not in cg.members and replaced is None):
                records.append(cg.current_record(reconciled))

        err = await self._write(gid, (conversion or []) + records, pre)
        if err:
            raise Refusal(err)
        if conversion:
            for m in cg.members.values():  # the converted classic members' sessions
                if m.member_id != mid:
                    self._schedule_session(gid, m.member_id, m)
        self._schedule_session(gid, mid, reconciled)
        if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
            if reconciled.state is not member.state or reconciled.member_epoch != member.member_epoch:
                self._schedule_rebalance(gid, mid, reconciled.member_epoch, reconciled.rebalance_timeout_ms)
        else:
            self._cancel(gid, mid, "rebalance")
        if replaced is not None:
            self._cancel(gid, replaced.member_id, "session")
            self._cancel(gid, replaced.member_id, "rebalance")
        return reconciled

    @staticmethod
    def _check_epoch(member: ConsumerMember, hb: ConsumerHeartbeat) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid."""
        got, have = hb.member_epoch, member.member_epoch
        if got > have:
            raise Refusal(ErrorCode.FENCED_MEMBER_EPOCH,
                          f"The consumer group member has a greater member epoch ({got}) than the one known by the "
                          f"group coordinator ({have}). The member must abandon all its partitions and rejoin.")
        if got < have:
            owned = hb.owned
            subset = owned is not None and all(
                t in member.assigned and parts <= member.assigned[t] for t, parts in owned.items())
            if got != member.previous_member_epoch or not subset:
                raise Refusal(ErrorCode.FENCED_MEMBER_EPOCH,
                              f"The consumer group member has a smaller member epoch ({got}) than the one known by "
                              f"the group coordinator ({have}). The member must abandon all its partitions and rejoin.")

    def _assign(
        self, cg: ConsumerGroup, members: Mapping[str, ConsumerMember], effective: Mapping[str, set[str]],
        subscribed: Mapping[str, TopicMeta], targets: dict[str, Frozen], epoch: int,
    ) -> list[CRecord]:
        """Kafka's updateTargetAssignment: the preferred server assignor's new target for every
        member (`targets` updated in place), records for the members whose target changed."""
        assignor = ASSIGNORS[preferred_assignor(members.values()) or self.config.consumer_assignors.split(",")[0]]
        new = assignor(
            [AssignorMember(m.member_id, m.instance_id, frozenset(effective[m.member_id])) for m in members.values()],
            subscribed,
            {k: {t: set(p) for t, p in v.items()} for k, v in targets.items()},
        )
        records: list[CRecord] = []
        for tmid, a in new.items():
            fa = frozen(a)
            if fa != targets.get(tmid) or tmid not in cg.targets:
                records.append(cg.target_record(tmid, fa))
            targets[tmid] = fa
        records.append(cg.target_epoch_record(epoch, self._now_ms()))
        return records

    def _assignment_interval(self, gid: str) -> int:
        """The group's consumer.assignment.interval.ms, else group.consumer.assignment.interval.ms."""
        return self._assignment_interval_ms.get(gid, self.config.consumer_assignment_interval_ms)

    async def _assign_later(self, gid: str) -> None:
        """The deferred target assignment of a group whose epoch moved within the interval."""
        group = self.groups.get(gid)
        cg = group.consumer if group is not None else None
        if cg is None or cg.group_epoch <= cg.assignment_epoch:
            return
        image = self.topics_view()
        effective = {m.member_id: cg.member_topics(m) & image.keys() for m in cg.members.values()}
        subscribed = {n: image[n] for topics in effective.values() for n in topics}
        records = self._assign(cg, cg.members, effective, subscribed, dict(cg.targets), cg.group_epoch)
        if await self._write(gid, records):
            self._schedule(gid, "", "assign", 1000, None)  # the write failed: try again

    def _drop_classic_state(self, group: Group) -> None:
        """The group stops speaking the classic protocol: its classic members' waiting requests
        are told to rejoin and its classic state is reset (offsets stay)."""
        self._cancel_group_timers(group)
        for m in group.members.values():
            m.cancel_heartbeat()
            m.complete_join(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=m.member_id))
            m.complete_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        group.members.clear()
        group.static_members.clear()
        group.pending_members.clear()
        group.pending_sync.clear()
        group.state = group.previous_state = GroupState.EMPTY
        group.generation_id, group.protocol_type, group.protocol_name, group.leader_id = 0, None, None, None

    def _upgrade_records(self, group: Group) -> list[CRecord]:
        """The online upgrade of a classic group (Kafka's convertToConsumerGroup); the classic
        members half (consumer_classic.py) builds it. Refused here."""
        raise Refusal(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group.group_id} is not a consumer group.")

    def _resolve_regexes(
        self, cg: ConsumerGroup, members: Mapping[str, ConsumerMember], image: Mapping[str, TopicMeta]
    ) -> tuple[dict[str, ResolvedRegex], list[CRecord]]:
        """The group's regular expressions resolved against the current topics; records for
        those whose match changed, tombstones for those no member uses any more."""
        wanted = {m.subscribed_topic_regex for m in members.values() if m.subscribed_topic_regex}
        out: dict[str, ResolvedRegex] = {}
        records: list[CRecord] = []
        for regex in sorted(wanted):
            pattern = compile_regex(regex)
            topics = frozenset(n for n in image if pattern.fullmatch(n))
            old = cg.regexes.get(regex)
            if old is not None and old.topics == topics:
                out[regex] = old
                continue
            self._regex_version += 1
            out[regex] = ResolvedRegex(topics, self._regex_version, self._now_ms())
            records.append(cg.regex_record(regex, out[regex]))
        for regex in cg.regexes:
            if regex not in wanted:
                records.append(cg.regex_record(regex, None))
        return out, records

    async def _write(self, gid: str, records: list[CRecord], pre: list[Record] | None = None) -> int:
        """Append the records, then apply them (installing the group on its first record)."""
        encoded = list(pre or []) + [encode_consumer_record(k, v) for k, v in records]
        err = await self._append(encoded)
        if err:
            return err
        group = self.groups.get(gid)
        if group is None:
            group = self.groups[gid] = Group(gid)
        if group.consumer is None:
            self._drop_classic_state(group)
            group.consumer = ConsumerGroup(gid)
        for k, v in records:
            group.consumer.apply(k, v)
        return ErrorCode.NONE

    # ---- leaving and fencing ----------------------------------------------------------------

    async def _leave(self, hb: ConsumerHeartbeat) -> HeartbeatAnswer:
        """Kafka's consumerGroupLeave."""
        gid, mid = hb.group_id, hb.member_id
        cg = self.consumer_group(gid)
        if hb.instance_id is None:
            member = cg.members.get(mid)
            if member is None:
                raise Refusal(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
        else:
            member = cg.static_member(hb.instance_id)
            if member is None:
                raise Refusal(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {hb.instance_id} is unknown.")
            if member.member_id != mid:
                raise Refusal(ErrorCode.FENCED_INSTANCE_ID,
                              f"Static member {mid} with instance id {hb.instance_id} was fenced by member "
                              f"{member.member_id}.")
            if hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # A static member leaving for a while keeps its assignment until its session ends.
                leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
                err = await self._write(gid, [cg.current_record(leaving)])
                if err:
                    raise Refusal(err)
                return HeartbeatAnswer(member_id=member.member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        log.info("group %s: member %s left the consumer group", gid, mid)
        err = await self._fence(cg, member)
        if err:
            raise Refusal(err)
        return HeartbeatAnswer(member_id=mid, member_epoch=hb.member_epoch)

    async def _fence(self, cg: ConsumerGroup, member: ConsumerMember) -> int:
        """Kafka's consumerGroupFenceMember: the member's records go and the group epoch moves
        (or the group goes back to the classic protocol, see _maybe_downgrade)."""
        down = await self._maybe_downgrade(cg, member)
        if down is not None:
            return down
        records = cg.member_tombstones(member.member_id)
        rest = {k: v for k, v in cg.members.items() if k != member.member_id}
        rx = member.subscribed_topic_regex
        if rx and not any(m.subscribed_topic_regex == rx for m in rest.values()) and rx in cg.regexes:
            records.append(cg.regex_record(rx, None))
        image = self.topics_view()
        subscribed = {n: image[n] for m in rest.values() for n in cg.member_topics(m)
                      if n in image}
        epoch = cg.group_epoch + 1
        records.append(cg.epoch_record(epoch, _metadata_hash(subscribed)))
        wait = cg.assignment_timestamp + self._assignment_interval(cg.group_id) - self._now_ms()
        if wait <= 0:
            # The remaining members' new target right away (Kafka computes it on the epoch bump).
            effective = {m.member_id: cg.member_topics(m) & image.keys() for m in rest.values()}
            targets = {k: v for k, v in cg.targets.items() if k != member.member_id}
            records += self._assign(cg, rest, effective, subscribed, targets, epoch)
        else:
            self._schedule(cg.group_id, "", "assign", wait, None)
        err = await self._write(cg.group_id, records)
        if not err:
            for kind in ("session", "rebalance", "join", "sync"):
                self._cancel(cg.group_id, member.member_id, kind)
        return err

    async def _maybe_downgrade(self, cg: ConsumerGroup, leaving: ConsumerMember) -> int | None:
        """The downgrade to a classic group (consumer_classic.py); None: none."""
        return None

    def _schedule_session(self, gid: str, mid: str, member: ConsumerMember | None = None) -> None:
        ms = self._session_ms.get(gid, self.config.consumer_session_timeout_ms)
        if member is not None and member.classic is not None:
            ms = member.classic.session_timeout_ms  # a classic member keeps its own session timeout
        self._schedule(gid, mid, "session", ms, None)

    def _schedule_rebalance(self, gid: str, mid: str, epoch: int, timeout_ms: int) -> None:
        self._schedule(gid, mid, "rebalance", max(timeout_ms, 0), epoch)

    def _schedule(self, gid: str, mid: str, kind: str, ms: int, epoch: int | None) -> None:
        self._cancel(gid, mid, kind)
        self._consumer_timers[(gid, mid, kind)] = self._clock.call_later(
            ms / 1000, self._on_expired, gid, mid, kind, epoch)

    def _cancel(self, gid: str, mid: str, kind: str) -> None:
        h = self._consumer_timers.pop((gid, mid, kind), None)
        if h is not None:
            h.cancel()

    def _on_expired(self, gid: str, mid: str, kind: str, epoch: int | None) -> None:
        self._consumer_timers.pop((gid, mid, kind), None)
        self._spawn(self._expire(gid, mid, kind, epoch))

    async def _expire(self, gid: str, mid: str, kind: str, epoch: int | None) -> None:
        async with self._lock(gid):
            if kind == "assign":
                if self.active:
                    await self._assign_later(gid)
                return
            group = self.groups.get(gid)
            cg = group.consumer if group is not None else None
            member = cg.members.get(mid) if cg is not None else None
            if not self.active or cg is None or member is None:
                return
            if kind == "rebalance" and (member.state is not MemberState.UNREVOKED_PARTITIONS
                                        or member.member_epoch != epoch):
                return
            reason = {"session": "the member session expired", "rebalance": "the member failed to revoke partitions",
                      "join": "the classic member did not rejoin in time",
                      "sync": "the classic member did not sync in time"}[kind]
            log.info("group %s: member %s fenced because %s", gid, mid, reason)
            if await self._fence(cg, member):
                self._schedule(gid, mid, kind, 1000, epoch)  # the write failed: try again

    # ---- ConsumerGroupDescribe ----------------------------------------------------------------

    def describe_consumer_group(self, group_id: str) -> ConsumerGroup:
        """The group to describe; Refusal (GROUP_ID_NOT_FOUND, NOT_COORDINATOR) otherwise."""
        if not self.active:
            raise Refusal(ErrorCode.NOT_COORDINATOR)
        return self.consumer_group(group_id)

    def assignor_name(self, cg: ConsumerGroup) -> str:
        return preferred_assignor(cg.members.values()) or self.config.consumer_assignors.split(",")[0]

