"""The rebalance state transitions of the classic group protocol: preparing a rebalance, the
delayed initial join, completing a join, pending-sync expiry, propagating assignments."""

from __future__ import annotations

import logging

from coordinator.group.group import Group, GroupState, JoinResult, Member, SyncResult
from coordinator.group.offsets import OffsetOps
from coordinator.group.shard import now_ms
from kafka_wire.errors import ErrorCode

log = logging.getLogger("coordinator.group.coordinator")


class RebalanceOps(OffsetOps):
    """Base of GroupCoordinator: the transitions its JoinGroup, SyncGroup and LeaveGroup drive."""

    def _maybe_prepare_rebalance(self, group: Group) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join(group)

    def _prepare_rebalance(self, group: Group) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        group.pending_sync.clear()
        was_empty = group.is_(GroupState.EMPTY)
        group.transition(GroupState.PREPARING_REBALANCE)
        if group.join_timer is not None:
            group.join_timer.cancel()
        if was_empty:
            # Kafka's InitialDelayedJoin: wait for more members, extended while they keep coming.
            delay = self.config.initial_rebalance_delay_ms
            group.in_initial_delay = True
            group.new_member_added = False
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_timer = self._clock.call_later(delay / 1000, self._on_initial_delay, group, delay)
        else:
            group.in_initial_delay = False
            group.join_timer = self._clock.call_later(
                group.rebalance_timeout_ms() / 1000, self._complete_join, group
            )
            self._maybe_complete_join(group)

    def _on_initial_delay(self, group: Group, delay: int) -> None:
        group.join_timer = None
        if group.new_member_added and group.initial_delay_remaining_ms > 0:
            group.new_member_added = False
            nxt = min(self.config.initial_rebalance_delay_ms, group.initial_delay_remaining_ms)
            group.initial_delay_remaining_ms -= nxt
            group.join_timer = self._clock.call_later(nxt / 1000, self._on_initial_delay, group, nxt)
            return
        group.in_initial_delay = False
        self._complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        if group.is_(GroupState.PREPARING_REBALANCE) and not group.in_initial_delay and group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE) or not self.active:
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.in_initial_delay = False
        for m in list(group.members.values()):
            if not m.awaiting_join and m.group_instance_id is None:
                group.remove(m.member_id)
        if group.members and not self._elect_joined_leader(group):
            # Nobody rejoined: wait another rebalance timeout for sessions to expire.
            log.warning("group %s: no member rejoined; waiting", group.group_id)
            group.join_timer = self._clock.call_later(
                group.rebalance_timeout_ms() / 1000, self._complete_join, group
            )
            return
        group.generation_id += 1
        if group.members:
            group.protocol_name = group.select_protocol()
            group.transition(GroupState.COMPLETING_REBALANCE)
            for m in list(group.members.values()):
                m.complete_join(self._join_result(group, m))
                self._schedule_heartbeat(group, m)
                m.is_new = False
            group.pending_sync = set(group.members)
            gen = group.generation_id
            group.sync_timer = self._clock.call_later(
                group.rebalance_timeout_ms() / 1000, self._expire_pending_sync, group, gen
            )
        else:
            group.protocol_name = None
            group.transition(GroupState.EMPTY)
            group.state_timestamp = now_ms()
            self._spawn(self._store_empty(group))
        log.info(
            "group %s: generation %d, %d members, state %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.state.value,
            extra={"fields": {"event": "group_rebalanced", "group": group.group_id,
                              "generation": group.generation_id, "members": len(group.members),
                              "state": group.state.value}},
        )

    async def _store_empty(self, group: Group) -> None:
        err = await self._store_group(group, {})
        if err:
            log.warning("group %s: failed to store the empty generation: %s", group.group_id, err)

    @staticmethod
    def _elect_joined_leader(group: Group) -> bool:
        leader = group.members.get(group.leader_id or "")
        if leader is not None and leader.awaiting_join:
            return True
        for m in group.members.values():
            if m.awaiting_join:
                group.leader_id = m.member_id
                return True
        return False

    def _expire_pending_sync(self, group: Group, generation: int) -> None:
        group.sync_timer = None
        if generation != group.generation_id or group.state not in (
            GroupState.COMPLETING_REBALANCE,
            GroupState.STABLE,
        ):
            return
        for mid in list(group.pending_sync):
            m = group.remove(mid)
            if m is not None:
                m.complete_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=mid))
                m.complete_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.pending_sync.clear()
        self._maybe_prepare_rebalance(group)

    def _remove_pending_sync(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync and group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _reset_and_propagate_assignment_error(self, group: Group, error: int) -> None:
        for m in group.members.values():
            m.assignment = b""
            m.complete_sync(SyncResult(error))

    def _set_and_propagate_assignment(self, group: Group, assignment: dict[str, bytes]) -> None:
        for m in group.members.values():
            m.assignment = assignment.get(m.member_id, b"")
            if m.awaiting_sync:
                m.complete_sync(SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, m.assignment))
                self._schedule_heartbeat(group, m)

    def _remove_member_and_update(self, group: Group, member: Member) -> None:
        # The member may still have a join pending: tell it to start over.
        member.complete_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id))
        member.complete_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    def _join_result(self, group: Group, member: Member, *, with_members: bool = True) -> JoinResult:
        lead = with_members and group.is_leader(member.member_id)
        return JoinResult(
            ErrorCode.NONE,
            member_id=member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=group.member_metadata_list() if lead else [],
        )
