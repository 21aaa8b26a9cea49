"""What the group handlers share: the coordinator of a request's group, the member's
client_host, whether a committed partition exists, the offsets a commit asks for and a
described member's assignment. Kept beside the handlers (not in
gateway/groups.py) because they read the request context, which the coordinators' glue
below never sees."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, TypeVar

from coordinator.group.coordinator import GroupCoordinator
from coordinator.group.group import OffsetAndMetadata
from gateway.context import RequestContext
from kafka_wire.errors import ErrorCode


async def group_coordinator(ctx: RequestContext, group_id: str) -> GroupCoordinator:
    return await ctx.services.group_coordinators().coordinator_for(group_id)


def client_host(ctx: RequestContext) -> str:
    """Kafka's member client_host: "/" + the peer's address."""
    host = ctx.client_address.rsplit(":", 1)[0]
    return "/" + host.strip("[]")


class _Partition(Protocol):
    @property
    def partition_index(self) -> int: ...


class _Topic(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Iterable[_Partition]: ...


T = TypeVar("T")
P = TypeVar("P")


def errors_by_topic(
    topics: Iterable[_Topic], errors: Mapping[tuple[str, int], int],
    topic: Callable[[str, list[P]], T], partition: Callable[[int, int], P],
) -> list[T]:
    """The response's topics in request order, each partition carrying its error from `errors`
    (keyed by (topic, partition)): the shape OffsetCommit and OffsetDelete answer in."""
    return [
        topic(t.name, [partition(p.partition_index, errors[(t.name, p.partition_index)]) for p in t.partitions])
        for t in topics
    ]


def assigned_topics(
    assignment: Mapping[uuid.UUID, Iterable[int]], names: Mapping[uuid.UUID, str],
    topic: Callable[[uuid.UUID, str, list[int]], T],
) -> list[T]:
    """A member's assignment (topic id -> partitions) as a group describe answers it (consumer
    and share groups alike), by topic name, partitions sorted; a topic not in `names` (deleted
    since) is left out, as Kafka's topicPartitionsFromMap does."""
    return [topic(t, names[t], sorted(p)) for t, p in sorted(
        ((t, p) for t, p in assignment.items() if t in names), key=lambda tp: names[tp[0]])]


class _TopicById(Protocol):
    @property
    def topic_id(self) -> uuid.UUID: ...


async def topic_names(ctx: RequestContext, topics: Iterable[_TopicById]) -> dict[uuid.UUID, str]:
    """Topic id -> name of the topics a v10 OffsetCommit/OffsetFetch names that exist."""
    out: dict[uuid.UUID, str] = {}
    for t in topics:
        if t.topic_id not in out:
            info = await ctx.services.topics.get_by_id(t.topic_id)
            if info is not None:
                out[t.topic_id] = info.name
    return out


async def partition_exists(ctx: RequestContext, topic: str, partition: int) -> bool:
    info = await ctx.services.topics.get(topic)
    return info is not None and 0 <= partition < info.partitions


class _CommittedPartition(Protocol):
    @property
    def partition_index(self) -> int: ...
    @property
    def committed_offset(self) -> int: ...
    @property
    def committed_leader_epoch(self) -> int: ...
    @property
    def committed_metadata(self) -> str | None: ...


async def offsets_to_commit(
    ctx: RequestContext, topics: Iterable[tuple[str | None, Iterable[_CommittedPartition]]], *,
    leader_epochs: bool, retention_ms: int = -1,
) -> tuple[dict[tuple[str, int], OffsetAndMetadata], dict[tuple[str, int], int]]:
    """The offsets an OffsetCommit or TxnOffsetCommit asks for, by (topic, partition), and
    UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist (a topic named None, an
    unknown id, is left out). `leader_epochs`: the request version carries them;
    `retention_ms` >= 0 sets an expiry (OffsetCommit v2-4)."""
    now = int(time.time() * 1000)
    wanted: dict[tuple[str, int], OffsetAndMetadata] = {}
    errors: dict[tuple[str, int], int] = {}
    for name, partitions in topics:
        if name is None:
            continue
        for p in partitions:
            tp = (name, p.partition_index)
            if not await partition_exists(ctx, name, p.partition_index):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            wanted[tp] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if leader_epochs else -1,
                metadata=p.committed_metadata or "",
                commit_timestamp=now,
                expire_timestamp=now + retention_ms if retention_ms >= 0 else -1,
            )
    return wanted, errors
