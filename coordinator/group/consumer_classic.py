"""Classic-protocol members in a consumer-protocol group, and the conversions between the two
kinds of group, as Kafka 4.4's GroupMetadataManager does with its default migration policy
(`bidirectional`): a classic member's JoinGroup/SyncGroup/Heartbeat/LeaveGroup against a
consumer group (the server assigns; the member learns of a new epoch from REBALANCE_IN_PROGRESS
and rejoins), the online upgrade of a classic group when a consumer-protocol member joins it, and
the downgrade back to a classic group when the last consumer-protocol member leaves."""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace

from coordinator.group.assignors import TopicMeta
from coordinator.group.consumer import ConsumerGroupOps, Refusal, _metadata_hash, new_member_id
from coordinator.group.consumer_group import (
    ClassicMeta,
    ConsumerGroup,
    ConsumerMember,
    CRecord,
    MemberState,
)
from coordinator.group.group import Group, GroupState, JoinResult, Member, SyncResult
from coordinator.group.records import encode_consumer_record
from kafka_wire.api import decode_versioned, encode_versioned, schema_class
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.consumer_protocol_assignment import ConsumerProtocolAssignment

log = logging.getLogger("coordinator.group.consumer")

PROTOCOL_TYPE = "consumer"
_ASSIGNMENT_MAX_VERSION = 3


def _subscription(metadata: bytes) -> tuple[int, list[str], dict[str, list[int]], str | None]:
    """(version, topics, owned partitions by topic, rack) of a ConsumerProtocolSubscription."""
    version, sub = decode_versioned(schema_class("ConsumerProtocolSubscription"), metadata)
    owned = {tp.topic: list(tp.partitions) for tp in getattr(sub, "owned_partitions", None) or []}
    return version, list(getattr(sub, "topics", [])), owned, getattr(sub, "rack_id", None)


def _assignment_blob(a: dict[uuid.UUID, frozenset[int]], names: dict[uuid.UUID, str], version: int) -> bytes:
    cls = ConsumerProtocolAssignment
    tps = [cls.TopicPartition(topic=names[t], partitions=sorted(p))
           for t, p in sorted(a.items(), key=lambda kv: names.get(kv[0], "")) if t in names]
    return encode_versioned(cls(assigned_partitions=tps), min(max(version, 0), _ASSIGNMENT_MAX_VERSION))


def _assigned(blob: bytes, image: dict[str, TopicMeta]) -> dict[uuid.UUID, frozenset[int]]:
    if not blob:
        return {}
    try:
        _, a = decode_versioned(ConsumerProtocolAssignment, blob)
    except Exception:
        return {}
    out: dict[uuid.UUID, frozenset[int]] = {}
    for tp in getattr(a, "assigned_partitions", []):
        meta = image.get(tp.topic)
        if meta is not None and tp.partitions:
            out[meta.topic_id] = frozenset(tp.partitions)
    return out


class ClassicInConsumerOps(ConsumerGroupOps):
    # The classic state machine (coordinator/group/rebalance.py) comes with GroupCoordinator.
    def _prepare_rebalance(self, group: Group) -> None:
        raise NotImplementedError

    def _image(self) -> dict[str, TopicMeta]:
        return dict(self.topics_view())

    def _names(self) -> dict[uuid.UUID, str]:
        return {t.topic_id: n for n, t in self.topics_view().items()}

    # ---- the online upgrade ---------------------------------------------------------------------

    def _upgrade_records(self, group: Group) -> list[CRecord]:
        """Kafka's convertToConsumerGroup: each classic member becomes a consumer-group member at
        the group's generation, keeping its assignment as its current and target assignment."""
        gid = group.group_id
        if not self.config.migration_allows("upgrade"):
            raise Refusal(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
        if group.protocol_type != PROTOCOL_TYPE or not group.protocol_name:
            # Kafka's validateOnlineUpgrade: only groups of the consumer embedded protocol.
            raise Refusal(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
        if len(group.members) >= self.config.consumer_max_size:
            raise Refusal(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
        image, gen = self._image(), group.generation_id
        cg = ConsumerGroup(gid)
        records: list[CRecord] = []
        subscribed: dict[str, TopicMeta] = {}
        for m in group.members.values():
            try:
                _, topics, _, rack = _subscription(m.metadata(group.protocol_name))
            except Exception:
                raise Refusal(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.") from None
            assigned = _assigned(m.assignment, image)
            cm = ConsumerMember(
                m.member_id, m.group_instance_id, rack or None, m.client_id, m.client_host,
                tuple(sorted(set(topics))), None, m.rebalance_timeout_ms, None,
                member_epoch=gen, previous_member_epoch=gen, state=MemberState.STABLE, assigned=assigned,
                classic=ClassicMeta(m.session_timeout_ms, tuple(m.protocols)),
            )
            records += [cg.member_record(cm), cg.target_record(cm.member_id, assigned), cg.current_record(cm)]
            subscribed.update({n: image[n] for n in topics if n in image})
        records.append(cg.epoch_record(gen, _metadata_hash(subscribed)))
        records.append(cg.target_epoch_record(gen, self._now_ms()))
        log.info("group %s: upgraded from the classic to the consumer protocol at generation %d", gid, gen)
        return records

    # ---- classic members in a consumer group ---------------------------------------------------

    async def classic_join_consumer(
        self, group: Group, member_id: str, instance_id: str | None, client_id: str, client_host: str,
        session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], require_known_member_id: bool,
    ) -> JoinResult | None:
        """Kafka's classicGroupJoinToConsumerGroup; None when the group is no consumer group
        any more (the caller goes the classic way)."""
        gid = group.group_id
        async with self._lock(gid):
            cg = group.consumer
            if cg is None or not self.active:
                return None if self.active else JoinResult(ErrorCode.NOT_COORDINATOR, member_id=member_id)
            unknown = member_id == ""
            mid = member_id or new_member_id()
            if len(cg.members) >= self.config.consumer_max_size and (unknown or mid not in cg.members):
                return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=member_id)
            names = {n for n, _ in protocols}
            others = [m.classic for k, m in cg.members.items() if m.classic is not None and k != mid]
            if protocol_type != PROTOCOL_TYPE or not protocols or any(
                    not names & {n for n, _ in o.protocols} for o in others):
                return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
            if require_known_member_id and unknown and instance_id is None:
                return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=mid)
            replaced: ConsumerMember | None = None
            if instance_id is None:
                member = cg.members.get(mid) or ConsumerMember(mid)
            else:
                existing = cg.static_member(instance_id)
                if existing is None:
                    member = cg.members.get(mid) or ConsumerMember(mid)
                elif unknown:
                    member = replace(existing, member_id=mid, member_epoch=0, previous_member_epoch=0)
                    replaced = existing
                elif existing.member_id != mid:
                    return JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=member_id)
                else:
                    member = existing
            try:
                _, topics, owned_by_name, rack = _subscription(protocols[0][1])
            except Exception:
                return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
            image = self._image()
            owned = {image[t].topic_id: set(p) for t, p in owned_by_name.items() if t in image}
            updated = replace(
                member, instance_id=instance_id if instance_id is not None else member.instance_id,
                rack_id=rack or member.rack_id, rebalance_timeout_ms=rebalance_timeout_ms, server_assignor=None,
                subscribed_topic_names=tuple(sorted(set(topics))), client_id=client_id, client_host=client_host,
                classic=ClassicMeta(session_timeout_ms, tuple(protocols)),
            )
            try:
                reconciled = await self._update_member(gid, cg, member, updated, replaced, owned, [])
            except Refusal as r:
                return JoinResult(r.code, member_id=member_id)
            self._cancel(gid, mid, "join")
            self._schedule(gid, mid, "sync", max(rebalance_timeout_ms, 0), None)
            assert reconciled.classic is not None
            return JoinResult(ErrorCode.NONE, member_id=mid, generation_id=reconciled.member_epoch,
                              protocol_type=PROTOCOL_TYPE, protocol_name=reconciled.classic.protocols[0][0])

    def _classic_member(self, cg: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        if instance_id is not None:
            existing = cg.static_member(instance_id)
            if existing is None:
                raise Refusal(ErrorCode.UNKNOWN_MEMBER_ID)
            if existing.member_id != member_id:
                raise Refusal(ErrorCode.FENCED_INSTANCE_ID)
        member = cg.members.get(member_id)
        if member is None or member.classic is None:
            raise Refusal(ErrorCode.UNKNOWN_MEMBER_ID)
        return member

    def _rebalance_in_progress(self, cg: ConsumerGroup, member: ConsumerMember) -> bool:
        """Kafka's throwIfRebalanceInProgress: a newer group epoch calls the member to rejoin
        (unless it is still revoking), within its rebalance timeout."""
        if cg.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            if (cg.group_id, member.member_id, "join") not in self._consumer_timers:
                self._schedule(cg.group_id, member.member_id, "join", max(member.rebalance_timeout_ms, 0), None)
            return True
        return False

    def classic_sync_consumer(
        self, group: Group, generation_id: int, member_id: str, instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None,
    ) -> SyncResult:
        """Kafka's classicGroupSyncToConsumerGroup: the member's current assignment."""
        cg = group.consumer
        assert cg is not None
        try:
            member = self._classic_member(cg, member_id, instance_id)
        except Refusal as r:
            return SyncResult(r.code)
        assert member.classic is not None
        name = member.classic.protocols[0][0]
        if generation_id != member.member_epoch:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != PROTOCOL_TYPE) or (
                protocol_name is not None and protocol_name != name):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if self._rebalance_in_progress(cg, member):
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        self._cancel(group.group_id, member_id, "sync")
        self._schedule_session(group.group_id, member_id, member)
        version = 0
        try:
            version = _subscription(member.classic.protocols[0][1])[0]
        except Exception:
            pass
        return SyncResult(ErrorCode.NONE, PROTOCOL_TYPE, name, _assignment_blob(member.assigned, self._names(), version))

    def classic_heartbeat_consumer(self, group: Group, generation_id: int, member_id: str,
                                   instance_id: str | None) -> int:
        """Kafka's classicGroupHeartbeatToConsumerGroup."""
        cg = group.consumer
        assert cg is not None
        try:
            member = self._classic_member(cg, member_id, instance_id)
        except Refusal as r:
            return r.code
        if generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self._schedule_session(group.group_id, member_id, member)
        return ErrorCode.REBALANCE_IN_PROGRESS if self._rebalance_in_progress(cg, member) else ErrorCode.NONE

    async def classic_leave_consumer(self, group: Group, members: list[tuple[str, str | None]]) -> list[int]:
        """Kafka's classicGroupLeaveToConsumerGroup: each leaving member is fenced."""
        out: list[int] = []
        async with self._lock(group.group_id):
            for member_id, instance_id in members:
                cg = group.consumer
                if cg is None:
                    out.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                m = cg.static_member(instance_id) if not member_id else cg.members.get(member_id)
                if m is None or (instance_id is not None and m.instance_id != instance_id):
                    out.append(ErrorCode.FENCED_INSTANCE_ID if m is None and instance_id is not None
                               and cg.static_member(instance_id) is not None else ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                out.append(await self._fence(cg, m))
        return out

    # ---- the downgrade -----------------------------------------------------------------------------

    async def _maybe_downgrade(self, cg: ConsumerGroup, leaving: ConsumerMember) -> int | None:
        """Kafka's validateOnlineDowngradeWithFencedMember and convertToClassicGroup: when the
        member leaving is the last one of the consumer protocol and classic members remain, the
        group becomes a classic group at its epoch and rebalances. None: no downgrade."""
        rest = [m for k, m in cg.members.items() if k != leaving.member_id]
        if not rest or any(m.classic is None for m in rest) or not self.config.migration_allows("downgrade"):
            return None
        group = self.groups.get(cg.group_id)
        if group is None:
            return None
        common = [n for n, _ in rest[0].classic.protocols if all(  # type: ignore[union-attr]
            n in {p for p, _ in m.classic.protocols} for m in rest)]  # type: ignore[union-attr]
        if not common:
            return None
        names = self._names()
        group.generation_id, group.protocol_type, group.protocol_name = cg.group_epoch, PROTOCOL_TYPE, common[0]
        assignment: dict[str, bytes] = {}
        for m in rest:
            assert m.classic is not None
            member = Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                            m.classic.session_timeout_ms, PROTOCOL_TYPE, list(m.classic.protocols))
            version = 0
            try:
                version = _subscription(dict(m.classic.protocols).get(common[0], b""))[0]
            except Exception:
                pass
            member.assignment = assignment[m.member_id] = _assignment_blob(m.assigned, names, version)
            group.add(member)
        records = [encode_consumer_record(k, v) for k, v in cg.group_tombstones()]
        records.append(self.group_record(group, assignment))
        err = await self._append(records)
        if err:
            for m in rest:
                group.remove(m.member_id)
            group.generation_id, group.protocol_type, group.protocol_name, group.leader_id = 0, None, None, None
            return err
        for m in cg.members.values():
            for kind in ("session", "rebalance", "join", "sync"):
                self._cancel(cg.group_id, m.member_id, kind)
        group.consumer = None
        group.state, group.previous_state = GroupState.STABLE, GroupState.COMPLETING_REBALANCE
        for member in group.members.values():
            self._schedule_heartbeat(group, member)
        log.info("group %s: downgraded from the consumer to the classic protocol at generation %d",
                 group.group_id, group.generation_id)
        self._prepare_rebalance(group)
        return ErrorCode.NONE
