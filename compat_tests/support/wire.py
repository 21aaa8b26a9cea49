"""A raw Kafka-protocol client for the differential runs: one blocking connection
(tests.support.gateway.RawKafka) sending kafka_wire's generated requests at fixed versions that
Apache Kafka 4.x and Quire both serve, returning plain values to compare."""

from __future__ import annotations

import struct
import time
from typing import Any

from kafka_wire.messages.create_topics import CreateTopicsRequest as CT
from kafka_wire.messages.describe_configs import DescribeConfigsRequest as DC
from kafka_wire.messages.fetch import FetchRequest as F
from kafka_wire.messages.heartbeat import HeartbeatRequest
from kafka_wire.messages.init_producer_id import InitProducerIdRequest
from kafka_wire.messages.join_group import JoinGroupRequest as JG
from kafka_wire.messages.leave_group import LeaveGroupRequest as LG
from kafka_wire.messages.list_offsets import ListOffsetsRequest as LO
from kafka_wire.messages.metadata import MetadataRequest as MD
from kafka_wire.messages.offset_commit import OffsetCommitRequest as OC
from kafka_wire.messages.offset_fetch import OffsetFetchRequest as OF
from kafka_wire.messages.produce import ProduceRequest as P
from kafka_wire.messages.sync_group import SyncGroupRequest as SG
from kafka_wire.records.batch import iter_batches
from kafka_wire.records.builder import NewRecord, build_batch
from tests.support.gateway import RawKafka

# (api key, version) of every request used; all within Kafka 4.4's supported ranges.
PRODUCE = (0, 9)
FETCH = (1, 12)
LIST_OFFSETS = (2, 7)
METADATA = (3, 12)
OFFSET_COMMIT = (8, 8)
OFFSET_FETCH = (9, 7)
JOIN_GROUP = (11, 9)
HEARTBEAT = (12, 4)
LEAVE_GROUP = (13, 5)
SYNC_GROUP = (14, 5)
DESCRIBE_GROUPS = (15, 5)
FIND_COORDINATOR = (10, 4)
LIST_GROUPS = (16, 4)
CREATE_TOPICS = (19, 7)
INIT_PRODUCER_ID = (22, 4)
DESCRIBE_CONFIGS = (32, 4)
INCREMENTAL_ALTER_CONFIGS = (44, 1)

TOPIC_RESOURCE = 2
GROUP_RESOURCE = 32
GROUP_CONFIG_SOURCE = 8  # DescribeConfigs' source of a config set on the group itself
RETRIABLE_COORDINATOR = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR


def batch(n: int, *, size: int = 8, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
          timestamp: int = -1) -> bytes:
    return build_batch([NewRecord(f"k{i}".encode(), b"v" * size, (), timestamp) for i in range(n)],
                       producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence)


def _str(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def subscription(topics: list[str], user_data: bytes) -> bytes:
    """ConsumerProtocolSubscription v0 (Kafka's coordinator parses it for protocol "consumer")."""
    return (struct.pack(">hi", 0, len(topics)) + b"".join(_str(t) for t in topics)
            + struct.pack(">i", len(user_data)) + user_data)


def assignment(partitions: dict[str, list[int]], user_data: bytes) -> bytes:
    """ConsumerProtocolAssignment v0."""
    body = struct.pack(">hi", 0, len(partitions))
    for topic, parts in partitions.items():
        body += _str(topic) + struct.pack(f">i{len(parts)}i", len(parts), *parts)
    return body + struct.pack(">i", len(user_data)) + user_data


class Wire:
    def __init__(self, bootstrap: str, client_id: str | None = "raw-test") -> None:
        self.raw = RawKafka(bootstrap.split(",")[0], timeout=30.0, client_id=client_id)

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, api: tuple[int, int], body: object) -> Any:
        return self.raw.request(api[0], api[1], body)

    # -- topics -----------------------------------------------------------------------------------

    def create_topics(self, *topics: tuple[str, int, int, dict[str, str]], validate_only: bool = False
                      ) -> dict[str, int]:
        """{name: error code} for (name, partitions, replication factor, configs) tuples."""
        resp = self.call(CREATE_TOPICS, CT(validate_only=validate_only, timeout_ms=30000, topics=[
            CT.CreatableTopic(name=n, num_partitions=p, replication_factor=rf,
                              configs=[CT.CreatableTopicConfig(name=k, value=v) for k, v in cfg.items()])
            for n, p, rf, cfg in topics
        ]))
        return {t.name: int(t.error_code) for t in resp.topics}

    def create(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
        """Create and wait until every partition has a leader (Kafka applies creations
        asynchronously: right after CreateTopics a produce can get NOT_LEADER_OR_FOLLOWER)."""
        err = self.create_topics((name, partitions, -1, configs or {}))[name]
        assert err == 0, f"create {name}: error {err}"
        self.wait_leaders(name, partitions)

    def wait_leaders(self, name: str, partitions: int) -> None:
        """Wait until each of the topic's `partitions` has a leader that serves it."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            (t,) = self.metadata([name]).topics
            if t.error_code == 0 and len(t.partitions) == partitions and all(
                    p.error_code == 0 and p.leader_id >= 0 for p in t.partitions) and all(
                    self.list_offset(name, p, -1)[0] == 0 for p in range(partitions)):
                return  # the leader also serves the partition (its log exists)
            time.sleep(0.05)
        raise AssertionError(f"{name}: partitions without a leader after 30 s")

    def metadata(self, topics: list[str] | None, auto_create: bool = False) -> Any:
        req = MD(topics=None if topics is None else [MD.MetadataRequestTopic(name=t) for t in topics],
                 allow_auto_topic_creation=auto_create)
        return self.call(METADATA, req)

    def describe_configs(self, topic: str) -> Any:
        req = DC(include_synonyms=False, include_documentation=False, resources=[
            DC.DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=topic, configuration_keys=None)])
        return self.call(DESCRIBE_CONFIGS, req).results[0]

    def describe_group_configs(self, group: str, keys: list[str] | None, synonyms: bool = False) -> Any:
        req = DC(include_synonyms=synonyms, include_documentation=False, resources=[
            DC.DescribeConfigsResource(resource_type=GROUP_RESOURCE, resource_name=group, configuration_keys=keys)])
        return self.call(DESCRIBE_CONFIGS, req).results[0]

    def wait_group_configs(self, group: str, wanted: dict[str, str]) -> None:
        """Wait until the group's describe shows each of `wanted` as set on the group. Kafka's
        controller answers an alter once committed; the broker applies it from the metadata log
        a moment later, so a describe right after can still show the old value."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            shown = {c.name: c.value for c in self.describe_group_configs(group, list(wanted)).configs
                     if int(c.config_source) == GROUP_CONFIG_SOURCE}
            if all(shown.get(k) == v for k, v in wanted.items()):
                return
            time.sleep(0.05)
        raise AssertionError(f"group {group}: configs {wanted} not shown after 30 s")

    # -- records ----------------------------------------------------------------------------------

    def produce(self, topic: str, partition: int, records: bytes, acks: int = -1) -> tuple[int, int]:
        """(error code, base offset)."""
        req = P(acks=acks, timeout_ms=30000, topic_data=[P.TopicProduceData(name=topic, partition_data=[
            P.PartitionProduceData(index=partition, records=records)])])
        part = self.call(PRODUCE, req).responses[0].partition_responses[0]
        return int(part.error_code), int(part.base_offset)

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20) -> Any:
        req = F(max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, topics=[F.FetchTopic(topic=topic, partitions=[
            F.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)])])
        return self.call(FETCH, req).responses[0].partitions[0]

    def records(self, topic: str, partition: int, offset: int, upto: int
                ) -> list[tuple[int, bytes | None, bytes | None]]:
        """(offset, key, value) of the records at offsets offset..upto as a client reads them:
        fetches from the batch holding `offset`, control batches and earlier records skipped."""
        out: list[tuple[int, bytes | None, bytes | None]] = []
        while offset <= upto:
            p = self.fetch(topic, partition, offset)
            assert p.error_code == 0, p.error_code
            nxt = offset
            for b in iter_batches(bytes(p.records or b"")):
                nxt = max(nxt, b.last_offset + 1)
                if b.is_control:
                    continue
                out += [(b.base_offset + r.offset_delta, r.key, r.value) for r in b.records()
                        if offset <= b.base_offset + r.offset_delta <= upto]
            if nxt == offset:
                break
            offset = nxt
        return out

    def list_offset(self, topic: str, partition: int, timestamp: int) -> tuple[int, int, int]:
        """(error code, offset, timestamp)."""
        req = LO(replica_id=-1, topics=[LO.ListOffsetsTopic(name=topic, partitions=[
            LO.ListOffsetsPartition(partition_index=partition, timestamp=timestamp)])])
        p = self.call(LIST_OFFSETS, req).topics[0].partitions[0]
        return int(p.error_code), int(p.offset), int(p.timestamp)

    def init_producer_id(self) -> tuple[int, int, int]:
        """Retries while the coordinator loads (Kafka creates its state topic on first use)."""
        deadline = time.monotonic() + 30
        while True:
            r = self.call(INIT_PRODUCER_ID, InitProducerIdRequest(transactional_id=None,
                                                                  transaction_timeout_ms=60000))
            if int(r.error_code) not in RETRIABLE_COORDINATOR or time.monotonic() > deadline:
                return int(r.error_code), int(r.producer_id), int(r.producer_epoch)
            time.sleep(0.2)

    # -- groups -----------------------------------------------------------------------------------

    def find_coordinator(self, group: str) -> tuple[int, bool]:
        """(error code, coordinator is this bootstrap address's node); retries while Kafka
        creates and loads its offsets topic on first use."""
        from kafka_wire.messages.find_coordinator import FindCoordinatorRequest

        deadline = time.monotonic() + 60
        while True:
            r = self.call(FIND_COORDINATOR, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]))
            c = r.coordinators[0]
            # Kafka answers FindCoordinator before the offsets partition has loaded: also wait
            # until the coordinator itself answers.
            ready = int(c.error_code) not in RETRIABLE_COORDINATOR and (
                int(self.describe_group(group).error_code) not in RETRIABLE_COORDINATOR)
            if ready or time.monotonic() > deadline:
                return int(c.error_code), c.port == self.raw.sock.getpeername()[1]
            time.sleep(0.2)

    def join(self, group: str, member_id: str = "", *, protocols: tuple[tuple[str, bytes], ...] = (("range", b"m"),),
             session_timeout_ms: int = 10000, rebalance_timeout_ms: int = 10000) -> Any:
        return self.call(JOIN_GROUP, JG(
            group_id=group, session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
            member_id=member_id, protocol_type="consumer",
            protocols=[JG.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols]))

    def sync(self, group: str, generation: int, member_id: str, assignments: dict[str, bytes] | None = None) -> Any:
        return self.call(SYNC_GROUP, SG(
            group_id=group, generation_id=generation, member_id=member_id, protocol_type="consumer",
            protocol_name="range",
            assignments=[SG.SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in (assignments or {}).items()]))

    def heartbeat(self, group: str, generation: int, member_id: str) -> int:
        return int(self.call(HEARTBEAT, HeartbeatRequest(group_id=group, generation_id=generation,
                                                         member_id=member_id)).error_code)

    def leave(self, group: str, member_id: str) -> tuple[int, list[int]]:
        r = self.call(LEAVE_GROUP, LG(group_id=group, members=[LG.MemberIdentity(member_id=member_id)]))
        return int(r.error_code), [int(m.error_code) for m in r.members]

    def commit(self, group: str, generation: int, member_id: str, topic: str, offsets: dict[int, int]
               ) -> dict[int, int]:
        r = self.call(OFFSET_COMMIT, OC(group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                                        topics=[OC.OffsetCommitRequestTopic(name=topic, partitions=[
                                            OC.OffsetCommitRequestPartition(partition_index=p, committed_offset=o)
                                            for p, o in offsets.items()])]))
        return {int(p.partition_index): int(p.error_code) for p in r.topics[0].partitions}

    def fetch_offsets(self, group: str, topic: str, partitions: list[int]) -> Any:
        """{partition: (error, offset)}, or the top-level error code when there are no topics."""
        r = self.call(OFFSET_FETCH, OF(group_id=group, topics=[
            OF.OffsetFetchRequestTopic(name=topic, partition_indexes=partitions)]))
        if not r.topics:
            return {"error": int(r.error_code)}
        return {int(p.partition_index): (int(p.error_code), int(p.committed_offset)) for p in r.topics[0].partitions}

    def describe_group(self, group: str) -> Any:
        from kafka_wire.messages.describe_groups import DescribeGroupsRequest

        return self.call(DESCRIBE_GROUPS, DescribeGroupsRequest(groups=[group])).groups[0]

    def list_groups(self) -> Any:
        from kafka_wire.messages.list_groups import ListGroupsRequest

        return self.call(LIST_GROUPS, ListGroupsRequest())
