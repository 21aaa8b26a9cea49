"""DescribeLogDirs (v1-5): one log dir per gateway holding the partitions it owns, with sizes
from the segmented logs' metadata (bytes in their ledgers)."""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid

from gateway import paths
from gateway.context import RequestContext
from kafka_wire.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from store.managed.metadata import LogMetadata
from store.managed.names import log_path
from store.meta.api import MetaStore, NoNodeError

Topic = DescribeLogDirsResponse.DescribeLogDirsTopic
Part = DescribeLogDirsResponse.DescribeLogDirsPartition


async def partition_size(meta: MetaStore, log_name: str) -> int:
    try:
        data, _ = await meta.get(log_path(log_name))
    except NoNodeError:
        return 0
    return sum(li.size for li in LogMetadata.from_bytes(data).ledgers)


async def _size(ctx: RequestContext, topic_id: uuid.UUID, partition: int) -> int:
    """The open log's live size (its open ledger included) when held here, else from metadata."""
    log_of = getattr(ctx.services.partitions, "log_of", None)
    plog = log_of(topic_id, partition) if log_of is not None else None
    total_size = getattr(getattr(plog, "ml", None), "total_size", None)
    if total_size is not None:
        return int(total_size())
    return await partition_size(ctx.services.meta, paths.partition_log_name(topic_id, partition))


def _disk(path: str | None) -> tuple[int, int]:
    if not path or not os.path.isdir(path):
        return -1, -1
    usage = shutil.disk_usage(path)
    return usage.total, usage.free


async def describe_log_dirs(ctx: RequestContext, req: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    services = ctx.services
    me = services.node_id
    if req.topics is None:
        wanted = [(t, list(range(t.partitions))) for t in await services.topics.all()]
    else:
        wanted = []
        for rt in req.topics:
            info = await services.topics.get(rt.topic)
            if info is not None:
                wanted.append((info, [p for p in rt.partitions if 0 <= p < info.partitions]))
    topics: list[Topic] = []
    for info, parts in wanted:
        mine = [p for p in parts if services.cluster.leader_of(info.topic_id, p) == me]
        if not mine:
            continue
        sizes = await asyncio.gather(*(_size(ctx, info.topic_id, p) for p in mine))
        topics.append(Topic(name=info.name, partitions=[
            Part(partition_index=p, partition_size=s, offset_lag=0, is_future_key=False) for p, s in zip(mine, sizes)]))
    log_dir = services.config.data_dir or f"/quire/gateway-{me}"
    total, usable = await asyncio.to_thread(_disk, services.config.data_dir)
    return DescribeLogDirsResponse(results=[DescribeLogDirsResponse.DescribeLogDirsResult(
        log_dir=log_dir, topics=topics, total_bytes=total, usable_bytes=usable)])
