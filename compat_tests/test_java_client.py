"""The Java client (kafka-clients from Maven) through the harness's own program
(compat_tests/java/src/quire/compat): an idempotent acks=all KafkaProducer, KafkaConsumer in a
classic group (one member; two cooperative-sticky members across join and leave), and Admin."""

from __future__ import annotations

import concurrent.futures
import shutil
from collections import Counter

import pytest

from compat_tests.support.clients import create_topic, unique
from compat_tests.support.java_harness import one, only, run_harness
from compat_tests.support.targets import Target

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="java is not installed")
BOTH = pytest.mark.parametrize("target", ["standalone", "cluster"], indirect=True)


@pytest.mark.compat(suite="produce-consume", client="java-client")
@BOTH
def test_idempotent_producer_then_group_consumer(target: Target) -> None:
    topic, partitions, count = unique("jc-idem"), 4, 800
    create_topic(target.bootstrap, topic, partitions=partitions)
    acks = only(run_harness("produce", bootstrap=target.bootstrap, topic=topic, count=count,
                            partitions=partitions, compression="lz4"), "ack")
    assert [a["i"] for a in acks] == list(range(count))
    # Record i went to partition i % 4; offsets are dense and follow the send order.
    for p in range(partitions):
        mine = [a for a in acks if a["partition"] == p]
        assert [a["i"] for a in mine] == list(range(p, count, partitions))
        assert [a["offset"] for a in mine] == list(range(count // partitions))

    events = run_harness("consume", bootstrap=target.bootstrap, topic=topic, group=unique("jc-g"), count=count)
    records = only(events, "record")
    assert len(records) == count
    sent_at = {(a["partition"], a["offset"]): a["i"] for a in acks}
    for r in records:
        i = sent_at[(r["partition"], r["offset"])]
        assert (r["key"], r["value"], r["seq"]) == (f"k-{i}", f"v-{i}", str(i))
    for p in range(partitions):
        assert [r["offset"] for r in records if r["partition"] == p] == list(range(count // partitions))
    assert one(events, "committed")["offsets"] == {str(p): count // partitions for p in range(partitions)}


@pytest.mark.compat(suite="produce-consume", client="java-client")
@pytest.mark.parametrize("target", ["standalone"], indirect=True)
def test_consumer_of_many_partitions_with_fetch_sessions(target: Target) -> None:
    """The Java consumer keeps an incremental fetch session (KIP-227); with few records per poll
    it keeps dropping partitions that have buffered data from its fetches and adding them back
    (forgotten and added partitions of incremental requests) while the producer writes."""
    topic, partitions, count = unique("jc-sess"), 120, 1200
    create_topic(target.bootstrap, topic, partitions=partitions)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        consuming = pool.submit(run_harness, "consume", bootstrap=target.bootstrap, topic=topic,
                                group=unique("jc-sess-g"), count=count, **{"max.poll.records": 3})
        acks = only(run_harness("produce", bootstrap=target.bootstrap, topic=topic, count=count,
                                partitions=partitions), "ack")
        records = only(consuming.result(), "record")
    assert len(acks) == len(records) == count
    for p in range(partitions):
        offsets = [r["offset"] for r in records if r["partition"] == p]
        assert offsets == list(range(count // partitions)), (p, offsets)
    assert sorted(r["value"] for r in records) == sorted(f"v-{i}" for i in range(count))


@pytest.mark.compat(suite="groups", client="java-client")
@BOTH
@pytest.mark.parametrize("protocol", ["classic", "consumer", "classic+consumer"])
def test_cooperative_sticky_join_and_leave(target: Target, protocol: str) -> None:
    """classic: the cooperative-sticky assignor; consumer: KIP-848 (the gateway assigns, and
    revokes before it hands a partition to another member); classic+consumer: c1's classic group
    is upgraded when c2 joins with the consumer protocol, and downgraded when c2 leaves."""
    topic, group, partitions, count = unique("jc-coop"), unique("jc-cg"), 6, 600
    create_topic(target.bootstrap, topic, partitions=partitions)
    run_harness("produce", bootstrap=target.bootstrap, topic=topic, count=count, partitions=partitions)
    first, _, second = protocol.partition("+")
    events = run_harness("groups", bootstrap=target.bootstrap, topic=topic, group=group, count=count,
                         partitions=partitions, protocol=first, **{"protocol.c2": second or first})
    alone, shared, rejoined = only(events, "phase")
    at = {id(e): n for n, e in enumerate(events)}
    everything = list(range(partitions))
    assert alone["c1"] == everything
    # c2's join splits the partitions; incremental: c1 gives up only what moves to c2, in one
    # revocation, and is never stripped of the partitions it keeps.
    assert shared["c1"] and shared["c2"] and sorted(shared["c1"] + shared["c2"]) == everything
    assert abs(len(shared["c1"]) - len(shared["c2"])) <= 1
    c1_revoked = [e for e in only(events, "revoked") if e["consumer"] == "c1" and at[id(e)] < at[id(shared)]]
    assert [e["partitions"] for e in c1_revoked] == [shared["c2"]]
    assert not [e for e in only(events, "lost")]
    # c2 leaves: c1 keeps its partitions and is handed the rest.
    assert rejoined["c1"] == everything
    c1_after = [e for e in only(events, "revoked")
                if e["consumer"] == "c1" and at[id(shared)] < at[id(e)] < at[id(rejoined)]]
    assert c1_after == []
    # Each member's generation (its member epoch under the consumer protocol, where a member
    # still revoking keeps its older epoch) only moves forward.
    for consumer in ("c1", "c2"):
        generations = [e["generation"] for e in only(events, "assigned") if e["consumer"] == consumer]
        assert generations == sorted(generations)
    assert max(e["generation"] for e in only(events, "assigned")) >= 3

    records = only(events, "record")
    seen = Counter((r["partition"], r["offset"]) for r in records)
    per = count // partitions
    assert set(seen) == {(p, o) for p in everything for o in range(per)}
    assert max(seen.values()) == 1, [k for k, v in seen.items() if v > 1]
    assert {r["consumer"] for r in records} == {"c1", "c2"}
    for consumer in ("c1", "c2"):
        for p in everything:
            offs = [r["offset"] for r in records if r["consumer"] == consumer and r["partition"] == p]
            assert offs == sorted(offs)
    assert one(events, "committed")["offsets"] == {str(p): per for p in everything}


@pytest.mark.compat(suite="admin", client="java-client")
@BOTH
def test_admin_topics_configs_offsets(target: Target) -> None:
    topic = unique("jc-admin")
    events = run_harness("admin", bootstrap=target.bootstrap, topic=topic)
    cluster = one(events, "cluster")
    assert cluster["cluster_id"] and cluster["nodes"]
    if target.kind == "cluster":
        assert len(cluster["nodes"]) == 2
    node_ids = {n["id"] for n in cluster["nodes"]}
    assert cluster["controller"] in node_ids

    assert one(events, "create_again")["error"] == "TopicExistsException"
    assert one(events, "listed")["present"] is True
    described = one(events, "described")
    assert (described["name"], described["internal"]) == (topic, False)
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    assert all(p["leader"] in node_ids and p["isr"] >= 1 for p in described["partitions"])
    assert [p["partition"] for p in one(events, "grown")["partitions"]] == [0, 1, 2, 3]
    assert one(events, "grown")["topic_id"] == described["topic_id"]

    before = one(events, "configs_before")["configs"]
    after = one(events, "configs_after")["configs"]
    assert before["retention.ms"] == {"value": "86400000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert before["cleanup.policy"] == {"value": "delete", "source": "DEFAULT_CONFIG"}
    assert after["retention.ms"] == {"value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"}
    # max.message.bytes was set, then deleted: back to the broker default.
    assert after["max.message.bytes"]["source"] == "DEFAULT_CONFIG"
    assert after["max.message.bytes"] == before["max.message.bytes"]
    assert one(events, "bad_config")["error"] == "InvalidConfigurationException"

    base = 1_700_000_000_000
    offsets = one(events, "offsets_before")["offsets"]
    assert offsets["earliest"]["offset"] == 0
    assert offsets["latest"]["offset"] == 10
    assert offsets["max_timestamp"] == {"offset": 7, "timestamp": base + 100_000}
    assert offsets["ts_plus_2500"] == {"offset": 3, "timestamp": base + 3000}
    assert offsets["ts_future"]["offset"] == -1
    assert one(events, "deleted_records")["low_watermark"] == 4
    offsets = one(events, "offsets_after")["offsets"]
    assert (offsets["earliest"]["offset"], offsets["latest"]["offset"]) == (4, 10)
    assert offsets["ts_plus_2500"] == {"offset": 4, "timestamp": base + 4000}

    deleted = one(events, "deleted")
    assert deleted["present"] is False
    assert deleted["describe_error"] == "UnknownTopicOrPartitionException"


@pytest.mark.compat(suite="admin", client="java-client")
def test_admin_cluster_operations(target: Target) -> None:
    """Admin calls with nothing to do on Quire: describeTopics through DescribeTopicPartitions,
    preferred election not needed, no reassignment, no KRaft quorum, no features, no quotas."""
    events = run_harness("cluster-ops", bootstrap=target.bootstrap, topic=unique("jc-ops"))
    described = one(events, "described")
    owners = {p["partition"]: p["leader"] for p in described["partitions"]}
    assert sorted(owners) == [0, 1]
    assert all(p["replicas"] == [p["leader"]] and p["elr"] == [] for p in described["partitions"])
    assert one(events, "elected")["partitions"] == {"0": "ElectionNotNeededException", "1": "ElectionNotNeededException"}
    assert one(events, "reassignments")["count"] == 0
    assert one(events, "reassign_same")["error"] is None
    assert one(events, "reassign_ghost")["error"] == "InvalidReplicaAssignmentException"
    assert one(events, "reassign_cancel")["error"] == "NoReassignmentInProgressException"
    assert one(events, "quorum")["error"] == "UnsupportedVersionException"
    assert one(events, "features") == {**one(events, "features"), "finalized": ["transaction.version"],
                                          "supported": ["transaction.version"]}
    assert one(events, "update_feature")["error"] == "InvalidUpdateVersionException"
    assert one(events, "quotas")["count"] == 0
    assert one(events, "placed")["partitions"] == [True, True, True]
    misplaced = one(events, "misplaced")
    assert (misplaced["error"], misplaced["grow_error"]) == ("InvalidReplicaAssignmentException",) * 2


@pytest.mark.compat(suite="produce-consume", client="java-client")
def test_group_consumer_reads_a_compacted_topic(target: Target) -> None:
    """A changelog cleaned by the log cleaner (empty batches where every record went): the Java
    consumer reads the latest value per key at its original offsets and commits past the end."""
    import time

    from compat_tests.support.wire import Wire
    from kafka_wire.records.builder import NewRecord, build_batch

    topic = unique("jc-compact")
    create_topic(target.bootstrap, topic, config={"cleanup.policy": "compact", "segment.ms": "100",
                                                   "min.cleanable.dirty.ratio": "0.01"})
    writes = [(f"k{i % 4}".encode(), v) for v, n in ((b"a", 4), (b"b", 4)) for i in range(n)] + [(b"k1", b"c")]
    cleaned = [(4, b"k0", b"b"), (6, b"k2", b"b"), (7, b"k3", b"b"), (8, b"k1", b"c")]
    with Wire(target.bootstrap) as w:
        for k, v in writes:
            assert w.produce(topic, 0, build_batch([NewRecord(k, v)]))[0] == 0
        deadline = time.monotonic() + 120
        while w.records(topic, 0, 0, 8) != cleaned:  # the event: the cleaner's switch
            assert time.monotonic() < deadline
    events = run_harness("consume", bootstrap=target.bootstrap, topic=topic, group=unique("jc-cg"), count=4)
    got = [(r["offset"], r["key"], r["value"]) for r in only(events, "record")]
    assert got == [(o, k.decode(), v.decode()) for o, k, v in cleaned]
    assert one(events, "committed")["offsets"] == {"0": 9}
