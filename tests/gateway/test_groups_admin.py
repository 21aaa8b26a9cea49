"""Group administration through confluent-kafka's AdminClient, and bad input on the wire with
Kafka's error codes (raw requests from the generated codecs)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kafka_wire.errors import ErrorCode as E
from kafka_wire.messages.find_coordinator import FindCoordinatorRequest
from kafka_wire.messages.heartbeat import HeartbeatRequest
from kafka_wire.messages.join_group import JoinGroupRequest
from kafka_wire.messages.leave_group import LeaveGroupRequest
from kafka_wire.messages.offset_commit import OffsetCommitRequest
from kafka_wire.messages.offset_fetch import OffsetFetchRequest
from kafka_wire.messages.sync_group import SyncGroupRequest
from tests.coordinator.gateway_support import start_gateway
from tests.support.gateway import RawKafka, StandaloneGateway

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneGateway]:
    g = start_gateway(tmp_path_factory.mktemp("groups-admin") / "data")
    try:
        yield g
    finally:
        g.stop(timeout=20.0)


def admin(gw: StandaloneGateway) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": gw.bootstrap})


def make_topic(gw: StandaloneGateway, name: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic

    a = admin(gw)  # keep the client alive until the future resolves
    a.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def test_admin_list_describe_alter_and_delete(gw: StandaloneGateway) -> None:
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition

    make_topic(gw, "adm-t", 3)
    a = admin(gw)
    # Offsets of a group with no members (simple commits), written through the admin API.
    req = ConsumerGroupTopicPartitions(
        "adm-idle", [TopicPartition("adm-t", 0, 5), TopicPartition("adm-t", 2, 9)]
    )
    res = a.alter_consumer_group_offsets([req])["adm-idle"].result(30)
    assert sorted((tp.partition, tp.offset) for tp in res.topic_partitions) == [(0, 5), (2, 9)]
    got = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions("adm-idle")])["adm-idle"].result(30)
    assert sorted((tp.partition, tp.offset) for tp in got.topic_partitions) == [(0, 5), (2, 9)]
    # An active member.
    c = Consumer({"bootstrap.servers": gw.bootstrap, "group.id": "adm-active", "session.timeout.ms": 6000})
    try:
        c.subscribe(["adm-t"])
        for _ in range(100):
            c.poll(0.2)
            if c.assignment():
                break
        assert len(c.assignment()) == 3
        listed = a.list_consumer_groups().result(30)
        ids = {g.group_id: g for g in listed.valid}
        assert {"adm-idle", "adm-active"} <= set(ids)
        assert str(ids["adm-active"].state).endswith("STABLE")
        assert str(ids["adm-idle"].state).endswith("EMPTY")
        desc = a.describe_consumer_groups(["adm-active", "adm-idle"])
        active = desc["adm-active"].result(30)
        assert str(active.state).endswith("STABLE") and len(active.members) == 1
        assert active.partition_assignor == "range"
        assert sorted(tp.partition for tp in active.members[0].assignment.topic_partitions) == [0, 1, 2]
        # A group with members cannot be deleted.
        with pytest.raises(Exception) as err:
            a.delete_consumer_groups(["adm-active"])["adm-active"].result(30)
        assert "NON_EMPTY_GROUP" in str(err.value) or "not empty" in str(err.value).lower()
    finally:
        c.close()
    a.delete_consumer_groups(["adm-idle"])["adm-idle"].result(30)
    with pytest.raises(Exception) as err:
        a.delete_consumer_groups(["adm-idle"])["adm-idle"].result(30)
    assert "GROUP_ID_NOT_FOUND" in str(err.value) or "does not exist" in str(err.value).lower()
    listed = {g.group_id for g in a.list_consumer_groups().result(30).valid}
    assert "adm-idle" not in listed


def coordinator(raw: RawKafka, group: str) -> None:
    r: Any = raw.request(10, 3, FindCoordinatorRequest(key=group, key_type=0))
    assert r.error_code == 0, r


def test_bad_input_gets_kafkas_error_codes(gw: StandaloneGateway) -> None:
    make_topic(gw, "bad-t", 2)
    with RawKafka(gw.bootstrap) as raw:
        coordinator(raw, "bad-g")
        r: Any = raw.request(12, 4, HeartbeatRequest(group_id="bad-g", generation_id=1, member_id="ghost"))
        assert r.error_code == E.UNKNOWN_MEMBER_ID
        r = raw.request(14, 5, SyncGroupRequest(group_id="bad-g", generation_id=1, member_id="ghost"))
        assert r.error_code == E.UNKNOWN_MEMBER_ID
        proto = [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]
        join = JoinGroupRequest(
            group_id="bad-g",
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id="",
            protocol_type="consumer",
            protocols=proto,
        )
        r = raw.request(11, 9, join)
        assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id
        join.member_id = r.member_id
        j: Any = raw.request(11, 9, join)
        assert j.error_code == 0 and j.generation_id == 1 and j.leader == j.member_id
        r = raw.request(14, 5, SyncGroupRequest(group_id="bad-g", generation_id=7, member_id=j.member_id))
        assert r.error_code == E.ILLEGAL_GENERATION
        r = raw.request(
            14,
            5,
            SyncGroupRequest(
                group_id="bad-g",
                generation_id=1,
                member_id=j.member_id,
                protocol_type="connect",
                protocol_name="range",
            ),
        )
        assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
        r = raw.request(
            14,
            5,
            SyncGroupRequest(
                group_id="bad-g",
                generation_id=1,
                member_id=j.member_id,
                protocol_type="consumer",
                protocol_name="range",
            ),
        )
        assert r.error_code == 0
        r = raw.request(12, 4, HeartbeatRequest(group_id="bad-g", generation_id=9, member_id=j.member_id))
        assert r.error_code == E.ILLEGAL_GENERATION
        bad_join = JoinGroupRequest(
            group_id="bad-g",
            session_timeout_ms=1,
            rebalance_timeout_ms=10000,
            member_id="",
            protocol_type="consumer",
            protocols=proto,
        )
        assert raw.request(11, 9, bad_join).error_code == E.INVALID_SESSION_TIMEOUT  # type: ignore[attr-defined]
        # Commits: unknown topic / partition, wrong generation, wrong member, simple commit refused
        # while the group has members.
        T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestPartition

        def commit(gen: int, member: str, topic: str, part: int) -> int:
            req = OffsetCommitRequest(
                group_id="bad-g",
                generation_id_or_member_epoch=gen,
                member_id=member,
                topics=[T(name=topic, partitions=[P(partition_index=part, committed_offset=3)])],
            )
            resp: Any = raw.request(8, 9, req)
            return int(resp.topics[0].partitions[0].error_code)

        assert commit(1, j.member_id, "no-such-topic", 0) == E.UNKNOWN_TOPIC_OR_PARTITION
        assert commit(1, j.member_id, "bad-t", 5) == E.UNKNOWN_TOPIC_OR_PARTITION
        assert commit(3, j.member_id, "bad-t", 0) == E.ILLEGAL_GENERATION
        assert commit(1, "ghost", "bad-t", 0) == E.UNKNOWN_MEMBER_ID
        assert commit(-1, "", "bad-t", 0) == E.UNKNOWN_MEMBER_ID
        assert commit(1, j.member_id, "bad-t", 1) == 0
        fetch: Any = raw.request(9, 7, OffsetFetchRequest(group_id="bad-g", topics=None, require_stable=True))
        assert fetch.error_code == 0
        assert [
            (t.name, p.partition_index, p.committed_offset) for t in fetch.topics for p in t.partitions
        ] == [("bad-t", 1, 3)]
        # Multi-group OffsetFetch (v8): an unknown group has no offsets, not an error.
        G = OffsetFetchRequest.OffsetFetchRequestGroup
        multi: Any = raw.request(
            9,
            8,
            OffsetFetchRequest(groups=[G(group_id="bad-g", topics=None), G(group_id="nobody", topics=None)]),
        )
        assert [(g.group_id, g.error_code, len(g.topics)) for g in multi.groups] == [
            ("bad-g", 0, 1),
            ("nobody", 0, 0),
        ]
        # LeaveGroup v0 (single member, top-level error) and v3+ (batched).
        r = raw.request(13, 0, LeaveGroupRequest(group_id="bad-g", member_id="ghost"))
        assert r.error_code == E.UNKNOWN_MEMBER_ID
        MI = LeaveGroupRequest.MemberIdentity
        r = raw.request(
            13,
            5,
            LeaveGroupRequest(group_id="bad-g", members=[MI(member_id=j.member_id), MI(member_id="ghost")]),
        )
        assert r.error_code == 0 and [m.error_code for m in r.members] == [0, E.UNKNOWN_MEMBER_ID]
        # FindCoordinator: batched keys (v4) and key types other than groups.
        fc: Any = raw.request(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b", "c"]))
        assert [(c.key, c.error_code) for c in fc.coordinators] == [("a", 0), ("b", 0), ("c", 0)]
        assert {c.port for c in fc.coordinators} == {gw.port}
        fc = raw.request(10, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=["txn"]))
        assert (fc.coordinators[0].error_code, fc.coordinators[0].port) == (0, gw.port)  # transactions
        fc = raw.request(10, 4, FindCoordinatorRequest(key_type=2, coordinator_keys=["share"]))
        assert fc.coordinators[0].error_code == E.INVALID_REQUEST  # a share key is group:topic id:partition
        fc = raw.request(10, 0, FindCoordinatorRequest(key="old-client"))
        assert fc.error_code == 0 and fc.port == gw.port


def test_every_version_of_every_group_api(gw: StandaloneGateway) -> None:
    """One full member life cycle per protocol version: each request and response encodes and
    decodes at every version the gateway serves."""
    from kafka_wire.messages.delete_groups import DeleteGroupsRequest
    from kafka_wire.messages.describe_groups import DescribeGroupsRequest
    from kafka_wire.messages.list_groups import ListGroupsRequest

    make_topic(gw, "ver-t", 1)
    proto = [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"x")]
    T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestPartition
    with RawKafka(gw.bootstrap) as raw:
        for v in range(7):
            fc: Any = raw.request(10, v, FindCoordinatorRequest(key="ver-0", key_type=0) if v < 4
                                  else FindCoordinatorRequest(key_type=0, coordinator_keys=["ver-0"]))
            assert (fc.error_code if v < 4 else fc.coordinators[0].error_code) == 0
        for v in range(10):
            group = f"ver-{v}"
            coordinator(raw, group)
            join = JoinGroupRequest(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                    member_id="", protocol_type="consumer", protocols=proto)
            j: Any = raw.request(11, v, join)
            if v >= 4:
                assert j.error_code == E.MEMBER_ID_REQUIRED
                join.member_id = j.member_id
                j = raw.request(11, v, join)
            assert j.error_code == 0 and j.generation_id == 1 and j.leader == j.member_id, (v, j)
            assert j.protocol_name == "range" and [m.metadata for m in j.members] == [b"x"]
            sv = min(v, 5)
            A = SyncGroupRequest.SyncGroupRequestAssignment
            s: Any = raw.request(14, sv, SyncGroupRequest(group_id=group, generation_id=1, member_id=j.member_id,
                                                          assignments=[A(member_id=j.member_id, assignment=b"as")]))
            assert (s.error_code, s.assignment) == (0, b"as")
            h: Any = raw.request(12, min(v, 4), HeartbeatRequest(group_id=group, generation_id=1, member_id=j.member_id))
            assert h.error_code == 0
            cv = min(max(v, 2), 9)
            c: Any = raw.request(8, cv, OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=1, member_id=j.member_id,
                topics=[T(name="ver-t", partitions=[P(partition_index=0, committed_offset=v, committed_metadata="m")])]))
            assert c.topics[0].partitions[0].error_code == 0
            fv = min(max(v, 1), 9)
            OT = OffsetFetchRequest.OffsetFetchRequestTopic
            if fv < 8:
                f: Any = raw.request(9, fv, OffsetFetchRequest(group_id=group, topics=[OT(name="ver-t", partition_indexes=[0])]))
                part = f.topics[0].partitions[0]
            else:
                G = OffsetFetchRequest.OffsetFetchRequestGroup
                GT = OffsetFetchRequest.OffsetFetchRequestTopics
                f = raw.request(9, fv, OffsetFetchRequest(groups=[G(group_id=group, topics=[GT(name="ver-t", partition_indexes=[0])])]))
                part = f.groups[0].topics[0].partitions[0]
            assert (part.committed_offset, part.metadata, part.error_code) == (v, "m", 0)
            d: Any = raw.request(15, min(v, 6), DescribeGroupsRequest(groups=[group]))
            assert d.groups[0].group_state == "Stable" and d.groups[0].members[0].member_assignment == b"as"
            lg: Any = raw.request(16, min(v, 5), ListGroupsRequest())
            assert group in {g.group_id for g in lg.groups}
            lv = min(v, 5)
            if lv < 3:
                le: Any = raw.request(13, lv, LeaveGroupRequest(group_id=group, member_id=j.member_id))
                assert le.error_code == 0
            else:
                MI = LeaveGroupRequest.MemberIdentity
                le = raw.request(13, lv, LeaveGroupRequest(group_id=group, members=[MI(member_id=j.member_id)]))
                assert [m.error_code for m in le.members] == [0]
            # Deletable once Empty (its write, queued first on the shard's log, precedes the delete's).
            d = raw.request(15, min(v, 6), DescribeGroupsRequest(groups=[group]))
            assert d.groups[0].group_state == "Empty" and d.groups[0].members == []
            dg: Any = raw.request(42, min(v, 2), DeleteGroupsRequest(groups_names=[group]))
            assert dg.results[0].error_code == 0
            d = raw.request(15, min(v, 6), DescribeGroupsRequest(groups=[group]))
            assert d.groups[0].group_state == "Dead"
            assert d.groups[0].error_code == (E.GROUP_ID_NOT_FOUND if min(v, 6) >= 6 else 0)
