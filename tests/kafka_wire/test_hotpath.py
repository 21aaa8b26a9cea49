"""The hand-tuned Produce decoder and Fetch encoder against the generated codecs
(kafka_wire.messages) and kafka-python's independent ones, for every version."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchResponse as KpFetchResponse
from kafka.protocol.producer import ProduceRequest as KpProduceRequest

from kafka_wire.exceptions import DecodeError
from kafka_wire.hotpath import (
    FETCH_VERSIONS,
    PRODUCE_VERSIONS,
    FetchPartition,
    FetchTopic,
    NodeEndpoint,
    decode_produce_request,
    encode_fetch_response,
)
from kafka_wire.messages.fetch import FetchResponse
from kafka_wire.messages.produce import ProduceRequest
from kafka_wire.records import NewRecord, RecordBatch, build_batch

TID_A, TID_B = uuid.UUID(int=0x1234), uuid.UUID(int=0xABCDEF)
BATCH = build_batch([NewRecord(b"k", b"v" * 100, [("h", b"x")], 5)])
BATCH2 = build_batch([NewRecord(None, b"w" * 300, (), 6)] * 3)


def generated_produce(version: int) -> bytes:
    T, P = ProduceRequest.TopicProduceData, ProduceRequest.PartitionProduceData
    req = ProduceRequest(
        transactional_id="txn-é" if version % 2 else None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            T(
                name="alpha",
                topic_id=TID_A,
                partition_data=[P(index=0, records=BATCH), P(index=7, records=None)],
            ),
            T(name="b" * 300, topic_id=TID_B, partition_data=[P(index=2, records=BATCH2)]),
        ],
    )
    return req.encode(version)


def expected(version: int) -> list[tuple[object, int, bytes | None]]:
    a, b = (TID_A, TID_B) if version >= 13 else ("alpha", "b" * 300)
    return [(a, 0, BATCH), (a, 7, None), (b, 2, BATCH2)]


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_decode_matches_generated(version: int) -> None:
    data = generated_produce(version)
    view = decode_produce_request(data, version)
    gen = ProduceRequest.decode(data, version)
    assert (view.transactional_id, view.acks, view.timeout_ms) == (
        gen.transactional_id,
        gen.acks,
        gen.timeout_ms,
    )
    got = [(p.topic, p.partition, None if p.records is None else bytes(p.records)) for p in view.partitions]
    assert got == expected(version)
    gen_parts = [
        (t.topic_id if version >= 13 else t.name, p.index, None if p.records is None else bytes(p.records))
        for t in gen.topic_data
        for p in t.partition_data
    ]
    assert got == gen_parts


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_decode_matches_kafka_python(version: int) -> None:
    T, P = KpProduceRequest.TopicProduceData, KpProduceRequest.TopicProduceData.PartitionProduceData
    kp = KpProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=100,
        topic_data=[T(name="alpha", topic_id=TID_A, partition_data=[P(index=3, records=BATCH)])],
    )
    view = decode_produce_request(kp.encode(version=version), version)
    assert (view.acks, view.timeout_ms, len(view.partitions)) == (1, 100, 1)
    p = view.partitions[0]
    assert (p.topic, p.partition, bytes(p.records or b"")) == (TID_A if version >= 13 else "alpha", 3, BATCH)


def test_produce_records_are_zero_copy_views() -> None:
    buf = bytearray(b"\xee" * 5 + generated_produce(9))
    view = decode_produce_request(buf, 9, offset=5)
    recs = view.partitions[0].records
    assert recs is not None and recs.obj is buf
    RecordBatch(recs).set_base_offset(999)
    RecordBatch(recs).validate()
    assert RecordBatch(view.partitions[0].records or b"").base_offset == 999
    assert bytes(buf).count(struct.pack(">q", 999)) == 1


@pytest.mark.parametrize("version", [3, 8, 9, 12, 13])
def test_produce_truncations_raise_decode_error(version: int) -> None:
    data = generated_produce(version)
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            decode_produce_request(data[:cut], version)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=80), version=st.sampled_from(list(PRODUCE_VERSIONS)))
def test_produce_garbage_raises_only_decode_error(data: bytes, version: int) -> None:
    try:
        decode_produce_request(data, version)
    except DecodeError:
        pass


def test_unsupported_versions() -> None:
    with pytest.raises(DecodeError):
        decode_produce_request(generated_produce(3), 2)
    with pytest.raises(ValueError):
        encode_fetch_response(3, [])


def fetch_spec(version: int) -> list[FetchTopic]:
    flex = version >= 12
    a, b = (TID_A, TID_B) if version >= 13 else ("alpha", "beta")
    return [
        FetchTopic(
            a,
            [
                FetchPartition(
                    0,
                    0,
                    100,
                    90,
                    10,
                    [(5, 50), (6, 60)],
                    3 if version >= 11 else -1,
                    [BATCH, memoryview(BATCH2)],
                    diverging_epoch=(4, 80) if flex else None,
                    current_leader=(1, 9) if flex else None,
                ),
                FetchPartition(1, 6, -1, records=None, snapshot_id=(70, 2) if flex else None),
                FetchPartition(2, 0, 5, 5, 0, None, -1, []),
            ],
        ),
        FetchTopic(b, []),
    ]


def generated_fetch(
    version: int, spec: list[FetchTopic], nodes: list[NodeEndpoint], session: int
) -> FetchResponse:
    R, PD = FetchResponse.FetchableTopicResponse, FetchResponse.PartitionData
    topics = []
    for t in spec:
        parts = []
        for p in t.partitions:
            kw: dict[str, object] = {}
            if p.diverging_epoch:
                kw["diverging_epoch"] = FetchResponse.EpochEndOffset(
                    epoch=p.diverging_epoch[0], end_offset=p.diverging_epoch[1]
                )
            if p.current_leader:
                kw["current_leader"] = FetchResponse.LeaderIdAndEpoch(
                    leader_id=p.current_leader[0], leader_epoch=p.current_leader[1]
                )
            if p.snapshot_id:
                kw["snapshot_id"] = FetchResponse.SnapshotId(
                    end_offset=p.snapshot_id[0], epoch=p.snapshot_id[1]
                )
            parts.append(
                PD(
                    partition_index=p.partition_index,
                    error_code=p.error_code,
                    high_watermark=p.high_watermark,
                    last_stable_offset=p.last_stable_offset,
                    log_start_offset=p.log_start_offset,
                    aborted_transactions=None
                    if p.aborted_transactions is None
                    else [
                        FetchResponse.AbortedTransaction(producer_id=x, first_offset=y)
                        for x, y in p.aborted_transactions
                    ],
                    preferred_read_replica=p.preferred_read_replica,
                    records=None if p.records is None else b"".join(p.records),
                    **kw,  # type: ignore[arg-type]
                )
            )
        if isinstance(t.topic, uuid.UUID):
            topics.append(R(topic_id=t.topic, partitions=parts))
        else:
            topics.append(R(topic=t.topic, partitions=parts))
    return FetchResponse(
        throttle_time_ms=7,
        error_code=0,
        session_id=session,
        responses=topics,
        node_endpoints=[
            FetchResponse.NodeEndpoint(node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
            for n in nodes
        ],
    )


@pytest.mark.parametrize("version", FETCH_VERSIONS)
@pytest.mark.parametrize("with_nodes", [False, True])
def test_fetch_encode_matches_generated(version: int, with_nodes: bool) -> None:
    nodes = (
        [NodeEndpoint(1, "host-a", 9092, None), NodeEndpoint(2, "host-b", 9093, "rack-1")]
        if with_nodes
        else []
    )
    spec = fetch_spec(version)
    session = 1234 if version >= 7 else 0  # the generated codec, like Kafka's, refuses it before v7
    parts = encode_fetch_response(version, spec, throttle_time_ms=7, session_id=session, node_endpoints=nodes)
    ours = b"".join(parts)
    expected_nodes = nodes if version >= 16 else []
    assert ours == generated_fetch(version, spec, expected_nodes, session).encode(version)
    # the stored batches are passed through as the very same objects
    assert any(x is BATCH for x in parts)
    decoded = FetchResponse.decode(ours, version)
    assert bytes(decoded.responses[0].partitions[0].records or b"") == BATCH + BATCH2
    # and kafka-python, written independently, reads it too
    kp = KpFetchResponse.decode(ours, version=version)
    assert kp.session_id == 1234 if version >= 7 else True
    assert kp.responses[0].partitions[0].high_watermark == 100


@pytest.mark.parametrize("version", [4, 11, 12, 18])
def test_fetch_frame_with_header(version: int) -> None:
    parts = encode_fetch_response(version, fetch_spec(version), correlation_id=99)
    data = b"".join(parts)
    (size, corr) = struct.unpack_from(">ii", data)
    assert size == len(data) - 4 and corr == 99
    head = 9 if version >= 12 else 8
    assert data[head:] == b"".join(encode_fetch_response(version, fetch_spec(version)))


def test_fetch_rejects_wrong_topic_kind() -> None:
    with pytest.raises(ValueError):
        encode_fetch_response(13, [FetchTopic("name", [])])
    with pytest.raises(ValueError):
        encode_fetch_response(12, [FetchTopic(TID_A, [])])


@pytest.mark.parametrize("size", [0, 127, 128, 16383, 16384, 2097151, 2097152])
@pytest.mark.parametrize("version", [8, 9, 13])
def test_produce_records_length_boundaries(size: int, version: int) -> None:
    T, P = ProduceRequest.TopicProduceData, ProduceRequest.PartitionProduceData
    blob = bytes(range(256)) * (size // 256) + bytes(size % 256)
    req = ProduceRequest(
        acks=1,
        timeout_ms=5,
        topic_data=[
            T(name="t", topic_id=TID_A, partition_data=[P(index=1, records=blob), P(index=2, records=b"z")])
        ],
    )
    view = decode_produce_request(req.encode(version), version)
    assert [bytes(p.records or b"") for p in view.partitions] == [blob, b"z"]
