"""Glue between the gateway and coordinator/group: the `__consumer_offsets` topic, the shard
log over a PartitionLog, and lazy activation of one GroupCoordinator per shard this gateway
owns. The group handlers use it, with gateway/handlers/group_lookup.py for what reads a request."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import Metric

from coordinator.group.assignors import ASSIGNORS, TopicMeta
from coordinator.group.config import OFFSETS_TOPIC, GroupConfig
from coordinator.group.coordinator import GroupCoordinator
from coordinator.group.cursors import GROUP_OFFSETS, CursorMover, OffsetPublisher
from coordinator.group.hashing import shard_for
from coordinator.group.shard_log import ShardLogError
from coordinator.metrics import group_metrics
from gateway.errors import KafkaApiError
from gateway.topics.naming import INTERNAL_TOPICS
from kafka_wire.errors import ErrorCode
from store.managed.position import Position
from store.metrics import InstanceCollector

if TYPE_CHECKING:
    from gateway.cluster.membership import GatewayNode
    from gateway.partition.log import PartitionLog
    from gateway.services import GatewayServices
    from gateway.topics.registry import TopicInfo

log = logging.getLogger(__name__)

CURSOR_INTERVAL_S = 2.0  # committed offsets reach the partitions' cursors within about this
# Offsets-topic records must never age out: there is no compaction yet, so keep everything.
OFFSETS_TOPIC_CONFIGS: dict[str, str | None] = {"retention.ms": "-1", "retention.bytes": "-1"}

def group_config(services: GatewayServices) -> GroupConfig:
    """GroupConfig: the gateway's config (the group.* settings and offsets_topic_partitions,
    which the `quire` command resolves from flags, QUIRE_* variables and the config file), else
    Kafka's defaults."""
    out = GroupConfig()
    if services.config.offsets_topic_partitions is not None:
        out.offsets_topic_partitions = int(services.config.offsets_topic_partitions)
    for name, value in services.config.group.items():
        if value is not None:
            setattr(out, name, value if isinstance(getattr(out, name), str) else int(value))
    unknown = set(out.consumer_assignors.split(",")) - set(ASSIGNORS)
    if unknown:
        raise ValueError(f"group.consumer.assignors: unknown assignor(s) {sorted(unknown)} (known: {list(ASSIGNORS)})")
    return out


class PartitionShardLog:
    """A coordinator shard's log: the `__consumer_offsets` partition's PartitionLog."""

    def __init__(self, plog: PartitionLog, max_bytes: int) -> None:
        self.plog = plog
        self.max_bytes = max_bytes

    async def append(self, batch: bytes) -> int:
        try:
            res = await self.plog.append(
                bytearray(batch), api_version=9, max_message_bytes=self.max_bytes, log_append_time=False
            )
        except KafkaApiError as e:
            lost = self.plog.lost or e.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            raise ShardLogError(f"offsets-topic append failed: {e}", lost=lost) from e
        return res.base_offset

    def replay(self) -> AsyncIterator[bytes]:
        return self.plog.replay()


def _position_finder(plog: PartitionLog) -> Callable[[int], Awaitable[Position]]:
    """offset -> position of the first entry not consumed by a group committed at `offset`."""

    async def find(offset: int) -> Position:
        ml = plog.ml
        if offset >= plog.high_watermark:
            return ml.next_position(ml.last_confirmed)
        return await plog.position_of(max(offset, plog.log_start_offset))

    return find


class _Shard:
    def __init__(self, plog: PartitionLog, coordinator: GroupCoordinator) -> None:
        self.plog = plog
        self.coordinator = coordinator
        self.loading: asyncio.Task[None] | None = None


class GroupCoordinators:
    """All group-coordinator shards of one gateway process."""

    def __init__(self, services: GatewayServices) -> None:
        self.services = services
        self.config = group_config(services)
        self._shards: dict[int, _Shard] = {}
        self._topic: TopicInfo | None = None
        self._topic_lock = asyncio.Lock()
        self._activating: dict[int, asyncio.Lock] = {}
        self._publisher = OffsetPublisher(services.meta, self._topic_id_of)
        self._mover = CursorMover(services.meta)
        self._cursor_task: asyncio.Task[None] | None = None
        GROUPS.track(self)

    def start(self) -> None:
        """Start the cursor loop (publish committed offsets, move owned partitions' cursors)."""
        if self._cursor_task is None:
            self._cursor_task = asyncio.get_running_loop().create_task(self._cursor_loop())

    def _topic_image(self) -> dict[str, TopicMeta]:
        """The topics consumer-protocol groups may subscribe to (internal topics left out)."""
        return {t.name: TopicMeta(t.topic_id, t.partitions) for t in self.services.topics.cached()
                if t.name not in INTERNAL_TOPICS}

    async def _topic_id_of(self, name: str) -> uuid.UUID | None:
        info = await self.services.topics.get(name)
        return info.topic_id if info is not None else None

    async def _cursor_loop(self) -> None:
        last_expiry = time.monotonic()
        while True:
            await asyncio.sleep(CURSOR_INTERVAL_S)
            try:
                if time.monotonic() - last_expiry >= self.config.offsets_retention_check_interval_ms / 1000:
                    last_expiry = time.monotonic()
                    now = int(time.time() * 1000)
                    for c in self.loaded():
                        await c.expire_offsets(now)
                await self.sync_cursors()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("group cursor sync failed")

    async def sync_cursors(self) -> None:
        """One round: publish this gateway's committed offsets, then apply every published
        offset of the partitions it owns to their logs' group cursors."""
        committed: dict[str, dict[tuple[str, int], int]] = {}
        for c in self.loaded():
            committed.update(c.committed())
        await self._publisher.publish(committed)
        meta, partitions = self.services.meta, self.services.partitions
        try:
            with_offsets = set(await meta.children(GROUP_OFFSETS))
        except Exception:
            return
        for tid, p in partitions.owned():
            plog = partitions.log_of(tid, p)
            if tid.hex not in with_offsets or plog is None or plog.lost or plog.topic.name == OFFSETS_TOPIC:
                continue
            await self._mover.apply(tid, p, plog.ml, _position_finder(plog))

    async def offsets_topic(self, *, create: bool = True) -> TopicInfo:
        if self._topic is not None:
            return self._topic
        async with self._topic_lock:
            topics = self.services.topics
            info = await topics.get(OFFSETS_TOPIC)
            if info is None and create:
                try:
                    info = await topics.create(
                        OFFSETS_TOPIC, self.config.offsets_topic_partitions, dict(OFFSETS_TOPIC_CONFIGS)
                    )
                except KafkaApiError as e:
                    if e.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                        raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(e)) from e
                    info = await topics.get(OFFSETS_TOPIC)
            if info is None:
                raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "no offsets topic")
            self._topic = info
            return info

    def shard_of(self, group_id: str, topic: TopicInfo) -> int:
        return shard_for(group_id, topic.partitions)

    async def find(self, group_id: str) -> GatewayNode:
        """The gateway coordinating `group_id` (COORDINATOR_NOT_AVAILABLE if none yet)."""
        topic = await self.offsets_topic()
        shard = self.shard_of(group_id, topic)
        cluster = self.services.cluster
        owner = cluster.leader_of(topic.topic_id, shard)
        if owner is None or owner == self.services.node_id:
            # Nobody owns the shard yet (or we do): try to take it and start loading it now.
            try:
                await self._activate(topic, shard)
                owner = self.services.node_id
            except KafkaApiError:
                owner = cluster.leader_of(topic.topic_id, shard)
        node = cluster.node(owner) if owner is not None else None
        if node is None:
            raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"no coordinator for shard {shard} yet")
        return node

    async def coordinator_for(self, group_id: str) -> GroupCoordinator:
        """This gateway's loaded coordinator of the group's shard; KafkaApiError with
        NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE otherwise."""
        topic = await self.offsets_topic()
        shard = self.shard_of(group_id, topic)
        st = await self._activate(topic, shard)
        task = st.loading
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), self.config.load_wait_s)
            except TimeoutError:
                raise KafkaApiError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "loading") from None
            except Exception:
                pass
        if task is not None and task.done() and (task.cancelled() or task.exception() is not None):
            self._unload(shard, st)
            raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"shard {shard} failed to load")
        if not st.coordinator.active:
            raise KafkaApiError(ErrorCode.NOT_COORDINATOR, "shard unloaded")
        return st.coordinator

    async def _activate(self, topic: TopicInfo, shard: int) -> _Shard:
        st = self._shards.get(shard)
        if st is not None and self._current(topic, shard, st):
            return st
        lock = self._activating.setdefault(shard, asyncio.Lock())
        async with lock:
            st = self._shards.get(shard)
            if st is not None:
                if self._current(topic, shard, st):
                    return st
                self._unload(shard, st)
            try:
                plog = await self.services.partitions.get(topic, shard)
            except KafkaApiError as e:
                code = ErrorCode.NOT_COORDINATOR
                if e.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
                raise KafkaApiError(code, f"shard {shard}: {e}") from e
            shard_log = PartitionShardLog(plog, max(self.services.config.message_max_bytes, 64 << 20))
            st = _Shard(plog, GroupCoordinator(shard, shard_log, self.config, topics=self._topic_image,
                                               share_config=self.services.config.share))
            self._shards[shard] = st
            plog.add_lost_listener(lambda: self._unload(shard, st))
            st.loading = asyncio.get_running_loop().create_task(self._load(shard, st))
            return st

    def _current(self, topic: TopicInfo, shard: int, st: _Shard) -> bool:
        plog = st.plog
        return not plog.lost and self.services.partitions.log_of(topic.topic_id, shard) is plog

    async def _load(self, shard: int, st: _Shard) -> None:
        try:
            await st.coordinator.load()
        except Exception:
            log.exception("loading group shard %d failed", shard)
            raise

    def _unload(self, shard: int, st: _Shard) -> None:
        if self._shards.get(shard) is st:
            del self._shards[shard]
        self._publisher.forget(set(st.coordinator.groups))
        if st.loading is not None and not st.loading.done():
            st.loading.cancel()
        st.coordinator.unload()

    def loaded(self) -> list[GroupCoordinator]:
        return [st.coordinator for st in self._shards.values() if st.coordinator.active]

    async def owned_coordinators(self) -> list[GroupCoordinator] | None:
        """The loaded coordinators of every shard this gateway owns (activating them); None
        while one is still loading. No offsets topic yet: no groups."""
        if self._topic is None and await self.services.topics.get(OFFSETS_TOPIC) is None:
            return []
        topic = await self.offsets_topic()
        partitions = self.services.partitions
        out = []
        for shard in range(topic.partitions):
            if partitions.log_of(topic.topic_id, shard) is None:
                continue
            try:
                st = await self._activate(topic, shard)
                task = st.loading
                if task is not None and not task.done():
                    await asyncio.wait_for(asyncio.shield(task), self.config.load_wait_s)
            except TimeoutError:
                return None
            except Exception:
                continue  # moved away or failed to load: not ours to list
            if st.coordinator.active:
                out.append(st.coordinator)
        return out

    async def close(self) -> None:
        if self._cursor_task is not None:
            self._cursor_task.cancel()
            with contextlib.suppress(BaseException):
                await self._cursor_task
        for shard, st in list(self._shards.items()):
            self._unload(shard, st)
            if st.loading is not None:
                with contextlib.suppress(BaseException):
                    await st.loading


def coordinators(services: GatewayServices) -> GroupCoordinators:
    """The process's GroupCoordinators: made and started with the gateway (gateway/app.py), or
    on first use when services were assembled without them (in-process tests)."""
    if services.groups is None:
        services.groups = GroupCoordinators(services)
        services.groups.start()
    assert isinstance(services.groups, GroupCoordinators)
    return services.groups


def _group_metrics(sources: list[GroupCoordinators]) -> Iterable[Metric]:
    groups = []
    lag: dict[tuple[str, str], int] = defaultdict(int)
    for src in sources:
        for c in src.loaded():
            groups.extend(list(c.groups.values()))
        partitions = src.services.partitions
        published = src._mover.published  # committed offsets as the partitions' owner last read them
        for tid, p in partitions.owned():
            plog = partitions.log_of(tid, p)
            offsets = published.get((tid, p))
            if plog is None or not offsets or plog.topic.name == OFFSETS_TOPIC:
                continue
            hw = plog.high_watermark
            for group, offset in list(offsets.items()):
                lag[(group, plog.topic.name)] += max(hw - offset, 0)
    return group_metrics(groups, lag)


GROUPS: InstanceCollector[GroupCoordinators] = InstanceCollector(_group_metrics)
