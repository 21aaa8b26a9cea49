"""The Kafka topics of the cluster, kept in the metadata store and cached from watches.

Layout (gateway/paths.py): TOPICS/<name> holds JSON {topic_id, partitions, configs, created_ms}
and is the authority; TOPIC_IDS/<uuid hex> maps an id back to its name. Every gateway keeps a
cache refreshed by one-shot watches (re-armed by a single refresh task), so Metadata answers
come from memory; a cache miss reads the store, so a topic created on another gateway a moment
ago is found at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from gateway import paths
from gateway.errors import KafkaApiError
from gateway.topics import configs as cfg
from gateway.topics.naming import collision_key, invalid_reason
from kafka_wire.errors import ErrorCode
from store.clock import SYSTEM_CLOCK, Clock
from store.meta.api import (
    BadVersionError,
    EventType,
    MetaError,
    MetaStore,
    NodeExistsError,
    NoNodeError,
    WatchEvent,
)
from store.retry import Backoff, Retry
from store.tasks import cancel_and_wait

log = logging.getLogger(__name__)

# After a failed refresh (metadata store unreachable): the watches are re-armed by the retry.
REFRESH_BACKOFF = Backoff(initial=0.5, maximum=5.0)
MAX_PARTITIONS = 10_000  # a sanity cap: Kafka has none, but one request must not create millions


class ProduceSettings(NamedTuple):
    """The topic configs every produced batch is checked against."""

    max_message_bytes: int
    log_append_time: bool
    timestamp_before_max_ms: int
    timestamp_after_max_ms: int
    compacted: bool


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)  # explicit overrides only
    # Manual replica assignments (CreateTopics/CreatePartitions), one per partition from 0, or
    # none: the first live gateway listed is the partition's preferred owner (cluster/assignment).
    preferred: tuple[tuple[int, ...], ...] = ()

    def config(self, key: str) -> str:
        """Effective value: the override, else Kafka's default."""
        return cfg.effective(self.configs, key)

    def config_int(self, key: str) -> int:
        return int(self.config(key))

    @property
    def compacted(self) -> bool:
        """cleanup.policy includes compact: keyless records refused, a cleaner keeps the latest per key."""
        return "compact" in (p.strip() for p in self.config("cleanup.policy").split(","))

    @property
    def deletes(self) -> bool:
        """cleanup.policy includes delete: retention.ms / retention.bytes apply."""
        return "delete" in (p.strip() for p in self.config("cleanup.policy").split(","))

    @functools.cached_property
    def produce_settings(self) -> ProduceSettings:
        """Parsed once per topic version (a config change makes a new TopicInfo), not per batch."""
        return ProduceSettings(
            max_message_bytes=self.config_int("max.message.bytes"),
            log_append_time=self.config("message.timestamp.type") == "LogAppendTime",
            timestamp_before_max_ms=self.config_int("message.timestamp.before.max.ms"),
            timestamp_after_max_ms=self.config_int("message.timestamp.after.max.ms"),
            compacted=self.compacted,
        )

    def to_bytes(self, created_ms: int | None = None) -> bytes:
        doc: dict[str, object] = {
            "topic_id": self.topic_id.hex, "partitions": self.partitions, "configs": self.configs,
            "created_ms": created_ms if created_ms is not None else int(time.time() * 1000)}
        if self.preferred:
            doc["preferred"] = [list(r) for r in self.preferred]
        return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, name: str, data: bytes) -> TopicInfo:
        doc = json.loads(data)
        return cls(name=name, topic_id=uuid.UUID(hex=doc["topic_id"]), partitions=int(doc["partitions"]),
                   configs={str(k): str(v) for k, v in doc.get("configs", {}).items()},
                   preferred=tuple(tuple(int(b) for b in r) for r in doc.get("preferred", ())))


async def read_topics(meta: MetaStore) -> list[TopicInfo]:
    """Every topic in the metadata store by name, read once without watches (readers outside a
    gateway: `quire admin`, the Spark source)."""
    try:
        names = await meta.children(paths.TOPICS)
    except NoNodeError:
        return []
    out = []
    for name in names:
        try:
            data, _ = await meta.get(paths.topic(name))
        except NoNodeError:
            continue  # deleted since listed
        out.append(TopicInfo.from_bytes(name, data))
    return sorted(out, key=lambda t: t.name)


def _err(code: ErrorCode, msg: str) -> KafkaApiError:
    return KafkaApiError(int(code), msg)


def check_name(name: str | None) -> str:
    reason = invalid_reason(name)
    if reason is not None:
        raise _err(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
    assert name is not None
    return name


def check_configs(configs: dict[str, str | None]) -> dict[str, str]:
    try:
        return cfg.validate_configs(configs)
    except cfg.ConfigError as e:
        raise _err(ErrorCode.INVALID_CONFIG, str(e)) from None


class TopicRegistry:
    def __init__(self, meta: MetaStore, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._meta = meta
        self._clock = clock
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._listeners: list[Callable[[], None]] = []
        self._stale: set[str] = set()  # names whose data watch fired (or never read)
        self._watched: set[str] = set()  # names with a data watch outstanding
        self._children_watched = False
        self._kick = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    # -- lifecycle --

    async def start(self) -> None:
        for p in (paths.TOPICS, paths.TOPIC_IDS):
            with contextlib.suppress(NodeExistsError):
                await self._meta.create(p, make_parents=True)
        await self._refresh()
        self._task = asyncio.create_task(self._refresh_loop(), name="topic-registry")

    async def close(self) -> None:
        self._closed = True
        await cancel_and_wait([self._task])

    def add_listener(self, cb: Callable[[], None]) -> None:
        """cb() runs whenever any topic is created, deleted or changed (by any gateway)."""
        self._listeners.append(cb)

    # -- reads --

    async def get(self, name: str) -> TopicInfo | None:
        info = self._by_name.get(name)
        if info is not None or invalid_reason(name) is not None:
            return info
        info = await self._read(name)
        if info is not None and name not in self._by_name:
            self._put(info)
            self._stale.add(name)  # arm its watch
            self._kick.set()
        return info

    async def get_fresh(self, name: str) -> TopicInfo | None:
        """The topic as stored now, bypassing the cache: for admin reads that must see a change
        just made through another gateway (the cache follows it only when the watch fires)."""
        if invalid_reason(name) is not None:
            return None
        return await self._read(name)

    async def get_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        info = self._by_id.get(topic_id)
        if info is not None:
            return info
        try:
            data, _ = await self._meta.get(paths.topic_id(topic_id))
        except NoNodeError:
            return None
        info = await self.get(data.decode())
        return info if info is not None and info.topic_id == topic_id else None

    async def all(self) -> list[TopicInfo]:
        return sorted(self._by_name.values(), key=lambda t: t.name)

    def cached(self) -> list[TopicInfo]:
        return sorted(self._by_name.values(), key=lambda t: t.name)

    # -- writes --

    async def create(
        self, name: str, partitions: int, configs: dict[str, str | None] | None = None, *, validate_only: bool = False,
        preferred: tuple[tuple[int, ...], ...] = (),
    ) -> TopicInfo:
        """`preferred`: a manual replica assignment per partition (already checked), or none."""
        check_name(name)
        if partitions < 1:
            raise _err(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
        if partitions > MAX_PARTITIONS:
            raise _err(ErrorCode.INVALID_PARTITIONS, f"Number of partitions {partitions} is above the limit of "
                                                     f"{MAX_PARTITIONS} per topic.")
        overrides = check_configs(dict(configs or {}))
        if await self._meta.exists(paths.topic(name)) is not None:
            raise _err(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        key = collision_key(name)
        for other in await self._meta.children(paths.TOPICS):
            if other != name and collision_key(other) == key:
                raise _err(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {other}")
        info = TopicInfo(name=name, topic_id=uuid.uuid4(), partitions=partitions, configs=overrides,
                         preferred=preferred)
        if validate_only:
            return info
        try:
            await self._meta.create(paths.topic(name), info.to_bytes(), make_parents=True)
        except NodeExistsError:
            raise _err(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None
        with contextlib.suppress(NodeExistsError):
            await self._meta.create(paths.topic_id(info.topic_id), name.encode(), make_parents=True)
        self._put(info)
        self._fire()
        return info

    async def delete(self, name: str) -> TopicInfo:
        """Remove the topic's metadata (its partition logs are deleted by the caller)."""
        while True:
            info, version = await self._read_versioned(name)
            try:
                await self._meta.delete(paths.topic(name), version)
                break
            except BadVersionError:
                continue
            except NoNodeError:
                raise self._unknown(name) from None
        with contextlib.suppress(NoNodeError):
            await self._meta.delete(paths.topic_id(info.topic_id))
        self._drop(name)
        self._fire()
        return info

    async def add_partitions(
        self, name: str, total: int, *, validate_only: bool = False,
        check: Callable[[TopicInfo], tuple[tuple[int, ...], ...]] | None = None,
    ) -> TopicInfo:
        """Grow to `total` partitions. `check(info)`, given the current topic, validates a manual
        assignment for the new partitions and returns it (raising KafkaApiError to refuse)."""

        def mutate(info: TopicInfo) -> TopicInfo:
            if total < info.partitions:
                raise _err(ErrorCode.INVALID_PARTITIONS, f"The topic {name} currently has {info.partitions} "
                                                         f"partition(s); {total} would not be an increase.")
            if total == info.partitions:
                raise _err(ErrorCode.INVALID_PARTITIONS, f"Topic already has {info.partitions} partition(s).")
            if total > MAX_PARTITIONS:
                raise _err(ErrorCode.INVALID_PARTITIONS, f"Number of partitions {total} is above the limit of "
                                                         f"{MAX_PARTITIONS} per topic.")
            added = check(info) if check is not None else ()
            preferred = info.preferred
            if added or preferred:
                # Partitions without a manual assignment keep an empty preference.
                preferred = preferred + ((),) * (info.partitions - len(preferred)) + added
            return dataclasses.replace(info, partitions=total, preferred=preferred)

        return await self._update(name, mutate, validate_only)

    async def alter_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> TopicInfo:
        """Replace the topic's whole set of overrides (validated)."""
        new = check_configs(dict(configs))
        return await self._update(name, lambda info: dataclasses.replace(info, configs=new), validate_only)

    async def modify_configs(
        self, name: str, mutate: Callable[[dict[str, str]], dict[str, str]], *, validate_only: bool = False
    ) -> TopicInfo:
        """Read-modify-write the overrides (compare-and-set, retried on a concurrent change)."""

        def apply(info: TopicInfo) -> TopicInfo:
            new = check_configs(dict(mutate(dict(info.configs))))
            return dataclasses.replace(info, configs=new)

        return await self._update(name, apply, validate_only)

    # -- internals --

    def _unknown(self, name: str) -> KafkaApiError:
        return _err(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")

    async def _read_versioned(self, name: str) -> tuple[TopicInfo, int]:
        try:
            data, stat = await self._meta.get(paths.topic(name))
        except NoNodeError:
            raise self._unknown(name) from None
        return TopicInfo.from_bytes(name, data), stat.version

    async def _update(self, name: str, mutate: Callable[[TopicInfo], TopicInfo], validate_only: bool) -> TopicInfo:
        check_name(name)
        while True:
            info, version = await self._read_versioned(name)
            new = mutate(info)
            if validate_only:
                return new
            try:
                await self._meta.set(paths.topic(name), new.to_bytes(), version)
            except BadVersionError:
                continue
            except NoNodeError:
                raise self._unknown(name) from None
            self._put(new)
            self._fire()
            return new

    async def _read(self, name: str) -> TopicInfo | None:
        try:
            data, _ = await self._meta.get(paths.topic(name))
        except NoNodeError:
            return None
        return TopicInfo.from_bytes(name, data)

    def _put(self, info: TopicInfo) -> None:
        old = self._by_name.get(info.name)
        if old is not None and old.topic_id != info.topic_id:
            self._by_id.pop(old.topic_id, None)
        self._by_name[info.name] = info
        self._by_id[info.topic_id] = info

    def _drop(self, name: str) -> None:
        old = self._by_name.pop(name, None)
        if old is not None:
            self._by_id.pop(old.topic_id, None)

    def _fire(self) -> None:
        for cb in list(self._listeners):
            try:
                cb()
            except Exception:
                log.exception("topic listener failed")

    # -- watches: callbacks only mark work; one task does it --

    def _on_children(self, event: WatchEvent) -> None:
        self._children_watched = False
        self._kick.set()

    def _on_topic(self, event: WatchEvent) -> None:
        name = event.path.rsplit("/", 1)[1]
        self._watched.discard(name)
        if event.type is not EventType.SESSION_LOST:
            self._stale.add(name)
        self._kick.set()

    async def _refresh_loop(self) -> None:
        retry = Retry(REFRESH_BACKOFF, clock=self._clock)
        while not self._closed:
            await self._kick.wait()
            self._kick.clear()
            try:
                await self._refresh()
                retry.reset()
            except asyncio.CancelledError:
                raise
            except (MetaError, OSError, ValueError) as e:
                log.warning("topic registry refresh failed (retrying): %r", e)
                self._children_watched = False
                self._watched.clear()
                await retry.pause()
                self._kick.set()

    async def _refresh(self) -> None:
        # A watch is marked armed *before* the call that arms it: its one-shot event may be
        # delivered before this coroutine resumes, and must then leave it marked unarmed.
        watch_children = not self._children_watched
        self._children_watched = True
        try:
            names = set(await self._meta.children(paths.TOPICS, watch=self._on_children if watch_children else None))
        except BaseException:
            if watch_children:
                self._children_watched = False
            raise
        changed = False
        for gone in set(self._by_name) - names:
            self._drop(gone)
            self._watched.discard(gone)
            changed = True
        todo = (names - set(self._by_name)) | (self._stale & names) | (names - self._watched)
        self._stale -= todo
        for name in sorted(todo):
            watch = None if name in self._watched else self._on_topic
            self._watched.add(name)
            try:
                data, _ = await self._meta.get(paths.topic(name), watch=watch)
            except NoNodeError:
                if watch is not None:
                    self._watched.discard(name)
                if name in self._by_name:
                    self._drop(name)
                    changed = True
                continue
            except BaseException:
                if watch is not None:
                    self._watched.discard(name)
                raise
            info = TopicInfo.from_bytes(name, data)
            if self._by_name.get(info.name) != info:
                self._put(info)
                changed = True
        if changed:
            self._fire()
