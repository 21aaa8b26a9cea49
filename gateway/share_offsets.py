"""Share-partition state seen from elsewhere than the partition's owner.

A share group's coordinator (DescribeShareGroupOffsets, Alter/Delete, `quire admin`) is often
another gateway than the partitions' owners, and only an owner may write a partition's cursors.
So, through the metadata store, like committed offsets (coordinator/group/cursors.py):
- owners publish, per partition, {group: [SPSO, lag, in flight, finished after the SPSO]} to
  `/kafka/share-offsets/<topic id hex>/<partition>` a moment after it changes;
- Alter/DeleteShareGroupOffsets (the group empty) record wanted start offsets (-1: delete the
  state) in `/kafka/share-resets/<group hex>` as {"<topic id hex>:<partition>": offset}; the
  owner applies them to the partition's cursor when a share session of the group opens there,
  and DescribeShareGroupOffsets shows them until then.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from typing import TYPE_CHECKING

from coordinator.group.cursors import merge_group_offsets
from store.meta.api import MetaStore, NoNodeError

if TYPE_CHECKING:
    from coordinator.share.partition import SharePartition
    from gateway.partition.log import PartitionLog

log = logging.getLogger(__name__)

SHARE_OFFSETS = "/kafka/share-offsets"
SHARE_RESETS = "/kafka/share-resets"
DELETED = -1
PUBLISH_DELAY_S = 0.2  # changes within this are published together
Stats = list[int]  # [spso, lag, in flight, finished]


def offsets_node(topic_id: uuid.UUID, partition: int) -> str:
    return f"{SHARE_OFFSETS}/{topic_id.hex}/{partition}"


def resets_node(group_id: str) -> str:
    return f"{SHARE_RESETS}/{group_id.encode().hex()}"


def reset_key(topic_id: uuid.UUID, partition: int) -> str:
    return f"{topic_id.hex}:{partition}"


async def _read(meta: MetaStore, path: str) -> dict[str, object]:
    try:
        data, _ = await meta.get(path)
    except NoNodeError:
        return {}
    doc = json.loads(data or b"{}")
    return doc if isinstance(doc, dict) else {}


async def read_partition_states(meta: MetaStore, topic_id: uuid.UUID, partition: int) -> dict[str, Stats]:
    """{group: [spso, lag, in flight, finished]} as the partition's owner last published it."""
    return {g: [int(x) for x in v] for g, v in (await _read(meta, offsets_node(topic_id, partition))).items()
            if isinstance(v, list)}


async def published_partitions(meta: MetaStore) -> list[tuple[uuid.UUID, int]]:
    """Every partition some share-group state was published for."""
    out = []
    try:
        tids = await meta.children(SHARE_OFFSETS)
    except NoNodeError:
        return []
    for t in tids:
        with contextlib.suppress(NoNodeError):
            out += [(uuid.UUID(hex=t), int(p)) for p in await meta.children(f"{SHARE_OFFSETS}/{t}")]
    return out


async def read_resets(meta: MetaStore, group_id: str) -> dict[str, int]:
    return {k: int(v) for k, v in (await _read(meta, resets_node(group_id))).items() if isinstance(v, int)}


async def request_resets(meta: MetaStore, group_id: str, resets: dict[str, int]) -> None:
    await merge_group_offsets(meta, resets_node(group_id), resets, set())


async def clear_resets(meta: MetaStore, group_id: str, keys: set[str]) -> None:
    await merge_group_offsets(meta, resets_node(group_id), {}, keys)


def stats_of(sp: SharePartition, high_watermark: int) -> Stats:
    finished = sp.archived()
    lag = max(high_watermark - sp.spso - finished, 0)
    return [sp.spso, lag, sp.in_flight(), finished]


class SharePublisher:
    """Owner side: publish the states of the share-partitions that changed, batched."""

    def __init__(self, meta: MetaStore) -> None:
        self.meta = meta
        self._dirty: dict[tuple[uuid.UUID, int], dict[str, Stats | None]] = {}
        self._task: asyncio.Task[None] | None = None

    def note(self, plog: PartitionLog, group_id: str, stats: Stats | None) -> None:
        """`stats` None: the group's state on the partition is gone."""
        self._dirty.setdefault((plog.topic.topic_id, plog.partition), {})[group_id] = stats
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        await asyncio.sleep(PUBLISH_DELAY_S)
        dirty, self._dirty = self._dirty, {}
        for (tid, p), groups in dirty.items():
            updates = {g: s for g, s in groups.items() if s is not None}
            removals = {g for g, s in groups.items() if s is None}
            try:
                await merge_group_offsets(self.meta, offsets_node(tid, p), updates, removals)
            except Exception as e:
                log.info("share-partition states of %s-%d not published: %r", tid, p, e)
        if self._dirty:
            self._task = asyncio.get_running_loop().create_task(self._flush())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
