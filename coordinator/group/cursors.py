"""Committed offsets as durable cursors.

Coordinators and partition owners may be different gateways, and only a partition's owner may
write its log's cursors. So: each coordinator publishes its groups' committed offsets, batched,
to one metadata node per partition (`/kafka/group-offsets/<topic id hex>/<partition>`, JSON
{group: offset}, compare-and-set merged since several coordinators share a node); the owner of
the partition reads that node and moves one durable cursor per group (`group:<group id>`) on
the partition's segmented log. Retention then keeps whatever a group has not consumed, and
each cursor's backlog is the group's lag in entries.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping

from store.managed.log import ManagedLog
from store.managed.position import Position
from store.meta.api import BadVersionError, MetaStore, NodeExistsError, NoNodeError

log = logging.getLogger(__name__)

GROUP_OFFSETS = "/kafka/group-offsets"
CURSOR_PREFIX = "group:"
TopicPartition = tuple[str, int]


def offsets_path(topic_id: uuid.UUID, partition: int) -> str:
    return f"{GROUP_OFFSETS}/{topic_id.hex}/{partition}"


async def read_group_offsets(meta: MetaStore, topic_id: uuid.UUID, partition: int) -> tuple[dict[str, int], int]:
    """({group: committed offset}, node version or -1 if absent)."""
    try:
        data, stat = await meta.get(offsets_path(topic_id, partition))
    except NoNodeError:
        return {}, -1
    return ({str(k): int(v) for k, v in json.loads(data or b"{}").items()}, stat.version)


async def merge_group_offsets(
    meta: MetaStore, path: str, updates: Mapping[str, object], removals: set[str]
) -> None:
    """Set `updates` and drop `removals` in a {group: offset} node (or any JSON object node:
    share-partition states, resets), by compare-and-set."""
    for _ in range(50):
        try:
            data, stat = await meta.get(path)
        except NoNodeError:
            if not updates:
                return
            try:
                await meta.create(path, json.dumps(updates, sort_keys=True).encode(), make_parents=True)
                return
            except NodeExistsError:
                continue
        doc = json.loads(data or b"{}")
        for g in removals:
            doc.pop(g, None)
        doc.update(updates)
        try:
            await meta.set(path, json.dumps(doc, sort_keys=True).encode(), stat.version)
            return
        except (BadVersionError, NoNodeError):
            continue
    raise RuntimeError(f"could not update {path}: too much contention")


class OffsetPublisher:
    """Coordinator side: publish what changed since the last call."""

    def __init__(self, meta: MetaStore, topic_id_of: Callable[[str], Awaitable[uuid.UUID | None]]) -> None:
        self.meta = meta
        self.topic_id_of = topic_id_of
        self._published: dict[TopicPartition, dict[str, int]] = {}

    async def publish(self, committed: dict[str, dict[TopicPartition, int]]) -> int:
        """`committed`: every group of the loaded shards -> {(topic, partition): offset}.
        Returns the number of partition nodes written."""
        by_tp: dict[TopicPartition, dict[str, int]] = {}
        for group, offsets in committed.items():
            for tp, off in offsets.items():
                by_tp.setdefault(tp, {})[group] = off
        written = 0
        for tp in set(by_tp) | set(self._published):
            want = by_tp.get(tp, {})
            prev = self._published.get(tp, {})
            if want == prev:
                continue
            tid = await self.topic_id_of(tp[0])
            if tid is not None:
                changed = {g: o for g, o in want.items() if prev.get(g) != o}
                await merge_group_offsets(self.meta, offsets_path(tid, tp[1]), changed, set(prev) - set(want))
                written += 1
            if want:
                self._published[tp] = want
            else:
                self._published.pop(tp, None)
        return written

    def forget(self, groups: set[str]) -> None:
        """Groups whose shard moved away: their new coordinator publishes them from now on."""
        for tp in list(self._published):
            kept = {g: o for g, o in self._published[tp].items() if g not in groups}
            if kept:
                self._published[tp] = kept
            else:
                del self._published[tp]


class CursorMover:
    """Partition-owner side: make the log's group cursors follow the published offsets."""

    def __init__(self, meta: MetaStore) -> None:
        self.meta = meta
        self._applied: dict[tuple[uuid.UUID, int, int], int] = {}  # (tid, partition, id(log)) -> version
        # (tid, partition) -> {group: committed offset}, as last read: consumer lag, on scrape
        self.published: dict[tuple[uuid.UUID, int], dict[str, int]] = {}

    async def apply(
        self,
        topic_id: uuid.UUID,
        partition: int,
        ml: ManagedLog,
        position_of: Callable[[int], Awaitable[Position]],
    ) -> bool:
        """Move the cursors of one owned partition; False if nothing changed."""
        offsets, version = await read_group_offsets(self.meta, topic_id, partition)
        self.published[(topic_id, partition)] = offsets
        key = (topic_id, partition, id(ml))
        if self._applied.get(key) == version:
            return False
        for group, offset in offsets.items():
            name = CURSOR_PREFIX + group
            first_unconsumed = await position_of(offset)
            target = Position(first_unconsumed.ledger_id, first_unconsumed.entry_id - 1)
            cur = ml.cursors.get(name)
            if cur is None:
                await ml.open_cursor(name, first_unconsumed)
            elif target > cur.mark_delete:
                await cur.mark_delete_to(target)
            elif target < cur.mark_delete:
                await cur.seek(first_unconsumed)  # the group went back (offsets reset)
        for name in list(ml.cursors):
            if name.startswith(CURSOR_PREFIX) and name[len(CURSOR_PREFIX) :] not in offsets:
                await ml.delete_cursor(name)
        self._applied[key] = version
        return True
