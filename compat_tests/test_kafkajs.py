"""kafkajs (npm, pinned by compat_tests/js/package-lock.json) against Quire, unchanged: an
idempotent producer, a two-member consumer group, and the admin client. Each scenario is a
node script in compat_tests/js/ that prints one JSON result line asserted on here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from compat_tests.support.clients import create_topic, run, unique
from compat_tests.support.targets import Target

JS = Path(__file__).resolve().parent / "js"
pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (JS / "node_modules" / "kafkajs").is_dir(),
    reason="node or kafkajs missing (compat_tests/install.sh)",
)
BOTH = pytest.mark.parametrize("target", ["standalone", "cluster"], indirect=True)


def node(script: str, timeout: float = 120.0, **args: Any) -> dict[str, Any]:
    out = run(["node", str(JS / script), json.dumps(args)], timeout=timeout, cwd=str(JS)).stdout.decode()
    return json.loads(out.strip().splitlines()[-1])


def read_back(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Any]]:
    """Everything in the topic, per partition, through a second client (confluent-kafka)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("probe"), "enable.auto.commit": False,
                  "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[Any]] = {p: [] for p in range(partitions)}
        eof: set[int] = set()
        while len(eof) < partitions:
            msg = c.poll(10)
            assert msg is not None, "no message or EOF within 10 s"
            part = int(msg.partition() or 0)
            if msg.error():
                eof.add(part)
                continue
            out[part].append((msg.offset(), msg.key(), msg.value(), list(msg.headers() or [])))
        return out
    finally:
        c.close()


@pytest.mark.compat(suite="produce-consume", client="kafkajs")
@BOTH
def test_idempotent_producer(target: Target) -> None:
    topic, n = unique("js-prod"), 25
    create_topic(target.bootstrap, topic, partitions=3)
    res = node("producer.js", bootstrap=target.bootstrap, topic=topic, partitions=3, perPartition=n)
    plain = sorted((a["partition"], a["baseOffset"], a["errorCode"]) for a in res["acks"] if not a.get("gzip"))
    gz = sorted((a["partition"], a["baseOffset"], a["errorCode"]) for a in res["acks"] if a.get("gzip"))
    assert plain == [(p, 0, 0) for p in range(3)]
    assert gz == [(p, n, 0) for p in range(3)]
    got = read_back(target.bootstrap, topic, 3)
    for p in range(3):
        assert [r[0] for r in got[p]] == list(range(n + 1))
        assert [(r[1], r[2]) for r in got[p][:n]] == [(f"k{p}-{i}".encode(), f"v{p}-{i}".encode()) for i in range(n)]
        assert [r[3] for r in got[p][:n]] == [[("seq", str(i).encode()), ("src", b"kafkajs")] for i in range(n)]
        assert got[p][n][1:3] == (f"z{p}".encode(), f"gz{p}".encode() * 50)


@pytest.mark.compat(suite="groups", client="kafkajs")
@BOTH
def test_consumer_group(target: Target) -> None:
    from confluent_kafka import Producer

    topic, group, partitions, n = unique("js-grp"), unique("js-g"), 4, 15
    create_topic(target.bootstrap, topic, partitions=partitions)
    prod = Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 5})
    for p in range(partitions):
        for i in range(n):
            prod.produce(topic, key=f"{p}", value=f"{p}:{i}", partition=p, headers=[("h", f"{i}".encode())])
    assert prod.flush(30) == 0
    res = node("consumer_group.js", bootstrap=target.bootstrap, topic=topic, groupId=group,
               expected=partitions * n)
    seen = res["seen"]
    assert sorted((m["partition"], m["offset"]) for m in seen) == [
        (p, o) for p in range(partitions) for o in range(n)
    ], "each message exactly once"
    for p in range(partitions):
        rows = [m for m in seen if m["partition"] == p]
        assert [m["value"] for m in rows] == [f"{p}:{i}" for i in range(n)], "in order"
        assert all(m["key"] == str(p) and m["headers"] == {"h": str(m["offset"])} for m in rows)
        assert len({m["member"] for m in rows}) == 1, "a partition is consumed by one member"
    # The last member's assignment covers every partition (the two got disjoint halves, or the
    # first left); committed offsets are the end of each partition.
    assigned = [set(v) for v in res["assignments"].values()]
    assert set().union(*assigned) == set(range(partitions))
    assert sorted((c["partition"], c["offset"]) for c in res["committed"]) == [(p, n) for p in range(partitions)]
    assert res["state"] == "Empty"


@pytest.mark.compat(suite="admin", client="kafkajs")
def test_admin_topics(target: Target) -> None:
    a, b = unique("js-adm-a"), unique("js-adm-b")
    res = node("admin.js", bootstrap=target.bootstrap, topicA=a, topicB=b)
    assert res["created"] is True
    assert res["duplicate"] in (False, "TOPIC_ALREADY_EXISTS")
    assert res["listed"] == sorted([a, b])
    assert sorted((t["name"], t["partitions"]) for t in res["metadata"]) == sorted([(a, [0, 1, 2]), (b, [0])])
    assert res["configs"]["retention.ms"] == {"value": "3600000", "isDefault": False}
    assert res["configs"]["cleanup.policy"] == {"value": "delete", "isDefault": True}
    assert res["offsets"] == [{"partition": p, "low": 0, "high": 0} for p in range(5)]
    assert res["afterDelete"] == []
