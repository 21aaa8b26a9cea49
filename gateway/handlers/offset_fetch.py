"""OffsetFetch (v1-9: one group up to v7, many from v8; require_stable from v7)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from coordinator.group.offsets import FetchedOffset
from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.group_lookup import group_coordinator
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse

R = OffsetFetchResponse


async def _fetch(
    ctx: RequestContext, group_id: str, partitions: list[tuple[str, int]] | None, require_stable: bool
) -> tuple[int, list[FetchedOffset]]:
    try:
        coord = await group_coordinator(ctx, group_id)
        return coord.fetch_offsets(group_id, partitions, require_stable)
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
            parts = None if g.topics is None else [(t.name, p) for t in g.topics for p in t.partition_indexes]
            err, found = await _fetch(ctx, g.group_id, parts, stable)
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
