"""Differential runs: more edge cases a client can hit (bad acks, corrupt batches, leader
epochs, DeleteRecords, CreatePartitions, deleting unknown things, invalid group joins,
protocol mismatches, admin offset commits, DeleteGroups), Apache Kafka vs Quire."""

from __future__ import annotations

import pytest

from compat_tests.support.allowlist import Differences
from compat_tests.support.clients import unique
from compat_tests.support.differential import Observations, run_both
from compat_tests.support.targets import Target
from compat_tests.support.wire import Wire, batch, subscription

pytestmark = pytest.mark.compat(suite="differential", client="raw protocol")

CREATE_PARTITIONS = (37, 3)
DELETE_RECORDS = (21, 2)
DELETE_TOPICS = (20, 6)
DELETE_GROUPS = (42, 3)  # v3 (Kafka 4.4) adds a per-group error message
OFFSET_FOR_LEADER_EPOCH = (23, 4)


def records_and_topics(bootstrap: str) -> Observations:
    from kafka_wire.messages.create_partitions import CreatePartitionsRequest as CP
    from kafka_wire.messages.delete_records import DeleteRecordsRequest as DR
    from kafka_wire.messages.delete_topics import DeleteTopicsRequest as DT
    from kafka_wire.messages.fetch import FetchRequest as F
    from kafka_wire.messages.list_offsets import ListOffsetsRequest as LO
    from kafka_wire.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest as OE

    topic, missing = unique("d-edge"), unique("d-nope")
    out: Observations = {}
    with Wire(bootstrap) as w:
        w.create(topic, partitions=2)
        out["produce.acks_2"] = w.produce(topic, 0, batch(1), acks=2)[0]
        corrupt = bytearray(batch(2))
        corrupt[-1] ^= 0xFF  # the last payload byte: the CRC no longer matches
        out["produce.corrupt_crc"] = w.produce(topic, 0, bytes(corrupt))[0]
        out["produce.ok"] = w.produce(topic, 0, batch(10))
        md = w.metadata([topic]).topics[0]
        epoch = next(p.leader_epoch for p in md.partitions if p.partition_index == 0)
        out["metadata.leader_epoch"] = epoch

        def fetch_epoch(e: int) -> int:
            req = F(max_wait_ms=0, topics=[F.FetchTopic(topic=topic, partitions=[
                F.FetchPartition(partition=0, fetch_offset=0, current_leader_epoch=e, partition_max_bytes=1 << 16)])])
            return int(w.call((1, 12), req).responses[0].partitions[0].error_code)

        def list_epoch(e: int) -> int:
            req = LO(replica_id=-1, topics=[LO.ListOffsetsTopic(name=topic, partitions=[
                LO.ListOffsetsPartition(partition_index=0, current_leader_epoch=e, timestamp=-1)])])
            return int(w.call((2, 7), req).topics[0].partitions[0].error_code)

        out["fetch.current_epoch"] = fetch_epoch(epoch)
        out["fetch.future_epoch"] = fetch_epoch(epoch + 5)
        out["list_offsets.future_epoch"] = list_epoch(epoch + 5)
        if epoch > 0:
            out["fetch.fenced_epoch"] = fetch_epoch(epoch - 1)

        def end_for_epoch(e: int, part: int = 0) -> tuple[int, int, int]:
            req = OE(replica_id=-1, topics=[OE.OffsetForLeaderTopic(topic=topic, partitions=[
                OE.OffsetForLeaderPartition(partition=part, leader_epoch=e)])])
            r = w.call(OFFSET_FOR_LEADER_EPOCH, req).topics[0].partitions[0]
            return int(r.error_code), int(r.leader_epoch) - epoch, int(r.end_offset)

        out["leader_epoch.current"] = end_for_epoch(epoch)
        out["leader_epoch.future"] = end_for_epoch(epoch + 3)
        out["leader_epoch.unknown_partition"] = end_for_epoch(epoch, part=9)[0]

        def delete_records(offset: int, name: str = topic) -> tuple[int, int]:
            r = w.call(DELETE_RECORDS, DR(timeout_ms=30000, topics=[DR.DeleteRecordsTopic(name=name, partitions=[
                DR.DeleteRecordsPartition(partition_index=0, offset=offset)])]))
            p = r.topics[0].partitions[0]
            return int(p.error_code), int(p.low_watermark)

        out["delete_records.beyond_hw"] = delete_records(11)[0]
        out["delete_records.at_3"] = delete_records(3)
        out["delete_records.backwards"] = delete_records(1)
        out["after_delete.earliest"] = w.list_offset(topic, 0, -2)[:2]
        fetched = w.fetch(topic, 0, 1)
        out["after_delete.fetch_below_start"] = (int(fetched.error_code), int(fetched.log_start_offset))
        out["delete_records.unknown_topic"] = delete_records(0, name=missing)[0]
        out["delete_records.to_hw"] = delete_records(-1)

        def partitions(name: str, count: int) -> int:
            r = w.call(CREATE_PARTITIONS, CP(timeout_ms=30000, topics=[
                CP.CreatePartitionsTopic(name=name, count=count, assignments=None)]))
            return int(r.results[0].error_code)

        out["create_partitions.decrease"] = partitions(topic, 1)
        out["create_partitions.same"] = partitions(topic, 2)
        out["create_partitions.unknown_topic"] = partitions(missing, 3)
        out["create_partitions.increase"] = partitions(topic, 4)
        out["describe_configs.unknown_topic"] = int(w.describe_configs(missing).error_code)
        r = w.call(DELETE_TOPICS, DT(timeout_ms=30000, topics=[DT.DeleteTopicState(name=missing)]))
        out["delete_topics.unknown"] = int(r.responses[0].error_code)
    return out


def group_edges(bootstrap: str) -> Observations:
    from kafka_wire.messages.delete_groups import DeleteGroupsRequest

    topic, group, other = unique("d-ge"), unique("d-ge-g"), unique("d-ge-o")
    meta = subscription([topic], b"")
    out: Observations = {}
    with Wire(bootstrap) as a, Wire(bootstrap) as b:
        a.create(topic, partitions=1)
        a.find_coordinator(group)
        b.find_coordinator(other)
        out["join.empty_group_id"] = int(a.join("", protocols=(("range", meta),)).error_code)
        out["join.session_timeout_too_small"] = int(a.join(group, session_timeout_ms=1,
                                                           protocols=(("range", meta),)).error_code)
        out["join.session_timeout_too_large"] = int(a.join(group, session_timeout_ms=10**9,
                                                           protocols=(("range", meta),)).error_code)
        out["offset_fetch.unknown_group"] = a.fetch_offsets(unique("d-none"), topic, [0])
        # A simple (non-member) commit on an empty group is allowed; a member-less commit to
        # an unknown partition is not.
        out["commit.admin_empty_group"] = a.commit(other, -1, "", topic, {0: 3})
        out["commit.unknown_topic"] = a.commit(other, -1, "", unique("d-nope"), {0: 3})

        first = a.join(group, protocols=(("range", meta),))
        ja = a.join(group, first.member_id, protocols=(("range", meta),))
        out["join.a"] = (int(ja.error_code), int(ja.generation_id))
        a.sync(group, ja.generation_id, first.member_id, {first.member_id: b""})
        # A second member offering only other protocols, or another protocol type.
        b_first = b.join(group, protocols=(("roundrobin", meta),))
        out["join.inconsistent_protocol"] = int(b_first.error_code) if b_first.error_code != 79 else int(
            b.join(group, b_first.member_id, protocols=(("roundrobin", meta),)).error_code)
        out["commit.admin_active_group"] = a.commit(group, -1, "", topic, {0: 4})
        out["describe.after_rejections"] = (a.describe_group(group).group_state,
                                            len(a.describe_group(group).members))

        def delete_groups(*names: str) -> list[tuple[int, str | None]]:
            r = a.call(DELETE_GROUPS, DeleteGroupsRequest(groups_names=list(names)))
            by_name = {x.group_id: (int(x.error_code), x.error_message) for x in r.results}
            return [by_name[n] for n in names]

        out["delete_groups.non_empty"] = delete_groups(group)
        out["delete_groups.unknown"] = delete_groups(unique("d-none"))
        out["delete_groups.empty_with_offsets"] = delete_groups(other)
        out["offset_fetch.after_delete"] = a.fetch_offsets(other, topic, [0])
        a.leave(group, first.member_id)
        out["delete_groups.after_leave"] = delete_groups(group)
    return out



def test_records_and_topics(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, records_and_topics)


def test_group_edges(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, group_edges)
