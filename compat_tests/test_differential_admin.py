"""Differential runs of the admin APIs tools call (issue 17): the same requests to Apache Kafka
and Quire, node ids normalised away, every error code and shape compared."""

from __future__ import annotations

import pytest

from compat_tests.support.allowlist import Differences
from compat_tests.support.clients import unique
from compat_tests.support.differential import Observations, run_both
from compat_tests.support.targets import Target
from compat_tests.support.wire import Wire
from kafka_wire.messages.describe_topic_partitions import DescribeTopicPartitionsRequest as DTP

pytestmark = pytest.mark.compat(suite="differential", client="raw protocol")

DESCRIBE_TOPIC_PARTITIONS = (75, 0)


def _dtp(w: Wire, names: dict[str, str], topics: list[str], limit: int = 2000,
         cursor: tuple[str, int] | None = None) -> Observations:
    """The answer with this run's topic names replaced by their roles (`names`)."""
    req = DTP(topics=[DTP.TopicRequest(name=t) for t in topics], response_partition_limit=limit,
              cursor=None if cursor is None else DTP.Cursor(topic_name=cursor[0], partition_index=cursor[1]))
    resp = w.call(DESCRIBE_TOPIC_PARTITIONS, req)
    nxt = resp.next_cursor
    return {
        "topics": [
            {"name": names.get(t.name or "", t.name), "error": int(t.error_code), "has_id": t.topic_id.int != 0, "internal": t.is_internal,
             "ops": t.topic_authorized_operations,
             "partitions": [(p.partition_index, int(p.error_code), p.leader_id >= 0, p.leader_epoch >= 0,
                             len(p.replica_nodes), p.isr_nodes == p.replica_nodes, p.eligible_leader_replicas,
                             p.last_known_elr, p.offline_replicas) for p in t.partitions]}
            for t in resp.topics
        ],
        "next_cursor": None if nxt is None else (names.get(nxt.topic_name, nxt.topic_name), nxt.partition_index),
    }


def describe_topic_partitions(bootstrap: str) -> Observations:
    base = unique("d-dtp")  # one prefix: no other run's topic sorts between a and b
    a, b = base + "-a", base + "-b"
    with Wire(bootstrap) as w:
        w.create(a, partitions=3)
        w.create(b, partitions=2)
        missing = a + "-missing"
        n = {a: "a", b: "b", missing: "missing"}
        return {
            "named": _dtp(w, n, [b, a]),
            "unknown_and_invalid": _dtp(w, n, [missing, "bad/name"]),
            "limit_mid_topic": _dtp(w, n, [a, b], limit=2),
            "limit_at_topic_end": _dtp(w, n, [a, b], limit=3),
            "from_cursor": _dtp(w, n, [a, b], limit=2, cursor=(a, 2)),
            "cursor_past_end": _dtp(w, n, [a], cursor=(a, 5)),
            "cursor_not_listed": _dtp(w, n, [b], cursor=(a, 0)),
            "cursor_negative": _dtp(w, n, [a], cursor=(a, -1)),
            "zero_limit": _dtp(w, n, [a], limit=0),
            # All topics from a cursor inside `a`: no other topic sorts between this run's two.
            "all_from_cursor": _dtp(w, n, [], limit=3, cursor=(a, 1)),
        }


def test_describe_topic_partitions(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, describe_topic_partitions)
