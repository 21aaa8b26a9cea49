"""Differential run: a share group (KIP-932) driven step by step over the raw protocol against
Apache Kafka and Quire: group configs, ShareGroupHeartbeat epochs and assignments, ShareFetch
and ShareAcknowledge with their session and record-state errors, delivery counts after a
release, ShareGroupDescribe, ListGroups by type, DescribeGroups of a share group and the start
offset DescribeShareGroupOffsets reports."""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any

import pytest

from compat_tests.support.allowlist import Differences
from compat_tests.support.clients import unique
from compat_tests.support.differential import Observations, run_both
from compat_tests.support.targets import Target
from compat_tests.support.wire import GROUP_RESOURCE, RETRIABLE_COORDINATOR, Wire, batch
from kafka_wire.messages.describe_groups import DescribeGroupsRequest
from kafka_wire.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from kafka_wire.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kafka_wire.messages.list_groups import ListGroupsRequest
from kafka_wire.messages.share_acknowledge import ShareAcknowledgeRequest
from kafka_wire.messages.share_fetch import ShareFetchRequest
from kafka_wire.messages.share_group_describe import ShareGroupDescribeRequest
from kafka_wire.messages.share_group_heartbeat import ShareGroupHeartbeatRequest

pytestmark = pytest.mark.compat(suite="differential", client="raw protocol")

ACCEPT, RELEASE, REJECT = 1, 2, 3
F, A = ShareFetchRequest, ShareAcknowledgeRequest


def member_id() -> str:
    """A member id as Kafka clients make them (a base64 UUID)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _retry(call: Any, code_of: Any) -> Any:
    deadline = time.monotonic() + 60
    while True:
        r = call()
        if int(code_of(r)) not in RETRIABLE_COORDINATOR or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


def share_group_scenario(bootstrap: str) -> Observations:
    topic, group = unique("d-share"), unique("d-sg")
    out: Observations = {}
    with Wire(bootstrap) as w:
        w.create(topic, 1)
        w.produce(topic, 0, batch(3))
        w.produce(topic, 0, batch(2))
        tid = w.metadata([topic]).topics[0].topic_id
        out["find_coordinator"] = w.find_coordinator(group)  # Kafka creates its offsets topic on first use
        R = IncrementalAlterConfigsRequest
        r = w.call((44, 1), R(resources=[R.AlterConfigsResource(resource_type=GROUP_RESOURCE, resource_name=group,
                                                                configs=[R.AlterableConfig(
                                                                    name="share.auto.offset.reset",
                                                                    config_operation=0, value="earliest")])]))
        out["alter_group_config"] = int(r.responses[0].error_code)
        r = w.call((44, 1), R(resources=[R.AlterConfigsResource(resource_type=GROUP_RESOURCE, resource_name=group,
                                                                configs=[R.AlterableConfig(
                                                                    name="share.record.lock.duration.ms",
                                                                    config_operation=0, value="1000")])]))
        out["alter_group_config_below_min"] = int(r.responses[0].error_code)
        if out["alter_group_config"] == 0:
            w.wait_group_configs(group, {"share.auto.offset.reset": "earliest"})
        res = w.describe_group_configs(group, ["share.auto.offset.reset", "share.isolation.level"])
        out["describe_group_config"] = sorted((c.name, c.value) for c in res.configs)

        m1, m2 = member_id(), member_id()

        def hb(m: str, epoch: int, topics: list[str] | None = None) -> Any:
            return _retry(lambda: w.call((76, 1), ShareGroupHeartbeatRequest(
                group_id=group, member_id=m, member_epoch=epoch, subscribed_topic_names=topics)),
                lambda r: r.error_code)

        def parts(r: Any) -> list[int] | None:
            if r.assignment is None:
                return None
            return sorted(p for t in r.assignment.topic_partitions for p in t.partitions)

        # Epoch numbers are not compared: Kafka bumps the group epoch again once it has
        # initialized the share-partitions' state, which Quire does lazily at the first fetch.
        assigned: dict[str, list[int]] = {}
        r = hb(m1, 0, [topic])
        out["join_1"] = (int(r.error_code), r.member_epoch > 0, r.heartbeat_interval_ms)
        epochs = {m1: r.member_epoch}
        if parts(r):
            assigned[m1] = parts(r) or []
        r = hb(m2, 0, [topic])
        out["join_2"] = (int(r.error_code), r.member_epoch > 0)
        epochs[m2] = r.member_epoch
        if parts(r):
            assigned[m2] = parts(r) or []
        # Heartbeat until both members have the partition (several members share it).
        deadline = time.monotonic() + 30
        while len(assigned) < 2 and time.monotonic() < deadline:
            for m in (m1, m2):
                r = hb(m, epochs[m])
                epochs[m] = r.member_epoch
                if parts(r):
                    assigned[m] = parts(r) or []
            time.sleep(0.1)
        out["assigned"] = sorted(assigned.values())
        r = hb(m1, 999)
        out["heartbeat_bad_epoch"] = int(r.error_code)
        r = hb(member_id(), 5)
        out["heartbeat_unknown_member"] = int(r.error_code)

        def fetch(m: str, epoch: int, acks: list[tuple[int, int, list[int]]] | None = None) -> Any:
            return w.call((78, 1), F(group_id=group, member_id=m, share_session_epoch=epoch, max_wait_ms=2000,
                                     min_bytes=1, max_bytes=1 << 20, max_records=100, batch_size=100,
                                     topics=[F.FetchTopic(topic_id=tid, partitions=[F.FetchPartition(
                                         partition_index=0, acknowledgement_batches=[
                                             F.AcknowledgementBatch(first_offset=f, last_offset=la,
                                                                    acknowledge_types=t)
                                             for f, la, t in acks or []])])]))

        def acquired(r: Any) -> list[tuple[int, int]]:
            return sorted((o, a.delivery_count) for t in r.responses for p in t.partitions
                          for a in p.acquired_records for o in range(a.first_offset, a.last_offset + 1))

        def ack(m: str, epoch: int, acks: list[tuple[int, int, list[int]]]) -> Any:
            return w.call((79, 1), A(group_id=group, member_id=m, share_session_epoch=epoch, topics=[
                A.AcknowledgeTopic(topic_id=tid, partitions=[A.AcknowledgePartition(
                    partition_index=0, acknowledgement_batches=[
                        A.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=t)
                        for f, la, t in acks])])]))

        out["fetch_without_session"] = int(fetch(m1, 3).error_code)
        r = fetch(m1, 0)
        out["fetch_1"] = (int(r.error_code), acquired(r), r.acquisition_lock_timeout_ms)
        r = fetch(m2, 0)
        out["fetch_2_nothing_left"] = (int(r.error_code), acquired(r))
        r = ack(m2, 1, [(0, 0, [ACCEPT])])
        out["ack_not_held"] = [int(p.error_code) for t in r.responses for p in t.partitions]
        r = ack(m1, 1, [(0, 4, [ACCEPT, ACCEPT, ACCEPT, RELEASE, REJECT])])
        out["ack_mixed"] = (int(r.error_code), [int(p.error_code) for t in r.responses for p in t.partitions])
        r = ack(m1, 2, [(0, 0, [ACCEPT])])
        out["ack_twice"] = [int(p.error_code) for t in r.responses for p in t.partitions]
        out["ack_bad_epoch"] = int(ack(m1, 9, [(0, 0, [ACCEPT])]).error_code)
        r = fetch(m2, 2)
        out["fetch_released"] = (int(r.error_code), acquired(r))

        r = w.call((77, 1), ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=True))
        g = r.groups[0]
        out["describe"] = (int(g.error_code), g.group_state, g.group_epoch == g.assignment_epoch, g.assignor_name,
                           sorted(parts(m) or [] for m in g.members), g.authorized_operations)
        r = w.call((16, 5), ListGroupsRequest(types_filter=["share"]))
        out["list_share"] = [(x.protocol_type, x.group_state, x.group_type) for x in r.groups if x.group_id == group]
        r = w.call((16, 5), ListGroupsRequest(types_filter=["classic"]))
        out["list_classic"] = [x.group_id for x in r.groups if x.group_id == group]
        r = w.call((15, 5), DescribeGroupsRequest(groups=[group]))
        out["describe_groups_classic"] = int(r.groups[0].error_code)

        for m in (m1, m2):
            hb(m, -1)
        r = w.call((90, 0), DescribeShareGroupOffsetsRequest(groups=[
            DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(
                group_id=group, topics=[DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestTopic(
                    topic_name=topic, partitions=[0])])]))
        g = r.groups[0]
        out["share_offsets"] = (int(g.error_code), [(p.partition_index, p.start_offset, int(p.error_code))
                                                     for t in g.topics for p in t.partitions])
    return out


def test_share_group(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, share_group_scenario)
