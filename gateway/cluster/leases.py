"""Partition ownership leases: one ephemeral node per owned partition, {node_id} inside.

The lease only decides who *should* own a partition; safety comes from the log itself (opening
it fences the previous owner's ledger and changes its metadata by compare-and-set).
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid

from gateway import paths
from store.meta.api import BadVersionError, MetaStore, NodeExistsError, NoNodeError

log = logging.getLogger(__name__)


def lease_data(node_id: int) -> bytes:
    return json.dumps({"node_id": node_id}).encode()


async def lease_holder(meta: MetaStore, topic_id: uuid.UUID, partition: int) -> int | None:
    try:
        raw, _ = await meta.get(paths.owner(topic_id, partition))
    except NoNodeError:
        return None
    return int(json.loads(raw)["node_id"])


async def try_acquire(meta: MetaStore, topic_id: uuid.UUID, partition: int, node_id: int) -> bool:
    """Take the lease if it is free (or a stale one of this node id from an earlier session).
    False if another gateway holds it."""
    path = paths.owner(topic_id, partition)
    for _ in range(5):
        try:
            await meta.create(path, lease_data(node_id), ephemeral=True, make_parents=True)
            return True
        except NodeExistsError:
            pass
        try:
            raw, stat = await meta.get(path)
        except NoNodeError:
            continue
        holder = int(json.loads(raw)["node_id"])
        if stat.ephemeral_owner == meta.session_id:
            return True
        if holder != node_id:
            return False
        # This node id's lease from a previous process (killed before its session was reaped).
        log.info("removing stale lease %s of session %#x", path, stat.ephemeral_owner)
        with contextlib.suppress(NoNodeError, BadVersionError):
            await meta.delete(path, stat.version)
    return False


async def publish_epoch(
    meta: MetaStore, topic_id: uuid.UUID, partition: int, node_id: int, epoch: int
) -> None:
    """Put the owner's leader epoch in its lease, so every gateway's Metadata can name it."""
    path = paths.owner(topic_id, partition)
    try:
        _, stat = await meta.get(path)
    except NoNodeError:
        return
    if stat.ephemeral_owner != meta.session_id:
        return
    with contextlib.suppress(NoNodeError, BadVersionError):
        await meta.set(path, json.dumps({"node_id": node_id, "leader_epoch": epoch}).encode(), stat.version)


async def release(meta: MetaStore, topic_id: uuid.UUID, partition: int) -> None:
    """Delete the lease if this session holds it."""
    path = paths.owner(topic_id, partition)
    stat = await meta.exists(path)
    if stat is not None and stat.ephemeral_owner == meta.session_id:
        with contextlib.suppress(NoNodeError, BadVersionError):
            await meta.delete(path, stat.version)
