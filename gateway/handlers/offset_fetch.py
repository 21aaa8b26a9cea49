"""OffsetFetch (v1-10: one group up to v7, many from v8; require_stable from v7; a consumer-protocol
member's id and epoch from v9; topics by id from v10)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TypeVar

from coordinator.group.offsets import FetchedOffset
from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.group_lookup import group_coordinator, topic_names
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse

R = OffsetFetchResponse


async def _fetch(
    ctx: RequestContext, group_id: str, partitions: list[tuple[str, int]] | None, require_stable: bool,
    member_id: str | None = None, member_epoch: int = -1,
) -> tuple[int, list[FetchedOffset]]:
    try:
        coord = await group_coordinator(ctx, group_id)
        return coord.fetch_offsets(group_id, partitions, require_stable, member_id, member_epoch)
    except KafkaApiError as e:
        return e.error_code, []


T = TypeVar("T")
P = TypeVar("P")


def _by_topic(
    found: list[FetchedOffset], topic: Callable[..., T], partition: Callable[..., P], with_epoch: bool = True
) -> list[T]:
    """The offsets grouped by topic, as the response's topic and partition structs (the v8+
    group form and the older top-level form differ only in their struct types)."""
    grouped: dict[str, list[FetchedOffset]] = {}
    for f in found:
        grouped.setdefault(f.topic, []).append(f)
    return [
        topic(
            name=name,
            partitions=[
                partition(
                    partition_index=f.partition,
                    committed_offset=f.offset,
                    committed_leader_epoch=f.leader_epoch if with_epoch else -1,
                    metadata=f.metadata,
                    error_code=f.error,
                )
                for f in fs
            ],
        )
        for name, fs in grouped.items()
    ]


async def offset_fetch(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    v = ctx.api_version
    stable = req.require_stable if v >= 7 else False
    if v >= 8:
        groups = []
        for g in req.groups:
            member = (g.member_id, g.member_epoch) if v >= 9 else (None, -1)
            if v >= 10:
                groups.append(await _fetch_by_id(ctx, g, stable, *member))
                continue
            parts = None if g.topics is None else [(t.name, p) for t in g.topics for p in t.partition_indexes]
            err, found = await _fetch(ctx, g.group_id, parts, stable, *member)
            groups.append(
                R.OffsetFetchResponseGroup(
                    group_id=g.group_id,
                    error_code=err,
                    topics=_by_topic(found, R.OffsetFetchResponseTopics, R.OffsetFetchResponsePartitions),
                )
            )
        return OffsetFetchResponse(groups=groups)
    parts = None if req.topics is None else [(t.name, p) for t in req.topics for p in t.partition_indexes]
    err, found = await _fetch(ctx, req.group_id, parts, stable)
    if err and v < 2 and parts is not None:
        # v1 has no group-level error: every partition carries it.
        found = [FetchedOffset(t, p, error=err) for t, p in parts]
    return OffsetFetchResponse(
        error_code=err if v >= 2 else ErrorCode.NONE,
        topics=_by_topic(found, R.OffsetFetchResponseTopic, R.OffsetFetchResponsePartition, with_epoch=v >= 5),
    )


async def _fetch_by_id(
    ctx: RequestContext, g: OffsetFetchRequest.OffsetFetchRequestGroup, stable: bool, member_id: str | None,
    member_epoch: int,
) -> OffsetFetchResponse.OffsetFetchResponseGroup:
    """v10: topics named by id; an unknown id's partitions answer UNKNOWN_TOPIC_ID."""
    names = await topic_names(ctx, g.topics or [])
    parts = None if g.topics is None else [
        (names[t.topic_id], p) for t in g.topics if t.topic_id in names for p in t.partition_indexes]
    err, found = await _fetch(ctx, g.group_id, parts, stable, member_id, member_epoch)
    ids: dict[str, uuid.UUID] = {n: i for i, n in names.items()}
    for name in {f.topic for f in found} - set(ids):
        info = await ctx.services.topics.get(name)
        if info is not None:
            ids[name] = info.topic_id
    topics = [
        R.OffsetFetchResponseTopics(topic_id=ids[t.name], partitions=t.partitions)
        for t in _by_topic(found, R.OffsetFetchResponseTopics, R.OffsetFetchResponsePartitions)
        if t.name in ids
    ]
    if not err:
        for t in g.topics or []:
            if t.topic_id not in names:
                topics.append(R.OffsetFetchResponseTopics(topic_id=t.topic_id, partitions=[
                    R.OffsetFetchResponsePartitions(partition_index=p, committed_offset=-1, metadata="",
                                                    error_code=ErrorCode.UNKNOWN_TOPIC_ID)
                    for p in t.partition_indexes]))
    return R.OffsetFetchResponseGroup(group_id=g.group_id, error_code=err, topics=topics)
