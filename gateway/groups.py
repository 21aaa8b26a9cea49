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
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import Metric

from coordinator.group.assignors import ASSIGNORS, TopicMeta
from coordinator.group.config import OFFSETS_TOPIC, GroupConfig
from coordinator.group.coordinator import GroupCoordinator
from coordinator.group.cursors import GROUP_OFFSETS, CursorMover, OffsetPublisher
from coordinator.metrics import group_metrics
from gateway.coordinator_shards import CoordinatorShards
from gateway.topics.naming import INTERNAL_TOPICS
from store.managed.position import Position
from store.metrics import InstanceCollector

if TYPE_CHECKING:
    from gateway.host import GatewayHost
    from gateway.partition.log import PartitionLog
    from gateway.topics.registry import TopicInfo

log = logging.getLogger(__name__)

CURSOR_INTERVAL_S = 2.0  # committed offsets reach the partitions' cursors within about this
# As Kafka creates it: compacted (so a coordinator takeover replays a bounded log), ledgers of
# offsets.topic.segment.bytes.
OFFSETS_TOPIC_CONFIGS: dict[str, str | None] = {"cleanup.policy": "compact", "segment.bytes": "104857600"}

def group_config(services: GatewayHost) -> GroupConfig:
    """GroupConfig: the gateway's config (the group.* settings and offsets_topic_partitions,
    which the `quire` command resolves from flags, QUIRE_* variables and the config file), else
    Kafka's defaults."""
    out = GroupConfig()
    if services.config.offsets_topic_partitions is not None:
        out.offsets_topic_partitions = int(services.config.offsets_topic_partitions)
    for name, value in services.config.group.items():
        if value is not None:
            setattr(out, name, value if isinstance(getattr(out, name), (str, bool)) else int(value))
    unknown = set(out.consumer_assignors.split(",")) - set(ASSIGNORS)
    if unknown:
        raise ValueError(f"group.consumer.assignors: unknown assignor(s) {sorted(unknown)} (known: {list(ASSIGNORS)})")
    return out


def _position_finder(plog: PartitionLog) -> Callable[[int], Awaitable[Position]]:
    """offset -> position of the first entry not consumed by a group committed at `offset`."""

    async def find(offset: int) -> Position:
        ml = plog.ml
        if offset >= plog.high_watermark:
            return ml.next_position(ml.last_confirmed)
        return await plog.position_of(max(offset, plog.log_start_offset))

    return find


class GroupCoordinators(CoordinatorShards[GroupCoordinator]):
    """All group-coordinator shards of one gateway process."""

    topic_name = OFFSETS_TOPIC
    what = "group"

    def __init__(self, services: GatewayHost) -> None:
        self.config = group_config(services)
        super().__init__(services, self.config.offsets_topic_partitions, OFFSETS_TOPIC_CONFIGS,
                         self.config.load_wait_s)
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
        return await self.internal_topic(create=create)

    def make(self, shard: int, plog: PartitionLog) -> GroupCoordinator:
        return GroupCoordinator(shard, self.shard_log(plog), self.config, topics=self._topic_image,
                                share_config=self.services.config.share)

    def on_unload(self, coordinator: GroupCoordinator) -> None:
        self._publisher.forget(set(coordinator.groups))

    async def close(self) -> None:
        if self._cursor_task is not None:
            self._cursor_task.cancel()
            with contextlib.suppress(BaseException):
                await self._cursor_task
        await self.close_shards()


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
