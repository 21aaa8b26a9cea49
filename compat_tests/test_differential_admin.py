"""Differential runs of the admin APIs tools call (issue 17): the same requests to Apache Kafka
and Quire, node ids normalised away, every error code and shape compared."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from compat_tests.support.allowlist import Differences
from compat_tests.support.clients import unique
from compat_tests.support.differential import Observations, run_both
from compat_tests.support.targets import Target
from compat_tests.support.wire import PRODUCE, Wire
from kafka_wire.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest as APR
from kafka_wire.messages.create_partitions import CreatePartitionsRequest as CP
from kafka_wire.messages.create_topics import CreateTopicsRequest as CT
from kafka_wire.messages.describe_client_quotas import DescribeClientQuotasRequest as DCQ
from kafka_wire.messages.describe_quorum import DescribeQuorumRequest as DQ
from kafka_wire.messages.describe_topic_partitions import DescribeTopicPartitionsRequest as DTP
from kafka_wire.messages.elect_leaders import ElectLeadersRequest as EL
from kafka_wire.messages.list_partition_reassignments import ListPartitionReassignmentsRequest as LPR
from kafka_wire.messages.produce import ProduceRequest as P
from kafka_wire.messages.update_features import UpdateFeaturesRequest as UF
from kafka_wire.records.builder import NewRecord, build_batch
from kafka_wire.records.compression import Compression

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


def _errors(results: list[Any], key: str, sub: str, ident: str, subs: dict[str, str]) -> list[Any]:
    """[(name, [(partition, code, message)])] with node ids in messages replaced by roles."""
    def norm(m: str | None) -> str | None:
        for k, v in subs.items():
            m = None if m is None else m.replace(k, v)
        return None if m is None else re.sub(r"controller \d+", "controller N", m)
    return [(norm(k) if isinstance(k := getattr(r, key), str) else k, [(getattr(p, ident), int(p.error_code), norm(p.error_message)) for p in getattr(r, sub)])
            for r in results]


def cluster_operations(bootstrap: str) -> Observations:
    """ElectLeaders, List/AlterPartitionReassignments, DescribeQuorum, UpdateFeatures and
    DescribeClientQuotas on a cluster where none of them has anything to do."""
    topic = unique("d-noop")
    with Wire(bootstrap) as w:
        w.create(topic, partitions=2)
        (md,) = w.metadata([topic]).topics
        own = md.partitions[0].leader_id
        ghost = max(b.node_id for b in w.metadata([topic]).brokers) + 100
        subs = {f"{topic}": "T", f"broker {ghost}": "broker GHOST", f"broker {own}": "broker OWN"}
        out: Observations = {}
        for v in (0, 1, 2):
            el = w.call((43, v), EL(election_type=0, topic_partitions=[
                EL.TopicPartitions(topic=topic, partitions=[0, 1, 7]),
                EL.TopicPartitions(topic=topic + "-none", partitions=[0])]))
            out[f"elect_leaders.v{v}"] = (int(el.error_code), _errors(el.replica_election_results, "topic",
                                                                     "partition_result", "partition_id", subs))
        el = w.call((43, 2), EL(election_type=1, topic_partitions=[EL.TopicPartitions(topic=topic, partitions=[1])]))
        out["elect_leaders.unclean"] = (int(el.error_code), _errors(el.replica_election_results, "topic",
                                                                   "partition_result", "partition_id", subs))
        el = w.call((43, 2), EL(election_type=5, topic_partitions=[EL.TopicPartitions(topic=topic, partitions=[1])]))
        out["elect_leaders.bad_type"] = (int(el.error_code), _errors(el.replica_election_results, "topic",
                                                                    "partition_result", "partition_id", subs))
        el = w.call((43, 2), EL(election_type=0, topic_partitions=None))
        out["elect_leaders.all"] = (int(el.error_code), [r.partition_result for r in el.replica_election_results
                                                         if r.topic == topic])
        lpr = w.call((46, 0), LPR(topics=None))
        out["list_reassignments.all"] = (int(lpr.error_code), lpr.error_message, lpr.topics)
        lpr = w.call((46, 0), LPR(topics=[LPR.ListPartitionReassignmentsTopics(name=topic, partition_indexes=[0, 9])]))
        out["list_reassignments.topic"] = (int(lpr.error_code), lpr.error_message, lpr.topics)
        for label, reps in (("same", [own]), ("ghost", [ghost]), ("ghost_and_own", [own, ghost]),
                            ("twice", [own, own]), ("empty", []), ("cancel", None)):
            for v in (0, 1):
                apr = w.call((45, v), APR(topics=[APR.ReassignableTopic(name=topic, partitions=[
                    APR.ReassignablePartition(partition_index=0, replicas=reps)])]))
                out[f"alter_reassignments.{label}.v{v}"] = (int(apr.error_code), apr.error_message, _errors(
                    apr.responses, "name", "partitions", "partition_index", subs))
        apr = w.call((45, 1), APR(topics=[
            APR.ReassignableTopic(name=topic + "-none", partitions=[APR.ReassignablePartition(partition_index=0,
                                                                                               replicas=[own])]),
            APR.ReassignableTopic(name=topic, partitions=[APR.ReassignablePartition(partition_index=9,
                                                                                     replicas=[own])])]))
        out["alter_reassignments.unknown"] = (int(apr.error_code), _errors(apr.responses, "name", "partitions",
                                                                           "partition_index", subs))
        dq = w.call((55, 2), DQ(topics=[DQ.TopicData(topic_name=topic, partitions=[DQ.PartitionData(partition_index=0)])]))
        out["describe_quorum.other_topic"] = (int(dq.error_code), _errors(dq.topics, "topic_name", "partitions",
                                                                          "partition_index", subs), dq.nodes)
        dq = w.call((55, 2), DQ(topics=[DQ.TopicData(topic_name="__cluster_metadata",
                                                     partitions=[DQ.PartitionData(partition_index=0)])]))
        out["describe_quorum.metadata"] = (int(dq.error_code), [[int(p.error_code) for p in t.partitions]
                                                                for t in dq.topics])
        for v in (0, 1, 2):
            for label, level in (("upgrade", 1), ("delete", 0), ("negative", -1)):
                uf = w.call((57, v), UF(feature_updates=[UF.FeatureUpdateKey(
                    feature="quire.test.version", max_version_level=level, allow_downgrade=v == 0 and level <= 0,
                    upgrade_type=2 if v > 0 and level <= 0 else 1)]))
                out[f"update_features.{label}.v{v}"] = (int(uf.error_code), _errors(
                    [uf], "error_code", "results", "feature", subs), re.sub(r"controller \d+", "controller N",
                                                                           uf.error_message or ""))
            uf = w.call((57, v), UF(feature_updates=[]))
            out[f"update_features.none.v{v}"] = (int(uf.error_code), uf.error_message, uf.results)
        C = DCQ.ComponentData
        for label, comps in (
                ("all", []), ("user_default", [C(entity_type="user", match_type=1, match=None)]),
                ("exact", [C(entity_type="client-id", match_type=0, match="c1")]),
                ("bad_type", [C(entity_type="bogus", match_type=0, match="x")]),
                ("bad_match", [C(entity_type="user", match_type=7, match=None)]),
                ("twice", [C(entity_type="user", match_type=0, match="u"), C(entity_type="user", match_type=1,
                                                                               match=None)]),
                ("exact_null", [C(entity_type="user", match_type=0, match=None)]),
                ("ip_and_user", [C(entity_type="ip", match_type=2, match=None),
                                 C(entity_type="user", match_type=2, match=None)]),
                ("default_with_match", [C(entity_type="client-id", match_type=1, match="zz")])):
            for v in (0, 1):
                q = w.call((48, v), DCQ(components=comps, strict=label == "exact"))
                out[f"client_quotas.{label}.v{v}"] = (int(q.error_code), q.error_message, q.entries)
        return out


def test_cluster_operations(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, cluster_operations)


def manual_assignments(bootstrap: str) -> Observations:
    """CreateTopics and CreatePartitions with explicit replica assignments: accepted when they
    name live brokers (the one broker / gateway here), refused with Kafka's errors otherwise."""
    base = unique("d-asg")
    out: Observations = {}
    with Wire(bootstrap) as w:
        probe = base + "-probe"
        w.create(probe)
        me = w.metadata([probe]).topics[0].partitions[0].leader_id
        ghost = me + 100
        subs = {f"broker {ghost}": "broker GHOST", f"broker {me}": "broker OWN", base: "BASE"}

        def norm(m: str | None) -> str | None:
            for k, v in subs.items():
                m = None if m is None else m.replace(k, v)
            return m

        def create(label: str, asg: list[tuple[int, list[int]]], np: int = -1, rf: int = -1, v: int = 7,
                   validate: bool = False) -> str:
            name = f"{base}-{label}"
            resp = w.call((19, v), CT(timeout_ms=30000, validate_only=validate, topics=[CT.CreatableTopic(
                name=name, num_partitions=np, replication_factor=rf,
                assignments=[CT.CreatableReplicaAssignment(partition_index=i, broker_ids=b) for i, b in asg])]))
            (t,) = resp.topics
            out[f"create.{label}"] = (int(t.error_code), norm(t.error_message), t.num_partitions,
                                      t.replication_factor)
            return name

        for label, asg, kw in (
                ("validate", [(0, [me])], {"validate": True}), ("num_partitions_set", [(0, [me])], {"np": 2}),
                ("rf_set", [(0, [me])], {"rf": 1}), ("both_set", [(0, [me])], {"np": 1, "rf": 1}),
                ("ghost", [(0, [ghost])], {}), ("twice", [(0, [me, me])], {}), ("empty", [(0, [])], {}),
                ("ghost_second", [(0, [me]), (1, [ghost])], {}), ("same_partition", [(0, [me]), (0, [me])], {}),
                ("gap", [(0, [me]), (2, [me])], {}), ("from_one", [(1, [me])], {}), ("v4", [(0, [me])], {"v": 4})):
            create(label, asg, **kw)  # type: ignore[arg-type]
        name = create("ok", [(0, [me]), (1, [me])])
        ok = out["create.ok"]
        create("ok", [(0, [ghost])])  # already exists: reported before the assignment is checked
        out["create.exists_with_assignment"], out["create.ok"] = out["create.ok"], ok
        w.wait_leaders(name, 2)
        (t,) = w.metadata([name]).topics
        out["created.partitions"] = [(p.partition_index, p.leader_id == me, p.replica_nodes == [me])
                                     for p in t.partitions]

        def grow(label: str, count: int, asg: list[list[int]] | None, validate: bool = False) -> None:
            resp = w.call((37, 3), CP(timeout_ms=30000, validate_only=validate, topics=[CP.CreatePartitionsTopic(
                name=name, count=count,
                assignments=None if asg is None else [CP.CreatePartitionsAssignment(broker_ids=b) for b in asg])]))
            (r,) = resp.results
            out[f"grow.{label}"] = (int(r.error_code), norm(r.error_message))

        grow("validate", 3, [[me]], validate=True)
        grow("too_few", 4, [[me]])
        grow("too_many", 3, [[me], [me]])
        grow("none_listed", 3, [])
        grow("ghost", 3, [[ghost]])
        grow("twice", 3, [[me, me]])
        grow("empty", 3, [[]])
        grow("two_replicas", 3, [[me, ghost]])
        grow("shrink", 1, [[me]])
        grow("same", 2, None)
        grow("ok", 3, [[me]])
        w.wait_leaders(name, 3)
        (t,) = w.metadata([name]).topics
        out["grown.partitions"] = [(p.partition_index, p.leader_id == me) for p in t.partitions]
    return out


def test_manual_assignments(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, manual_assignments)


def _produce_full(w: Wire, topic: str, records: bytes, now: int) -> Observations:
    resp = w.call(PRODUCE, P(acks=-1, timeout_ms=30000, topic_data=[P.TopicProduceData(name=topic, partition_data=[
        P.PartitionProduceData(index=0, records=records)])]))
    (p,) = resp.responses[0].partition_responses

    def norm(m: str | None) -> str | None:  # the broker's clock is in the bounds it prints
        if m is None:
            return None
        m = re.sub(r"Timestamp (-?\d+)", lambda t: f"Timestamp now{(int(t[1]) - now) / 3_600_000:+.1f}h", m)
        return re.sub(r"within \[-?\d+, -?\d+\]", "within [LOW, HIGH]", m)

    return {"error": int(p.error_code), "message": p.error_message, "base_offset": p.base_offset,
            "record_errors": [(e.batch_index, norm(e.batch_index_error_message)) for e in p.record_errors]}


def record_errors(bootstrap: str) -> Observations:
    """Produce batches with records out of message.timestamp.before/after.max.ms: Kafka refuses the
    batch with INVALID_TIMESTAMP and names each bad record (RecordErrors)."""
    now = int(time.time() * 1000)
    hour = 3_600_000
    base = unique("d-recerr")
    out: Observations = {}
    with Wire(bootstrap) as w:
        after, before, both = base + "-after", base + "-before", base + "-both"
        w.create(after, configs={"message.timestamp.after.max.ms": str(hour)})
        w.create(before, configs={"message.timestamp.before.max.ms": str(hour)})
        w.create(both, configs={"message.timestamp.before.max.ms": str(hour),
                                "message.timestamp.after.max.ms": str(hour)})

        def recs(*offsets_h: float, compression: Compression = Compression.NONE) -> bytes:
            return build_batch([NewRecord(b"k%d" % i, b"v", (), now + int(h * hour)) for i, h in enumerate(offsets_h)],
                               compression=compression)

        out["after.ok"] = _produce_full(w, after, recs(0, 0.5, -100), now)
        out["after.one_future"] = _produce_full(w, after, recs(0, 2, 0.5), now)
        out["after.all_future"] = _produce_full(w, after, recs(3, 2, 5), now)
        out["after.compressed"] = _produce_full(w, after, recs(0, 4, 0, 6, compression=Compression.GZIP), now)
        out["before.ok"] = _produce_full(w, before, recs(0, -0.5, 0.5), now)
        out["before.default_after_limit"] = _produce_full(w, before, recs(0, 100), now)
        # The first record is in range: only a record read shows the second is not.
        out["before.second_old"] = _produce_full(w, before, recs(0, -2, 0), now)
        out["both.mixed"] = _produce_full(w, both, recs(-3, 0, 3, -0.5), now)
        out["both.then_ok"] = _produce_full(w, both, recs(0), now)
    return out


def test_record_errors(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, record_errors)
