"""Differential run: a consumer-protocol group (KIP-848) driven step by step over the raw protocol
against Apache Kafka 4.4 and Quire: ConsumerGroupHeartbeat's validation errors and messages, group
and member epochs, revocation before reassignment, static members, leaves; ConsumerGroupDescribe's
shape; OffsetCommit/OffsetFetch v9-10 with member epochs and topic ids; ListGroups and
DescribeGroups of a consumer group."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from compat_tests.support.allowlist import Differences
from compat_tests.support.clients import unique
from compat_tests.support.differential import Observations, run_both
from compat_tests.support.targets import Target
from compat_tests.support.wire import RETRIABLE_COORDINATOR, Wire
from kafka_wire.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kafka_wire.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest as CGH
from kafka_wire.messages.delete_groups import DeleteGroupsRequest
from kafka_wire.messages.describe_groups import DescribeGroupsRequest
from kafka_wire.messages.list_groups import ListGroupsRequest
from kafka_wire.messages.offset_commit import OffsetCommitRequest as OC
from kafka_wire.messages.offset_fetch import OffsetFetchRequest as OF
from kafka_wire.messages.sync_group import SyncGroupRequest as SG

pytestmark = pytest.mark.compat(suite="differential", client="raw protocol")

HEARTBEAT, DESCRIBE = (68, 1), (69, 1)


class Member:
    """One consumer-protocol member over its own connection (client-generated id, as v1 wants)."""

    def __init__(self, w: Wire, group: str, name: str, instance: str | None = None) -> None:
        self.w, self.group, self.name, self.instance = w, group, name, instance
        self.id = str(uuid.uuid4())
        self.epoch = 0

    def beat(self, owned: dict[uuid.UUID, list[int]] | None, *, topics: list[str] | None = None,
             epoch: int | None = None, **kw: Any) -> Any:
        req = CGH(group_id=self.group, member_id=self.id, member_epoch=self.epoch if epoch is None else epoch,
                  instance_id=self.instance, subscribed_topic_names=topics,
                  topic_partitions=None if owned is None else [
                      CGH.TopicPartitions(topic_id=t, partitions=p) for t, p in owned.items()], **kw)
        deadline = time.monotonic() + 30
        while True:
            r = self.w.call(HEARTBEAT, req)
            if int(r.error_code) not in RETRIABLE_COORDINATOR or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if r.error_code == 0 and r.member_epoch >= 0:
            self.epoch = r.member_epoch
        return r

    def join(self, topics: list[str], **kw: Any) -> Any:
        self.epoch = 0
        return self.beat({}, topics=topics, rebalance_timeout_ms=30000, **kw)


def consumer_groups(bootstrap: str) -> Observations:
    topic, group = unique("d-cg"), unique("d-cgg")
    out: Observations = {}
    with Wire(bootstrap) as admin, Wire(bootstrap) as wa, Wire(bootstrap) as wb, Wire(bootstrap) as wc:
        admin.create(topic, partitions=4)
        tid = admin.metadata([topic]).topics[0].topic_id
        out["find_coordinator"] = admin.find_coordinator(group)

        def view(r: Any) -> Any:
            """A heartbeat answer: error, message, epoch, interval, assignment of our topic."""
            parts = None
            if r.assignment is not None:
                parts = sorted(p for t in r.assignment.topic_partitions if t.topic_id == tid for p in t.partitions)
            msg = (r.error_message or "").replace(group, "<group>")
            for m in members:
                msg = msg.replace(m.id, f"<{m.name}>")
            return int(r.error_code), msg, r.member_epoch, r.heartbeat_interval_ms if r.error_code == 0 else None, parts

        def describe() -> Observations:
            g = admin.call(DESCRIBE, ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=True)).groups[0]
            names = {m.id: m.name for m in members}

            def a(x: Any) -> Any:
                return sorted((t.topic_id == tid, t.topic_name == topic, len(t.partitions)) for t in x.topic_partitions)

            return {
                "error": (int(g.error_code), (g.error_message or "").replace(group, "<group>")),
                "group": (g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name, g.authorized_operations),
                "members": sorted(
                    (names.get(m.member_id, "?"), m.instance_id, m.rack_id, m.member_epoch, m.client_id,
                     bool(m.client_host), list(m.subscribed_topic_names) == [topic], m.subscribed_topic_regex,
                     a(m.assignment), m.member_type)
                    for m in g.members),
                # Which member gives a partition up is the assignor's choice among equals (Kafka's
                # depends on member ids): compare the target sizes, not who has which.
                "targets": sorted(a(m.target_assignment) for m in g.members),
            }

        a, b = Member(wa, group, "a"), Member(wb, group, "b")
        c = Member(wc, group, "c", instance="inst-c")
        x, c2, c3 = Member(wa, group, "x"), Member(wc, group, "c2", instance="inst-c"), Member(
            wc, group, "c3", instance="inst-c")
        members = [a, b, c, x, c2, c3]
        out["describe.unknown"] = describe()
        # Validation (Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid) and unknown groups.
        out["hb.empty_member_id"] = view(wa.call(HEARTBEAT, CGH(group_id=group, member_id="", member_epoch=0)))
        out["hb.no_rebalance_timeout"] = view(a.beat({}, topics=[topic]))
        out["hb.no_subscription"] = view(a.beat({}, rebalance_timeout_ms=30000))
        out["hb.owned_on_join"] = view(a.beat({tid: [0]}, topics=[topic], rebalance_timeout_ms=30000))
        out["hb.bad_assignor"] = view(a.join([topic], server_assignor="nope"))
        out["hb.unknown_group"] = view(a.beat(None, epoch=3))
        out["hb.bad_epoch"] = view(a.beat(None, epoch=-3))

        ra = a.join([topic])
        out["a.join"] = view(ra)
        owned_a = {tid: sorted(p for t in ra.assignment.topic_partitions for p in t.partitions)}
        out["describe.one"] = describe()
        out["a.heartbeat"] = view(a.beat(None))
        out["a.fenced_greater"] = view(a.beat(None, epoch=a.epoch + 5))
        out["unknown_member"] = view(x.beat(None, epoch=1))

        out["b.join"] = view(b.join([topic]))
        out["describe.b_joined"] = describe()
        ra2 = a.beat(owned_a)
        out["a.revoke"] = view(ra2)
        kept = owned_a[tid] if ra2.assignment is None else sorted(
            p for t in ra2.assignment.topic_partitions for p in t.partitions)
        out["b.waits"] = view(b.beat({}))
        out["describe.reconciling"] = describe()
        out["a.revoked"] = view(a.beat({tid: kept}))
        out["b.assigned"] = view(b.beat({}))
        out["describe.stable"] = describe()

        # Offsets with member epochs (v9) and topic ids (v10).
        def commit(version: int, epoch: int, member: str, topic_id: uuid.UUID = tid) -> Any:
            t = OC.OffsetCommitRequestTopic(name=topic if version < 10 else "", topic_id=topic_id, partitions=[
                OC.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])
            r = admin.call((8, version), OC(group_id=group, generation_id_or_member_epoch=epoch, member_id=member,
                                            topics=[t]))
            return [(rt.topic_id == topic_id, [int(p.error_code) for p in rt.partitions]) for rt in r.topics]

        def fetch(version: int, epoch: int, member: str | None, topic_id: uuid.UUID = tid) -> Any:
            g = OF.OffsetFetchRequestGroup(group_id=group, member_id=member, member_epoch=epoch, topics=[
                OF.OffsetFetchRequestTopics(name=topic if version < 10 else "", topic_id=topic_id,
                                            partition_indexes=[0])])
            r = admin.call((9, version), OF(groups=[g])).groups[0]
            return int(r.error_code), [(t.topic_id == topic_id, [(int(p.error_code), p.committed_offset)
                                                                 for p in t.partitions]) for t in r.topics]

        out["commit.v9"] = commit(9, a.epoch, a.id)
        out["commit.v9.stale"] = commit(9, a.epoch - 1, a.id)
        out["commit.v9.unknown_member"] = commit(9, a.epoch, "nobody")
        out["commit.v9.admin_to_active_group"] = commit(9, -1, "")
        out["commit.v10"] = commit(10, b.epoch, b.id)
        out["commit.v10.unknown_topic_id"] = commit(10, b.epoch, b.id, uuid.uuid4())
        out["commit.v8.member"] = commit(8, a.epoch, a.id)
        out["fetch.v9"] = fetch(9, a.epoch, a.id)
        out["fetch.v9.stale"] = fetch(9, a.epoch + 1, a.id)
        out["fetch.v9.unknown_member"] = fetch(9, 1, "nobody")
        out["fetch.v9.admin"] = fetch(9, -1, None)
        out["fetch.v10"] = fetch(10, -1, None)
        out["fetch.v10.unknown_topic_id"] = fetch(10, -1, None, uuid.uuid4())
        listed = admin.call((16, 5), ListGroupsRequest(types_filter=["consumer"]))
        out["list_groups"] = [(g.protocol_type, g.group_state, g.group_type) for g in listed.groups
                              if g.group_id == group]
        for v in (5, 6):
            d = admin.call((15, v), DescribeGroupsRequest(groups=[group], include_authorized_operations=True)).groups[0]
            out[f"describe_groups.v{v}"] = (int(d.error_code), (d.error_message or "").replace(group, "<group>"),
                                            d.group_state, d.protocol_type, len(d.members), d.authorized_operations)

        # A static member; another incarnation is refused until it leaves for a while (-2).
        out["c.join"] = view(c.join([topic]))
        out["c2.unreleased"] = view(c2.join([topic]))
        out["c.fenced_instance"] = view(c3.beat(None, epoch=1))
        out["c.temporary_leave"] = view(c.beat(None, epoch=-2))
        out["c2.replaces"] = view(c2.join([topic]))
        out["describe.static"] = describe()
        out["c2.leave"] = view(c2.beat(None, epoch=-1))
        out["a.leave"] = view(a.beat(None, epoch=-1))
        out["a.after_leave"] = view(a.beat(None))
        out["delete.non_empty"] = [int(r.error_code) for r in admin.call(
            (42, 2), DeleteGroupsRequest(groups_names=[group])).results]
        out["b.leave"] = view(b.beat(None, epoch=-1))
        out["describe.empty"] = describe()
        out["delete"] = [int(r.error_code) for r in admin.call(
            (42, 2), DeleteGroupsRequest(groups_names=[group])).results]
        out["describe.deleted"] = describe()
    return out


def test_consumer_group_protocol(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, consumer_groups)


def _sub_v1(topic: str, owned: list[int]) -> bytes:
    """ConsumerProtocolSubscription v1 (owned partitions), as a cooperative classic client sends."""
    from kafka_wire.api import encode_versioned
    from kafka_wire.messages.consumer_protocol_subscription import ConsumerProtocolSubscription as S

    tps = [S.TopicPartition(topic=topic, partitions=owned)] if owned else []
    return encode_versioned(S(topics=[topic], owned_partitions=tps), 1)


def _parts(blob: Any) -> list[int]:
    from kafka_wire.api import decode_versioned
    from kafka_wire.messages.consumer_protocol_assignment import ConsumerProtocolAssignment as A

    if not blob:
        return []
    _, a = decode_versioned(A, bytes(blob))
    return sorted(p for tp in a.assigned_partitions for p in tp.partitions)  # type: ignore[attr-defined]


def mixed_groups(bootstrap: str) -> Observations:
    """A classic member's group upgraded by a consumer-protocol member, the classic member
    rejoining through JoinGroup/SyncGroup, then the downgrade when the other leaves."""
    from compat_tests.support.wire import assignment

    topic, group = unique("d-mix"), unique("d-mixg")
    out: Observations = {}
    with Wire(bootstrap) as admin, Wire(bootstrap) as wa, Wire(bootstrap) as wb:
        admin.create(topic, partitions=4)
        out["find_coordinator"] = admin.find_coordinator(group)
        proto = "cooperative-sticky"
        r = wa.join(group, protocols=((proto, _sub_v1(topic, [])),))
        a_id = r.member_id
        r = wa.join(group, a_id, protocols=((proto, _sub_v1(topic, [])),))
        out["a.classic_join"] = (int(r.error_code), int(r.generation_id), r.protocol_name)
        def sync(generation: int, assignments: dict[str, bytes] | None = None) -> Any:
            return wa.call((14, 5), SG(
                group_id=group, generation_id=generation, member_id=a_id, protocol_type="consumer",
                protocol_name=proto, assignments=[SG.SyncGroupRequestAssignment(member_id=m, assignment=x)
                                                  for m, x in (assignments or {}).items()]))

        s = sync(r.generation_id, {a_id: assignment({topic: [0, 1, 2, 3]}, b"")})
        out["a.classic_sync"] = int(s.error_code)
        gen = int(r.generation_id)

        b = Member(wb, group, "b")
        rb = b.join([topic])
        out["b.join_upgrades"] = (int(rb.error_code), rb.member_epoch - gen,
                                  None if rb.assignment is None else sum(len(t.partitions) for t in rb.assignment.topic_partitions))
        d = admin.call(DESCRIBE, ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=True)).groups[0]
        out["describe.upgraded"] = (int(d.error_code), d.group_state, d.group_epoch - gen, d.assignment_epoch - gen,
                                    sorted((m.member_type, m.member_epoch - gen,
                                            sum(len(t.partitions) for t in m.assignment.topic_partitions),
                                            sum(len(t.partitions) for t in m.target_assignment.topic_partitions))
                                           for m in d.members))
        out["describe_groups.mixed"] = int(admin.describe_group(group).error_code)
        listed = admin.call((16, 5), ListGroupsRequest())
        out["list_groups.mixed"] = [(g.protocol_type, g.group_type) for g in listed.groups if g.group_id == group]
        out["a.heartbeat_old_generation"] = wa.heartbeat(group, gen, a_id)
        r = wa.join(group, a_id, protocols=((proto, _sub_v1(topic, [0, 1, 2, 3])),))
        out["a.rejoin"] = (int(r.error_code), int(r.generation_id) - gen, r.protocol_name, r.leader, len(r.members))
        s = sync(r.generation_id)
        kept = _parts(s.assignment)
        out["a.sync_revokes"] = (int(s.error_code), len(kept))
        r = wa.join(group, a_id, protocols=((proto, _sub_v1(topic, kept)),))
        out["a.rejoin_revoked"] = (int(r.error_code), int(r.generation_id) - gen)
        s = sync(r.generation_id)
        out["a.sync_new_epoch"] = (int(s.error_code), _parts(s.assignment) == kept)
        out["a.heartbeat"] = wa.heartbeat(group, r.generation_id, a_id)
        out["a.commit_old_generation"] = wa.commit(group, gen - 1, a_id, topic, {(kept or [0])[0]: 3})
        out["a.commit"] = wa.commit(group, r.generation_id, a_id, topic, {(kept or [0])[0]: 3})
        rb = b.beat({})
        out["b.assigned"] = (int(rb.error_code), None if rb.assignment is None else
                             sum(len(t.partitions) for t in rb.assignment.topic_partitions))
        rb = b.beat(None, epoch=-1)
        out["b.leave_downgrades"] = (int(rb.error_code), rb.member_epoch)
        d = admin.describe_group(group)
        out["describe_groups.downgraded"] = (int(d.error_code), d.group_state, d.protocol_type, len(d.members))
        cd = admin.call(DESCRIBE, ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=True)).groups[0]
        out["describe.downgraded"] = (int(cd.error_code), (cd.error_message or "").replace(group, "<group>"))
        out["a.heartbeat_after_downgrade"] = wa.heartbeat(group, r.generation_id, a_id)
        r2 = wa.join(group, a_id, protocols=((proto, _sub_v1(topic, kept)),))
        out["a.rejoin_classic"] = (int(r2.error_code), int(r2.generation_id) - gen, r2.leader == a_id, len(r2.members))
    return out


def test_mixed_classic_and_consumer_members(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, mixed_groups)
