"""The state one coordinator shard owns and how it reaches its log: the groups, the write path
(every change acknowledged by the log before it is applied or answered) and the replay that
rebuilds everything after a failover."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping

from coordinator.group.assignors import TopicMeta
from coordinator.group.config import GroupConfig
from coordinator.group.group import Group, GroupState, JoinResult, Member, OffsetAndMetadata, SyncResult
from coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    Record,
    build_records_batch,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from coordinator.group.shard_log import ShardLog, ShardLogError
from coordinator.group.stored import GroupLogReplay, StoredShareGroup
from coordinator.share.config import ShareConfig
from coordinator.share.group import ShareGroup
from kafka_wire.errors import ErrorCode
from store.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


class ShardState:
    def __init__(
        self,
        shard: int,
        shard_log: ShardLog,
        config: GroupConfig | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        topics: Callable[[], Mapping[str, TopicMeta]] | None = None,
        share_config: ShareConfig | None = None,
    ) -> None:
        self.shard = shard
        # The topics consumer-protocol groups may subscribe to: name -> id and partition count.
        self.topics_view: Callable[[], Mapping[str, TopicMeta]] = topics or dict
        self.log = shard_log
        self.config = config or GroupConfig()
        self.share_config = share_config or ShareConfig()
        self.groups: dict[str, Group] = {}
        self.share_groups: dict[str, ShareGroup] = {}  # coordinator/share/membership.py
        self.active = False
        self._loop = asyncio.get_running_loop()
        self._clock = clock  # session, rebalance and join timers
        self._tasks: set[asyncio.Task[None]] = set()

    # ---- lifecycle ---------------------------------------------------------------------

    async def load(self) -> None:
        """Replay the shard's log from its start and become active."""
        replay = GroupLogReplay(self.shard)
        async for chunk in self.log.replay():
            replay.apply(chunk)
        for gid, stored in replay.groups().items():
            group = Group(gid)
            group.offsets = stored.offsets
            group.consumer = stored.consumer
            group.txn_offsets = stored.txn_offsets
            if stored.metadata is not None and stored.consumer is None:
                self._restore(group, stored.metadata)
            self.groups[gid] = group
        self._restore_share_groups(replay.share_groups())
        self.active = True
        log.info("group shard %d loaded: %d groups", self.shard, len(self.groups))

    def _restore(self, group: Group, gv: GroupMetadataValue) -> None:
        group.generation_id = gv.generation
        group.protocol_type = gv.protocol_type or None
        group.protocol_name = gv.protocol
        group.leader_id = gv.leader
        group.state_timestamp = gv.current_state_timestamp
        for mv in gv.members:
            m = Member(
                mv.member_id,
                mv.group_instance_id,
                mv.client_id,
                mv.client_host,
                mv.rebalance_timeout,
                mv.session_timeout,
                gv.protocol_type,
                [(gv.protocol or "", mv.subscription)],
                assignment=mv.assignment,
            )
            group.members[m.member_id] = m
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
            self._schedule_heartbeat(group, m)
        if group.members:
            group.state = GroupState.STABLE
            group.previous_state = GroupState.COMPLETING_REBALANCE
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)

    def unload(self) -> None:
        """Ownership of the shard is gone: stop timers and send every waiting request away."""
        self.active = False
        for group in self.groups.values():
            self._cancel_group_timers(group)
            for m in group.members.values():
                m.cancel_heartbeat()
                m.complete_join(JoinResult(ErrorCode.NOT_COORDINATOR, member_id=m.member_id))
                m.complete_sync(SyncResult(ErrorCode.NOT_COORDINATOR))
        self.groups.clear()
        for sg in self.share_groups.values():
            for sm in sg.members.values():
                sm.cancel_timer()
        self.share_groups.clear()
        for t in list(self._tasks):
            t.cancel()

    def _cancel_group_timers(self, group: Group) -> None:
        for h in (group.join_timer, group.sync_timer, *group.pending_members.values()):
            if h is not None:
                h.cancel()
        group.join_timer = group.sync_timer = None

    def _spawn(self, coro: object) -> None:
        task: asyncio.Task[None] = self._loop.create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- writes ------------------------------------------------------------------------

    async def _append(self, records: list[Record], producer: tuple[int, int] | None = None) -> int:
        """Append records (in the transaction of `producer` = (id, epoch) if given); Kafka's
        mapping of a failed offsets-topic write to an error code."""
        if not records:
            return ErrorCode.NONE
        try:
            await self.log.append(build_records_batch(records, producer))
        except ShardLogError as e:
            log.warning("group shard %d: write failed: %s", self.shard, e)
            if producer is not None and e.error_code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED):
                return ErrorCode.PRODUCER_FENCED
            return ErrorCode.NOT_COORDINATOR if e.lost else ErrorCode.COORDINATOR_NOT_AVAILABLE
        except Exception:
            log.exception("group shard %d: write failed", self.shard)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not self.active:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def group_record(self, group: Group, assignment: dict[str, bytes]) -> Record:
        members = [
            MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(group.protocol_name),
                assignment=assignment.get(m.member_id, b""),
            )
            for m in group.members.values()
        ]
        gv = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=now_ms(),
            members=members,
        )
        return encode_group_key(GroupMetadataKey(group=group.group_id)), encode_group_value(gv)

    async def _store_group(self, group: Group, assignment: dict[str, bytes]) -> int:
        return await self._append([self.group_record(group, assignment)])

    @staticmethod
    def offset_record(group_id: str, tp: tuple[str, int], om: OffsetAndMetadata | None) -> Record:
        key = encode_offset_key(OffsetCommitKey(group=group_id, topic=tp[0], partition=tp[1]))
        if om is None:
            return key, None
        return key, encode_offset_value(om)

    # ---- heartbeats (used by both halves) ------------------------------------------------

    def _schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        member.cancel_heartbeat()
        t = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = self._clock.call_later(t / 1000, self._on_heartbeat_expired, group, member)

    def _on_heartbeat_expired(self, group: Group, member: Member) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            # Members waiting in a rebalance satisfy their heartbeats (Kafka's hasSatisfiedHeartbeat).
            self._schedule_heartbeat(group, member)
            return
        log.info("group %s: member %s session expired", group.group_id, member.member_id)
        self._remove_member_and_update(group, member)

    def _remove_member_and_update(self, group: Group, member: Member) -> None:
        raise NotImplementedError  # the membership half defines it

    def _restore_share_groups(self, stored: dict[str, StoredShareGroup]) -> None:
        raise NotImplementedError  # coordinator/share/membership.py defines it

    def _maybe_drop(self, group: Group) -> None:
        """Forget a group that holds nothing (a failed first join or commit)."""
        if (
            group.is_(GroupState.EMPTY)
            and not group.members
            and not group.offsets
            and not group.txn_offsets
            and not group.pending_members
            and group.generation_id == 0
            and group.consumer is None
            and self.groups.get(group.group_id) is group
        ):
            del self.groups[group.group_id]
