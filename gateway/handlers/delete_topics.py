"""DeleteTopics (v1-6, by name, and by topic id from v6).

The registry removes the topic's metadata; the owning gateways' PartitionManagers then delete
the partition logs they hold; logs of partitions nobody owns are deleted here a little later."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import Counter

from gateway import paths
from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.services import GatewayServices
from gateway.topics.registry import TopicInfo
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from kafka_wire.primitives import ZERO_UUID
from store.managed.log import delete_log
from store.managed.names import log_path
from store.meta.api import MetaError

log = logging.getLogger(__name__)

Result = DeleteTopicsResponse.DeletableTopicResult
ORPHAN_CLEANUP_DELAY = 3.0  # let owners delete what they hold first
_cleanups: set[asyncio.Task[None]] = set()


async def _delete_orphans(services: GatewayServices, info: TopicInfo) -> None:
    await asyncio.sleep(ORPHAN_CLEANUP_DELAY)
    for p in range(info.partitions):
        name = paths.partition_log_name(info.topic_id, p)
        try:
            if await services.meta.exists(paths.owner(info.topic_id, p)) is not None:
                continue  # its owner deletes it
            if await services.meta.exists(log_path(name)) is None:
                continue
            await delete_log(services.meta, services.ledgers, name)
        except (MetaError, OSError) as e:
            log.info("deleting the log of %s-%d: %r", info.name, p, e)
    with contextlib.suppress(MetaError):
        if not await services.meta.children(f"{paths.OWNERS}/{info.topic_id.hex}"):
            await services.meta.delete(f"{paths.OWNERS}/{info.topic_id.hex}")


async def _delete(ctx: RequestContext, name: str) -> TopicInfo:
    services = ctx.services
    if not services.config.delete_topic_enable:
        raise KafkaApiError(int(ErrorCode.TOPIC_DELETION_DISABLED), "Topic deletion is disabled.")
    info = await services.topics.delete(name)
    task = asyncio.get_running_loop().create_task(_delete_orphans(services, info))
    _cleanups.add(task)
    task.add_done_callback(_cleanups.discard)
    return info


async def delete_topics(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    topics = ctx.services.topics
    wanted: list[tuple[str | None, uuid.UUID]] = (
        [(t.name, t.topic_id) for t in req.topics] if ctx.api_version >= 6 else [(n, ZERO_UUID) for n in req.topic_names])
    names = Counter(n for n, _ in wanted if n is not None)
    ids = Counter(i for n, i in wanted if n is None)
    out: list[Result] = []
    for name, tid in wanted:
        try:
            if name is not None and tid != ZERO_UUID:
                raise KafkaApiError(int(ErrorCode.INVALID_REQUEST), "Both topic name and id were set.")
            if (names[name] > 1) if name is not None else (ids[tid] > 1):
                raise KafkaApiError(int(ErrorCode.INVALID_REQUEST), "Duplicate topic name." if name is not None
                                    else "Duplicate topic id.")
            if name is None:
                found = await topics.get_by_id(tid) if tid != ZERO_UUID else None
                if found is None:
                    raise KafkaApiError(int(ErrorCode.UNKNOWN_TOPIC_ID), "This server does not host this topic ID.")
                name = found.name
            info = await _delete(ctx, name)
            out.append(Result(name=info.name, topic_id=info.topic_id, error_message=None))
        except KafkaApiError as e:
            out.append(Result(name=name, topic_id=tid, error_code=e.error_code, error_message=e.message))
    return DeleteTopicsResponse(responses=out)
