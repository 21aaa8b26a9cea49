"""The classic group membership protocol of one shard: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup with Kafka's state machine (GroupCoordinator.scala / ClassicGroup): delayed initial
rebalance, rebalance and session timeouts, MEMBER_ID_REQUIRED, static membership, protocol
selection, pending-sync expiry."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass

from coordinator.group.consumer_classic import ClassicInConsumerOps
from coordinator.group.group import Group, GroupState, JoinResult, Member, SyncResult
from coordinator.group.rebalance import RebalanceOps
from coordinator.group.records import encode_consumer_record
from coordinator.share.membership import ShareGroupOps
from kafka_wire.errors import ErrorCode

log = logging.getLogger(__name__)


@dataclass
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool = False  # JoinGroup v4+
    supports_skip_assignment: bool = True  # JoinGroup v9+ (KIP-814)


class GroupCoordinator(RebalanceOps, ClassicInConsumerOps, ShareGroupOps):
    """One shard's coordinator. Build it, `await load()`, serve, `unload()` when ownership goes."""

    # Static members replaced while Stable whose JoinGroup version can skip the assignment.
    _skip_ok: dict[str, bool]

    async def load(self) -> None:
        self._skip_ok = {}
        await super().load()

    # ---- JoinGroup -----------------------------------------------------------------------

    async def join(self, req: JoinRequest) -> JoinResult:
        if not self.active:
            return JoinResult(ErrorCode.NOT_COORDINATOR, member_id=req.member_id)
        if not req.group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, member_id=req.member_id)
        if req.group_id in self.share_groups:
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id)
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=req.member_id)
        if req.rebalance_timeout_ms < 0:  # JoinGroup v0 has none: Kafka uses the session timeout
            req.rebalance_timeout_ms = req.session_timeout_ms
        unknown = req.member_id == ""
        group = self.groups.get(req.group_id)
        if group is not None and group.consumer is not None:
            if group.consumer.members:
                # A classic member joins a consumer-protocol group (Kafka 4.4's mixed groups).
                res = await self.classic_join_consumer(
                    group, req.member_id, req.group_instance_id, req.client_id, req.client_host,
                    req.session_timeout_ms, req.rebalance_timeout_ms, req.protocol_type, list(req.protocols),
                    req.require_known_member_id)
                if res is not None:
                    return res
            err = await self._leave_consumer_protocol(group)
            if err:
                return JoinResult(err, member_id=req.member_id)
        if group is None:
            if not unknown:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id)
            group = self.groups[req.group_id] = Group(req.group_id)
        if (unknown or req.member_id not in group.members) and len(group.members) + len(
            group.pending_members
        ) >= cfg.max_size and req.member_id not in group.pending_members:
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=req.member_id)
        fut: asyncio.Future[JoinResult] = self._loop.create_future()
        if unknown:
            self._unknown_join(group, req, fut)
        else:
            self._known_join(group, req, fut)
        result = await fut
        self._maybe_drop(group)
        return result

    async def _leave_consumer_protocol(self, group: Group) -> int:
        """A classic JoinGroup to an empty consumer-protocol group: Kafka's
        maybeDeleteEmptyConsumerGroup turns it into a classic group (offsets kept)."""
        async with self._lock(group.group_id):
            cg = group.consumer
            if cg is None:
                return ErrorCode.NONE
            if cg.members:
                return ErrorCode.REBALANCE_IN_PROGRESS  # members arrived meanwhile: join again
            err = await self._append([encode_consumer_record(k, v) for k, v in cg.group_tombstones()])
            if not err:
                group.consumer = None
            return err

    def _unknown_join(self, group: Group, req: JoinRequest, fut: asyncio.Future[JoinResult]) -> None:
        if group.is_(GroupState.DEAD):
            fut.set_result(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(req.protocol_type, req.protocols):
            fut.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = f"{req.client_id}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            old_id = group.static_members.get(req.group_instance_id)
            if old_id is None:
                self._add_member_and_rebalance(group, req, new_id, fut)
            else:
                self._replace_static_member(group, req, old_id, new_id, fut)
        elif req.require_known_member_id:
            # The client must come back with this id: a member that never returns costs nothing.
            timer = self._clock.call_later(
                req.session_timeout_ms / 1000, self._expire_pending_member, group, new_id
            )
            group.pending_members[new_id] = timer
            fut.set_result(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id))
        else:
            self._add_member_and_rebalance(group, req, new_id, fut)

    def _known_join(self, group: Group, req: JoinRequest, fut: asyncio.Future[JoinResult]) -> None:
        mid = req.member_id
        if group.is_(GroupState.DEAD):
            fut.set_result(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=mid))
        elif not group.supports_protocols(req.protocol_type, req.protocols):
            fut.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=mid))
        elif mid in group.pending_members:
            timer = group.pending_members.pop(mid)
            if timer is not None:
                timer.cancel()
            self._add_member_and_rebalance(group, req, mid, fut)
        elif group.is_static_member_fenced(req.group_instance_id, mid):
            fut.set_result(JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=mid))
        elif not group.has(mid) or (
            req.group_instance_id is not None and req.group_instance_id not in group.static_members
        ):
            fut.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=mid))
        else:
            member = group.members[mid]
            st = group.state
            if st is GroupState.PREPARING_REBALANCE:
                self._update_member_and_rebalance(group, member, req, fut)
            elif st is GroupState.COMPLETING_REBALANCE:
                if member.matches(req.protocols):
                    # A retry of a join whose answer was lost: answer it again.
                    fut.set_result(self._join_result(group, member))
                else:
                    self._update_member_and_rebalance(group, member, req, fut)
            elif st is GroupState.STABLE:
                if group.is_leader(mid) or not member.matches(req.protocols):
                    # The leader rejoining forces a rebalance (e.g. topic metadata changed).
                    self._update_member_and_rebalance(group, member, req, fut)
                else:
                    fut.set_result(self._join_result(group, member, with_members=False))
            else:
                fut.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=mid))

    def _add_member_and_rebalance(
        self, group: Group, req: JoinRequest, member_id: str, fut: asyncio.Future[JoinResult]
    ) -> None:
        member = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            list(req.protocols),
            is_new=True,
            join_waiter=fut,
        )
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        # New members cannot heartbeat yet; their join times out on its own (Kafka's 5 min).
        self._schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group)

    def _update_member_and_rebalance(
        self, group: Group, member: Member, req: JoinRequest, fut: asyncio.Future[JoinResult]
    ) -> None:
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        # A duplicate join replaces the earlier one, which is told to rejoin.
        member.complete_join(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.join_waiter = fut
        self._maybe_prepare_rebalance(group)

    def _replace_static_member(
        self, group: Group, req: JoinRequest, old_id: str, new_id: str, fut: asyncio.Future[JoinResult]
    ) -> None:
        assert req.group_instance_id is not None
        instance = req.group_instance_id
        current_leader = group.leader_id
        member = group.replace_static_member(instance, old_id, new_id)
        self._schedule_heartbeat(group, member)
        self._skip_ok[new_id] = req.supports_skip_assignment
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.join_waiter = fut
        st = group.state
        if st is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                # Same protocol: persist the new member id and hand back the current generation,
                # no rebalance (KIP-345).
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                self._spawn(self._store_replaced(group, member, instance, old_id, old, current_leader, assignment))
            else:
                self._maybe_prepare_rebalance(group)
        elif st is GroupState.COMPLETING_REBALANCE:
            self._maybe_prepare_rebalance(group)
        else:
            self._maybe_complete_join(group)

    async def _store_replaced(
        self,
        group: Group,
        member: Member,
        instance: str,
        old_id: str,
        old: tuple[list[tuple[str, bytes]], int, int],
        current_leader: str | None,
        assignment: dict[str, bytes],
    ) -> None:
        new_id = member.member_id
        err = await self._store_group(group, assignment)
        if err:
            self._skip_ok.pop(new_id, None)
            if group.static_members.get(instance) == new_id:
                group.replace_static_member(instance, new_id, old_id)
                member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = old
            member.complete_join(
                JoinResult(
                    err,
                    member_id="",
                    generation_id=group.generation_id,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader=current_leader or "",
                )
            )
            return
        is_leader = group.is_leader(new_id) and self._skip_ok.pop(new_id, True)
        member.complete_join(
            JoinResult(
                ErrorCode.NONE,
                member_id=new_id,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader=(group.leader_id or "") if is_leader else (current_leader or ""),
                skip_assignment=is_leader,
                members=group.member_metadata_list() if is_leader else [],
            )
        )

    def _expire_pending_member(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            timer = group.pending_members.pop(member_id)
            if timer is not None:
                timer.cancel()
            self._maybe_complete_join(group)
            self._maybe_drop(group)

    # ---- SyncGroup -------------------------------------------------------------------------

    async def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        if not self.active:
            return SyncResult(ErrorCode.NOT_COORDINATOR)
        if not group_id:
            return SyncResult(ErrorCode.INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.consumer is not None:
            return self.classic_sync_consumer(group, generation_id, member_id, instance_id, protocol_type,
                                              protocol_name)
        if group.is_(GroupState.DEAD):
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(instance_id, member_id):
            return SyncResult(ErrorCode.FENCED_INSTANCE_ID)
        if not group.has(member_id):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id != group.generation_id:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        if group.is_(GroupState.EMPTY):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.is_(GroupState.STABLE):
            self._remove_pending_sync(group, member_id)
            self._schedule_heartbeat(group, member)
            return SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)
        # CompletingRebalance: wait for the leader's assignment to be stored.
        fut: asyncio.Future[SyncResult] = self._loop.create_future()
        member.complete_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_waiter = fut
        self._remove_pending_sync(group, member_id)
        if group.is_leader(member_id):
            full = {mid: assignments.get(mid, b"") for mid in group.members}
            gen = group.generation_id
            err = await self._store_group(group, full)
            if group.is_(GroupState.COMPLETING_REBALANCE) and gen == group.generation_id:
                if err:
                    self._reset_and_propagate_assignment_error(group, err)
                    self._maybe_prepare_rebalance(group)
                else:
                    group.transition(GroupState.STABLE)
                    self._set_and_propagate_assignment(group, full)
        return await fut

    # ---- Heartbeat / LeaveGroup ---------------------------------------------------------------

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> int:
        if not self.active:
            return ErrorCode.NOT_COORDINATOR
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.consumer is not None:
            return self.classic_heartbeat_consumer(group, generation_id, member_id, instance_id)
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, member)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    async def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """LeaveGroup of classic members, whichever protocol their group speaks."""
        group = self.groups.get(group_id) if self.active and group_id else None
        if group is not None and group.consumer is not None:
            return ErrorCode.NONE, await self.classic_leave_consumer(group, members)
        return self.leave(group_id, members)

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """(top-level error, one error per (member id, instance id) leaving)."""
        if not self.active:
            return ErrorCode.NOT_COORDINATOR, []
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        out: list[int] = []
        for member_id, instance_id in members:
            if not member_id:
                # Administrative removal by group.instance.id.
                current = group.static_members.get(instance_id) if instance_id is not None else None
                if current is None:
                    out.append(ErrorCode.UNKNOWN_MEMBER_ID)
                else:
                    self._remove_member_and_update(group, group.members[current])
                    out.append(ErrorCode.NONE)
            elif member_id in group.pending_members:
                self._expire_pending_member(group, member_id)
                out.append(ErrorCode.NONE)
            elif group.is_static_member_fenced(instance_id, member_id):
                out.append(ErrorCode.FENCED_INSTANCE_ID)
            elif member_id in group.members:
                self._remove_member_and_update(group, group.members[member_id])
                out.append(ErrorCode.NONE)
            else:
                out.append(ErrorCode.UNKNOWN_MEMBER_ID)
        return ErrorCode.NONE, out
