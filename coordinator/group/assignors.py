"""The consumer group protocol's server-side assignors (KIP-848): `uniform` (Kafka's default) and
`range`. Both are pure functions of the members' subscriptions, the topics' partition counts and,
for stickiness, the previous target assignment."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

Assignment = dict[uuid.UUID, set[int]]


@dataclass(frozen=True)
class AssignorMember:
    member_id: str
    instance_id: str | None
    topics: frozenset[str]  # resolved subscription (names and regex matches) present in metadata


@dataclass(frozen=True)
class TopicMeta:
    topic_id: uuid.UUID
    partitions: int


def uniform(
    members: list[AssignorMember], topics: Mapping[str, TopicMeta], previous: Mapping[str, Assignment]
) -> dict[str, Assignment]:
    """Every subscribed partition to one subscriber, counts balanced (no member more than one
    above another that could take the partition), keeping each member's previous partitions
    where the balance allows (Kafka's UniformAssignor's goals)."""
    ids = {t.topic_id: name for name, t in topics.items()}
    owner: dict[tuple[str, int], str] = {}
    counts: dict[str, int] = {m.member_id: 0 for m in members}
    eligible: dict[str, list[str]] = {}
    for name in sorted(topics):
        eligible[name] = sorted(m.member_id for m in members if name in m.topics)
    total = sum(topics[n].partitions for n, subs in eligible.items() if subs)
    quota = -(-total // len(members)) if members else 0  # ceiling: nobody keeps more than this
    by_id = {m.member_id: m for m in members}
    for mid, prev in sorted(previous.items()):
        m = by_id.get(mid)
        if m is None:
            continue
        for tid, parts in sorted(prev.items(), key=lambda kv: ids.get(kv[0], "")):
            tname = ids.get(tid)
            if tname is None or tname not in m.topics:
                continue
            for p in sorted(parts):
                if p < topics[tname].partitions and (tname, p) not in owner and counts[mid] < quota:
                    owner[(tname, p)] = mid
                    counts[mid] += 1
    for name, subs in eligible.items():
        if not subs:
            continue
        for p in range(topics[name].partitions):
            if (name, p) not in owner:
                best = min(subs, key=lambda s: (counts[s], s))
                owner[(name, p)] = best
                counts[best] += 1
    # Move partitions from the fullest to the emptiest eligible member until balanced.
    moved = True
    while moved:
        moved = False
        for tp, mid in sorted(owner.items()):
            best = min(eligible[tp[0]], key=lambda s: (counts[s], s))
            if counts[best] < counts[mid] - 1:
                owner[tp] = best
                counts[mid] -= 1
                counts[best] += 1
                moved = True
    out: dict[str, Assignment] = {m.member_id: {} for m in members}
    for (name, p), mid in owner.items():
        out[mid].setdefault(topics[name].topic_id, set()).add(p)
    return out


def range_(
    members: list[AssignorMember], topics: Mapping[str, TopicMeta], previous: Mapping[str, Assignment]
) -> dict[str, Assignment]:
    """Per topic, contiguous ranges of partitions to its subscribers in member order, the first
    ones taking one more when the count does not divide (Kafka's RangeAssignor)."""
    out: dict[str, Assignment] = {m.member_id: {} for m in members}
    for name in sorted(topics):
        subs = sorted((m for m in members if name in m.topics), key=lambda m: (m.instance_id or m.member_id))
        if not subs:
            continue
        n = topics[name].partitions
        per, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            size = per + (1 if i < extra else 0)
            if size:
                out[m.member_id][topics[name].topic_id] = set(range(start, start + size))
            start += size
    return out


ASSIGNORS = {"uniform": uniform, "range": range_}
