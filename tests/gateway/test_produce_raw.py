"""Produce/Fetch and friends on the wire (our own codecs as the client) against a standalone
gateway: duplicates, errors, fetch sessions, long polls. Also the raw-call helper other
modules here import."""

from __future__ import annotations

import socket
import struct
import time
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from coordinator.group.records import encode_group_key
from coordinator.txn.records import encode_key as encode_txn_key
from kafka_wire.errors import ErrorCode
from kafka_wire.frames import decode_response, encode_request
from kafka_wire.messages.fetch import FetchRequest
from kafka_wire.messages.find_coordinator import FindCoordinatorRequest
from kafka_wire.messages.group_metadata_key import GroupMetadataKey
from kafka_wire.messages.metadata import MetadataRequest
from kafka_wire.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from kafka_wire.messages.produce import ProduceRequest
from kafka_wire.messages.request_header import RequestHeader
from kafka_wire.records import NewRecord, build_batch, iter_batches
from tests.support.gateway import StandaloneGateway

_corr = iter(range(1, 1 << 30))


class Raw:
    """One connection speaking Kafka with kafka_wire's codecs."""

    def __init__(self, bootstrap: str, client_id: str = "raw") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.client_id = client_id

    def call(self, body: Any, version: int) -> Any:
        self.send(body, version)
        return self.recv(body.API_KEY, version)

    def send(self, body: Any, version: int) -> None:
        hdr = RequestHeader(
            api_key=body.API_KEY, api_version=version, correlation_id=next(_corr), client_id=self.client_id
        )
        self.sock.sendall(encode_request(hdr, body))

    def recv(self, api_key: int, version: int) -> Any:
        size = struct.unpack(">i", self._exact(4))[0]
        _, resp = decode_response(api_key, version, self._exact(size))
        return resp

    def _exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self.sock.close()


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name]
    fut.result(30)


def produce_request(topic: str, data: bytes, *, acks: int = -1, partition: int = 0) -> ProduceRequest:
    part = ProduceRequest.PartitionProduceData(index=partition, records=data)
    return ProduceRequest(
        acks=acks,
        timeout_ms=30000,
        topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[part])],
    )


def produce_one(raw: Raw, topic: str, data: bytes, version: int = 9) -> Any:
    resp = raw.call(produce_request(topic, data), version)
    return resp.responses[0].partition_responses[0]


def fetch_request(
    topic: str | uuid.UUID,
    offset: int,
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    partition_max_bytes: int = 1 << 20,
    session_id: int = 0,
    session_epoch: int = -1,
) -> FetchRequest:
    fp = FetchRequest.FetchPartition(
        partition=0, fetch_offset=offset, partition_max_bytes=partition_max_bytes
    )
    ft = (
        FetchRequest.FetchTopic(topic_id=topic, partitions=[fp])
        if isinstance(topic, uuid.UUID)
        else FetchRequest.FetchTopic(topic=topic, partitions=[fp])
    )
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=50 << 20,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=[ft],
    )


def batch(n: int = 1, *, pid: int = -1, epoch: int = -1, seq: int = -1, value: bytes = b"v") -> bytes:
    recs = [NewRecord(b"k%d" % i, value, (), int(time.time() * 1000)) for i in range(n)]
    return build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


@pytest.fixture
def raw(module_standalone: StandaloneGateway) -> Any:
    r = Raw(module_standalone.bootstrap)
    yield r
    r.close()


def test_produce_errors(module_standalone: StandaloneGateway, raw: Raw) -> None:
    create_topic(module_standalone.bootstrap, "raw-err", **{"max.message.bytes": "2000"})
    assert produce_one(raw, "raw-err", batch(1, value=b"x" * 3000)).error_code == ErrorCode.MESSAGE_TOO_LARGE
    bad = bytearray(batch(1))
    bad[-1] ^= 1
    assert produce_one(raw, "raw-err", bytes(bad)).error_code == ErrorCode.CORRUPT_MESSAGE
    assert produce_one(raw, "raw-err", batch(1) + batch(1)).error_code == ErrorCode.INVALID_RECORD
    assert produce_one(raw, "no-such-topic-xyz", batch(1)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    r = produce_one(raw, "raw-err", batch(1))
    assert (r.error_code, r.base_offset) == (0, 0)
    # acks=0: no response; the next request's answer comes back in order
    raw.send(produce_request("raw-err", batch(1), acks=0), 9)
    r = produce_one(raw, "raw-err", batch(1))
    assert (r.error_code, r.base_offset) == (0, 2)


@pytest.mark.parametrize("topic", ["__consumer_offsets", "__transaction_state"])
def test_produce_to_an_internal_topic_is_refused_but_to_the_admin_client(
    module_standalone: StandaloneGateway, raw: Raw, topic: str
) -> None:
    """As Kafka's ReplicaManager: INVALID_TOPIC_EXCEPTION (no message) per partition, unless
    the client id is `__admin_client`; an absent partition is still UNKNOWN_TOPIC_OR_PARTITION."""
    # the coordinators create their topics on the first FindCoordinator, as Kafka
    fc = raw.call(FindCoordinatorRequest(key_type=int(topic == "__transaction_state"), coordinator_keys=["k"]), 4)
    assert fc.coordinators[0].error_code == 0
    md = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12)
    parts = len(md.topics[0].partitions)
    assert md.topics[0].error_code == 0 and parts > 0
    for version in (3, 9, 12):
        r = produce_one(raw, topic, batch(1), version)
        assert (r.error_code, r.base_offset, r.error_message) == (ErrorCode.INVALID_TOPIC_EXCEPTION, -1, None)
    resp = raw.call(produce_request(topic, batch(1), partition=parts), 9)
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    before = raw.call(fetch_request(topic, 0), 12).responses[0].partitions[0].high_watermark
    # a tombstone of a group / transactional id that never existed: harmless to the coordinator
    key = (encode_group_key(GroupMetadataKey(group="never-a-group")) if topic == "__consumer_offsets"
           else encode_txn_key("never-a-transactional-id"))
    admin = Raw(module_standalone.bootstrap, client_id="__admin_client")
    try:
        r = produce_one(admin, topic, build_batch([NewRecord(key, None)]), 9)
        assert (r.error_code, r.base_offset) == (0, before)
    finally:
        admin.close()


def test_fetch_after_acks0_produce_on_the_same_connection_sees_it(
        module_standalone: StandaloneGateway, raw: Raw) -> None:
    """Kafka applies a connection's requests in order, so a Fetch sent right behind an acks=0
    Produce (pipelined: one send, no answer awaited) reads its batch; here the batch must be
    durable first, which the Fetch waits for."""
    create_topic(module_standalone.bootstrap, "raw-acks0")
    assert produce_one(raw, "raw-acks0", batch(1)).error_code == 0  # the partition is open
    for offset in range(1, 21):
        hdr = RequestHeader(api_key=0, api_version=9, correlation_id=next(_corr), client_id="raw")
        produce = encode_request(hdr, produce_request("raw-acks0", batch(1), acks=0))
        hdr = RequestHeader(api_key=1, api_version=12, correlation_id=next(_corr), client_id="raw")
        fetch = encode_request(hdr, fetch_request("raw-acks0", offset))  # max_wait_ms=0: no long poll
        raw.sock.sendall(produce + fetch)
        p = raw.recv(1, 12).responses[0].partitions[0]
        assert (p.error_code, p.high_watermark) == (0, offset + 1)
        assert [b.base_offset for b in iter_batches(p.records)] == [offset]


def test_offset_for_leader_epoch(module_standalone: StandaloneGateway, raw: Raw) -> None:
    create_topic(module_standalone.bootstrap, "raw-epoch")
    produce_one(raw, "raw-epoch", batch(3))
    req = OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                topic="raw-epoch",
                partitions=[
                    OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                        partition=0, current_leader_epoch=-1, leader_epoch=0
                    )
                ],
            )
        ],
    )
    p = raw.call(req, 4).topics[0].partitions[0]
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 3)
    req.topics[0].partitions[0].current_leader_epoch = 9
    assert raw.call(req, 4).topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_produce_by_topic_id(module_standalone: StandaloneGateway, raw: Raw) -> None:
    from kafka_wire.messages.metadata import MetadataRequest

    create_topic(module_standalone.bootstrap, "raw-ids")
    md = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="raw-ids")]), 12)
    tid = md.topics[0].topic_id
    for topic_id, code in ((tid, 0), (uuid.uuid4(), ErrorCode.UNKNOWN_TOPIC_ID)):
        part = ProduceRequest.PartitionProduceData(index=0, records=batch(2))
        req = ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[
            ProduceRequest.TopicProduceData(topic_id=topic_id, partition_data=[part])])
        resp = raw.call(req, 13)
        assert resp.responses[0].topic_id == topic_id
        assert resp.responses[0].partition_responses[0].error_code == code
    assert raw.call(fetch_request(tid, 0), 13).responses[0].partitions[0].high_watermark == 2
