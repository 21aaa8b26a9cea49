"""What the group and transaction coordinators share on a gateway: an internal topic whose
partitions are the coordinator's shards, a shard's coordinator being the gateway that owns the
partition; lazy activation (take the partition, replay its log) on first use, unloading when
ownership goes, and finding the coordinator of a key (Kafka's hash of the key over the shards).
Subclasses say how a shard's coordinator is built over the partition's log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from coordinator.group.hashing import shard_for
from coordinator.group.shard_log import ShardLogError
from gateway.errors import KafkaApiError
from kafka_wire.errors import ErrorCode
from store.tasks import within

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from gateway.cluster.membership import GatewayNode
    from gateway.host import GatewayHost
    from gateway.partition.log import PartitionLog
    from gateway.topics.registry import TopicInfo

log = logging.getLogger(__name__)


class ShardCoordinator(Protocol):
    @property
    def active(self) -> bool: ...

    async def load(self) -> None: ...

    def unload(self) -> None: ...


C = TypeVar("C", bound=ShardCoordinator)


class PartitionShardLog:
    """A coordinator shard's log: its internal partition's PartitionLog. Appends are the
    coordinator's own (Kafka's AppendOrigin.COORDINATOR: transactional offset commits carry a
    producer id but no sequence)."""

    def __init__(self, plog: PartitionLog, max_bytes: int) -> None:
        self.plog = plog
        self.max_bytes = max_bytes

    async def append(self, batch: bytes) -> int:
        try:
            res = await self.plog.append(
                bytearray(batch), api_version=9, max_message_bytes=self.max_bytes, log_append_time=False,
                from_coordinator=True,
            )
        except KafkaApiError as e:
            lost = self.plog.lost or e.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            raise ShardLogError(f"{self.plog.topic.name} append failed: {e}", lost=lost, error_code=e.error_code) from e
        return res.base_offset

    def replay(self) -> AsyncIterator[bytes]:
        return self.plog.replay()


class Shard(Generic[C]):
    def __init__(self, plog: PartitionLog, coordinator: C) -> None:
        self.plog = plog
        self.coordinator = coordinator
        self.loading: asyncio.Task[None] | None = None


class CoordinatorShards(Generic[C]):
    """The shards of one internal topic this gateway coordinates."""

    topic_name: str
    what: str  # "group", "transaction": for messages

    def __init__(self, services: GatewayHost, partitions: int, topic_configs: dict[str, str | None],
                 load_wait_s: float) -> None:
        self.services = services
        self.partitions = partitions
        self.topic_configs = topic_configs
        self.load_wait_s = load_wait_s
        self._shards: dict[int, Shard[C]] = {}
        self._topic: TopicInfo | None = None
        self._topic_lock = asyncio.Lock()
        self._activating: dict[int, asyncio.Lock] = {}

    # ---- what subclasses define ---------------------------------------------------------

    def make(self, shard: int, plog: PartitionLog) -> C:
        raise NotImplementedError

    def on_unload(self, coordinator: C) -> None:
        """Called before a shard's coordinator is unloaded."""

    def shard_log(self, plog: PartitionLog) -> PartitionShardLog:
        return PartitionShardLog(plog, max(self.services.config.message_max_bytes, 64 << 20))

    # ---- the topic and its shards ---------------------------------------------------------

    async def internal_topic(self, *, create: bool = True) -> TopicInfo:
        if self._topic is not None:
            return self._topic
        async with self._topic_lock:
            topics = self.services.topics
            info = await topics.get(self.topic_name)
            if info is None and create:
                try:
                    info = await topics.create(self.topic_name, self.partitions, dict(self.topic_configs))
                except KafkaApiError as e:
                    if e.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                        raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(e)) from e
                    info = await topics.get(self.topic_name)
            if info is None:
                raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"no {self.topic_name} topic")
            if self.topic_configs.get("cleanup.policy") == "compact" and not info.compacted:
                # Created before compaction existed: compact it from now on.
                with contextlib.suppress(KafkaApiError):
                    info = await topics.modify_configs(self.topic_name, lambda c: {**c, "cleanup.policy": "compact"})
            self._topic = info
            return info

    def shard_of(self, key: str, topic: TopicInfo) -> int:
        return shard_for(key, topic.partitions)

    async def find(self, key: str) -> GatewayNode:
        """The gateway coordinating `key` (COORDINATOR_NOT_AVAILABLE if none yet)."""
        topic = await self.internal_topic()
        shard = self.shard_of(key, topic)
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

    async def coordinator_for(self, key: str) -> C:
        """This gateway's loaded coordinator of the key's shard; KafkaApiError with
        NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE otherwise."""
        topic = await self.internal_topic()
        return await self.coordinator_of_shard(topic, self.shard_of(key, topic))

    async def coordinator_of_shard(self, topic: TopicInfo, shard: int) -> C:
        st = await self._activate(topic, shard)
        task = st.loading
        if task is not None and not task.done():
            try:
                await within(asyncio.shield(task), self.load_wait_s)
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

    async def _activate(self, topic: TopicInfo, shard: int) -> Shard[C]:
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
            new: Shard[C] = Shard(plog, self.make(shard, plog))
            self._shards[shard] = new
            plog.add_lost_listener(lambda: self._unload(shard, new))
            new.loading = asyncio.get_running_loop().create_task(self._load(shard, new))
            return new

    def _current(self, topic: TopicInfo, shard: int, st: Shard[C]) -> bool:
        plog = st.plog
        return not plog.lost and self.services.partitions.log_of(topic.topic_id, shard) is plog

    async def _load(self, shard: int, st: Shard[C]) -> None:
        try:
            await st.coordinator.load()
        except Exception:
            log.exception("loading %s shard %d failed", self.what, shard)
            raise

    def _unload(self, shard: int, st: Shard[C]) -> None:
        if self._shards.get(shard) is st:
            del self._shards[shard]
        self.on_unload(st.coordinator)
        if st.loading is not None and not st.loading.done():
            st.loading.cancel()
        st.coordinator.unload()

    def loaded(self) -> list[C]:
        return [st.coordinator for st in self._shards.values() if st.coordinator.active]

    async def owned_coordinators(self) -> list[C] | None:
        """The loaded coordinators of every shard this gateway owns (activating them); None
        while one is still loading. No topic yet: none."""
        if self._topic is None and await self.services.topics.get(self.topic_name) is None:
            return []
        topic = await self.internal_topic()
        partitions = self.services.partitions
        out = []
        for shard in range(topic.partitions):
            if partitions.log_of(topic.topic_id, shard) is None:
                continue
            try:
                st = await self._activate(topic, shard)
                task = st.loading
                if task is not None and not task.done():
                    await within(asyncio.shield(task), self.load_wait_s)
            except TimeoutError:
                return None
            except Exception:
                continue  # moved away or failed to load: not ours to list
            if st.coordinator.active:
                out.append(st.coordinator)
        return out

    async def close_shards(self) -> None:
        for shard, st in list(self._shards.items()):
            self._unload(shard, st)
            if st.loading is not None:
                with contextlib.suppress(BaseException):
                    await st.loading
