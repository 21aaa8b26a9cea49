"""Which live gateway should own each partition: a deterministic, even assignment.

Every gateway computes the same answer from (topic id, partition count, sorted live node ids),
so no coordinator is needed. Per topic, partitions are spread so that node loads differ by at
most one; which nodes take the extra partitions, and which node each partition prefers, come
from rendezvous (highest random weight) scores, so a membership change moves few partitions.
"""

from __future__ import annotations

import hashlib
import struct
import uuid
from collections.abc import Sequence
from functools import lru_cache

_TOPIC_SLOT = -1  # pseudo partition used to rank nodes for the topic's extra capacity


def score(topic_id: uuid.UUID, partition: int, node_id: int) -> int:
    """Stable across processes and Python runs (no hash() randomisation)."""
    key = topic_id.bytes + struct.pack(">qq", partition, node_id)
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")


def _ranked(topic_id: uuid.UUID, partition: int, nodes: Sequence[int]) -> list[int]:
    return sorted(nodes, key=lambda n: (score(topic_id, partition, n), n), reverse=True)


@lru_cache(maxsize=4096)
def _assign(topic_id: uuid.UUID, partitions: int, nodes: tuple[int, ...]) -> tuple[int, ...]:
    base, extra = divmod(partitions, len(nodes))
    capacity = dict.fromkeys(nodes, base)
    for n in _ranked(topic_id, _TOPIC_SLOT, nodes)[:extra]:
        capacity[n] += 1
    owners: list[int] = []
    for p in range(partitions):
        for n in _ranked(topic_id, p, nodes):
            if capacity[n] > 0:
                capacity[n] -= 1
                owners.append(n)
                break
    return tuple(owners)


def assign_topic(topic_id: uuid.UUID, partitions: int, nodes: Sequence[int],
                 preferred: Sequence[Sequence[int]] = ()) -> tuple[int, ...]:
    """The node id that should own each partition 0..partitions-1 (empty if no nodes). A
    partition with a manual assignment (`preferred[p]`, from CreateTopics/CreatePartitions) goes
    to the first live node it lists; the others are spread as above."""
    if not nodes or partitions <= 0:
        return ()
    owners = _assign(topic_id, partitions, tuple(sorted(set(nodes))))
    if not preferred:
        return owners
    live = set(nodes)
    out = list(owners)
    for p, replicas in enumerate(preferred[:partitions]):
        first = next((n for n in replicas if n in live), None)
        if first is not None:
            out[p] = first
    return tuple(out)


def assigned_node(topic_id: uuid.UUID, partitions: int, partition: int, nodes: Sequence[int],
                  preferred: Sequence[Sequence[int]] = ()) -> int | None:
    owners = assign_topic(topic_id, partitions, nodes, preferred)
    if 0 <= partition < len(owners):
        return owners[partition]
    return None
