"""Admin APIs that tools call (issue 17) against `quire standalone`: DescribeTopicPartitions
agrees with Metadata and pages through every partition (raw requests); kafka-python's and
confluent-kafka's admins, unchanged, on the cluster operations Quire answers as no-ops."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import TopicPartition
from kafka import errors as Errors
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KNewTopic

from kafka_wire.errors import ErrorCode
from kafka_wire.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest as DTP,
)
from kafka_wire.messages.describe_topic_partitions import (
    DescribeTopicPartitionsResponse,
)
from kafka_wire.messages.metadata import MetadataRequest, MetadataResponse
from tests.support.gateway import RawKafka, StandaloneGateway
from tests.support.wait import eventually

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def topics(module_standalone: StandaloneGateway) -> list[str]:
    names = ["adm-dtp-a", "adm-dtp-b", "adm-dtp-c"]
    admin = AdminClient({"bootstrap.servers": module_standalone.bootstrap})
    for fut in admin.create_topics([NewTopic(n, i + 2, 1) for i, n in enumerate(names)]).values():
        fut.result(15)

    def served() -> bool:  # every partition owned and open, so answers no longer change
        with RawKafka(module_standalone.bootstrap) as c:
            md = c.request(3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names]))
        return all(p.leader_id >= 0 and p.leader_epoch >= 0 for t in md.topics for p in t.partitions)

    asyncio.run(eventually(served, what="partitions of the new topics served"))
    return names


def _dtp(c: RawKafka, names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None
         ) -> DescribeTopicPartitionsResponse:
    req = DTP(topics=[DTP.TopicRequest(name=n) for n in names], response_partition_limit=limit,
              cursor=None if cursor is None else DTP.Cursor(topic_name=cursor[0], partition_index=cursor[1]))
    resp = c.request(75, 0, req)
    assert isinstance(resp, DescribeTopicPartitionsResponse)
    return resp


def test_same_partitions_as_metadata(module_standalone: StandaloneGateway, topics: list[str]) -> None:
    with RawKafka(module_standalone.bootstrap) as c:
        md = c.request(3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in topics]))
        assert isinstance(md, MetadataResponse)
        d = _dtp(c, [*reversed(topics), "adm-dtp-missing"])
    expected = {t.name: (t.topic_id, [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
                                      for p in t.partitions]) for t in md.topics}
    # Sorted by name, unknown topics answered in place.
    assert [t.name for t in d.topics] == sorted([*topics, "adm-dtp-missing"])
    got = {t.name: (t.topic_id, [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
                                 for p in t.partitions]) for t in d.topics if t.error_code == 0}
    assert got == expected
    (missing,) = [t for t in d.topics if t.error_code]
    assert (missing.name, missing.error_code, missing.partitions) == (
        "adm-dtp-missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])
    assert d.next_cursor is None
    assert all(p.eligible_leader_replicas == [] and p.offline_replicas == [] for t in d.topics for p in t.partitions)


def test_cursor_pages_through_every_partition(module_standalone: StandaloneGateway, topics: list[str]) -> None:
    seen: list[tuple[str, int]] = []
    cursor: tuple[str, int] | None = None
    pages = 0
    with RawKafka(module_standalone.bootstrap) as c:
        while True:
            d = _dtp(c, topics, limit=2, cursor=cursor)
            pages += 1
            assert sum(len(t.partitions) for t in d.topics) <= 2
            seen += [(t.name, p.partition_index) for t in d.topics for p in t.partitions]
            if d.next_cursor is None:
                break
            cursor = (d.next_cursor.topic_name, d.next_cursor.partition_index)
        bad = _dtp(c, topics[1:], cursor=(topics[0], 0))
    # 2 + 3 + 4 partitions, two per page.
    assert seen == [(n, p) for i, n in enumerate(topics) for p in range(i + 2)]
    assert pages == 5
    # Kafka: the cursor's topic must be among the listed ones (InvalidRequestException).
    assert [(t.name, t.error_code) for t in bad.topics] == [(n, ErrorCode.INVALID_REQUEST) for n in topics[1:]]


def test_kafka_python_admin_cluster_operations(module_standalone: StandaloneGateway, topics: list[str]) -> None:
    """kafka-python's admin, unchanged, on calls with nothing to do."""
    admin = KafkaAdminClient(bootstrap_servers=module_standalone.bootstrap)
    try:
        d = admin.describe_topic_partitions([topics[0]])
        ((t,),) = (d["topics"],)
        assert (t["name"], t["error_code"], len(t["partitions"])) == (topics[0], 0, 2)
        owner = t["partitions"][0]["leader_id"]
        assert owner >= 0 and t["partitions"][0]["replica_nodes"] == [owner]

        el = admin.elect_leaders(0, {topics[0]: [0, 1]}, raise_errors=False)
        assert [(p.partition_id, p.error_code) for r in el.replica_election_results for p in r.partition_result] == [
            (0, ErrorCode.ELECTION_NOT_NEEDED), (1, ErrorCode.ELECTION_NOT_NEEDED)]
        assert admin.list_partition_reassignments() == {}
        tp = TopicPartition(topics[0], 0)
        assert admin.alter_partition_reassignments({tp: [owner]}) == {tp: None}
        (err,) = admin.alter_partition_reassignments({tp: [owner + 100]}).values()
        assert err is Errors.InvalidReplicationAssignmentError
        (err,) = admin.alter_partition_reassignments({tp: None}).values()
        assert err is Errors.NoReassignmentInProgressError

        features = admin.describe_features()
        # {name: {"supported": ..., "finalized": ...}}: transactions at version 2 (KIP-890)
        assert list(features) == ["transaction.version"]
        with pytest.raises(Errors.InvalidUpdateVersionError):
            admin.update_features({"quire.test.version": 1})
        with pytest.raises(Errors.UnsupportedVersionError):
            admin.describe_metadata_quorum()
    finally:
        admin.close()


def test_confluent_elect_leaders(module_standalone: StandaloneGateway, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": module_standalone.bootstrap})
    res = admin.elect_leaders(ElectionType.PREFERRED, [CTopicPartition(topics[1], 0)]).result(15)
    ((tp, err),) = res.items()
    assert (tp.topic, tp.partition) == (topics[1], 0)
    assert err is not None and err.code() == KafkaError.ELECTION_NOT_NEEDED


def test_manual_replica_assignments_confluent(module_standalone: StandaloneGateway) -> None:
    """confluent-kafka's admin: a topic placed on the one live gateway is created, then grown
    with an assignment; naming an unknown gateway is refused with INVALID_REPLICA_ASSIGNMENT."""
    admin = AdminClient({"bootstrap.servers": module_standalone.bootstrap})
    me = min(admin.describe_cluster().result(15).nodes, key=lambda n: n.id).id
    admin.create_topics([NewTopic("adm-placed", 2, replica_assignment=[[me], [me]])])["adm-placed"].result(15)
    with pytest.raises(KafkaException) as bad:
        admin.create_topics([NewTopic("adm-misplaced", 1, replica_assignment=[[me + 100]])])["adm-misplaced"].result(15)
    assert bad.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    admin.create_partitions([NewPartitions("adm-placed", 3, replica_assignment=[[me]])])["adm-placed"].result(15)
    with pytest.raises(KafkaException) as bad:
        admin.create_partitions([NewPartitions("adm-placed", 4, replica_assignment=[[me, me]])])["adm-placed"].result(15)
    assert bad.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT

    def placed() -> bool:  # the new partition gets its owner a moment after CreatePartitions
        md = admin.list_topics("adm-placed", timeout=15).topics["adm-placed"]
        return sorted(md.partitions) == [0, 1, 2] and {p.leader for p in md.partitions.values()} == {me}

    asyncio.run(eventually(placed, what="3 partitions led by the assigned gateway"))


def test_manual_replica_assignments_kafka_python(module_standalone: StandaloneGateway) -> None:
    admin = KafkaAdminClient(bootstrap_servers=module_standalone.bootstrap)
    try:
        me = admin.describe_cluster()["brokers"][0]["broker_id"]
        resp = admin.create_topics([KNewTopic("adm-kp-placed", -1, -1, replica_assignments={0: [me], 1: [me]})])
        assert [(t["name"], t["error_code"], t["num_partitions"]) for t in resp["topics"]] == [("adm-kp-placed", 0, 2)]
        with pytest.raises(Errors.InvalidReplicationAssignmentError):
            admin.create_topics([KNewTopic("adm-kp-misplaced", -1, -1, replica_assignments={0: [me, me]})])
    finally:
        admin.close()
