"""Generated-code semantics: defaults, `ignorable`, tagged fields, nullability, zero-copy records,
schema comment stripping and lazy imports."""

from __future__ import annotations

import struct
import subprocess
import sys
from typing import Any
from uuid import UUID

import pytest

from kafka_wire.api import API_KEYS, request_class, response_class
from kafka_wire.codegen.schema import snake, strip_comments
from kafka_wire.exceptions import DecodeError
from kafka_wire.primitives import EncodeError, FieldInfo, Struct
from tests.kafka_wire.test_messages_roundtrip import CASES, _present, is_flexible

Fetch = request_class(1)
FetchResp = response_class(1)
Metadata = request_class(3)


def test_defaults_as_kafka_defines_them() -> None:
    assert Metadata().allow_auto_topic_creation is True
    assert Fetch().replica_id == -1
    assert Fetch().cluster_id is None
    assert request_class(0)().transactional_id is None
    assert request_class(11)().rebalance_timeout_ms == -1  # JoinGroup
    assert request_class(11)().group_instance_id is None
    assert request_class(1).FetchPartition().current_leader_epoch == -1
    assert Fetch.FetchTopic().topic_id == UUID(int=0)
    # Absent in an old version -> the default on decode.
    old = Metadata(topics=None).encode(3)
    assert Metadata.decode(old, 3).allow_auto_topic_creation is True
    # Fresh mutable defaults, never shared.
    a, b = Metadata(), Metadata()
    assert a.topics == [] and a.topics is not b.topics


def _non_default(f: FieldInfo, current: Any) -> Any:
    if f.type.startswith("[]"):
        return [] if current is None else [f.struct() if f.struct else _scalar_nd(f.type[2:], None)]
    if f.struct is not None:
        return f.struct(unknown_tagged_fields=((4242, b""),))
    return _scalar_nd(f.type, current)


def _scalar_nd(t: str, current: Any) -> Any:
    if t == "bool":
        return not current
    if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return 1 if current != 1 else 2
    if t == "float64":
        return 1.5
    if t == "string":
        return "x" if current != "x" else "y"
    if t in ("bytes", "records"):
        return b"x"
    if t == "uuid":
        return UUID(int=7)
    raise AssertionError(t)


def test_ignorable_semantics_for_every_absent_field() -> None:
    """A non-default value for a field the version lacks: dropped if ignorable, else EncodeError."""
    raised = dropped = 0
    for cls, v in CASES:
        flexible = is_flexible(cls, v)
        for f in cls._FIELDS:
            if _present(f, v, flexible):
                continue
            obj = cls()
            setattr(obj, f.attr, _non_default(f, getattr(obj, f.attr)))
            if f.ignorable:
                assert obj.encode(v) == cls().encode(v), (cls, v, f.attr)
                dropped += 1
            else:
                with pytest.raises(EncodeError, match=f.attr):
                    obj.encode(v)
                raised += 1
    assert raised > 100 and dropped > 100


def test_non_nullable_null_is_rejected_both_ways() -> None:
    hb = request_class(12)  # Heartbeat: group_id is not nullable
    with pytest.raises(EncodeError, match="group_id"):
        hb(group_id=None).encode(0)  # type: ignore[arg-type]
    with pytest.raises(DecodeError, match="null value") as e:
        hb.decode(struct.pack(">hi", -1, 1) + struct.pack(">h", 1) + b"m", 0)
    assert e.value.where == "HeartbeatRequest.group_id"
    # Metadata v1+ topics are nullable (null = all topics), v0 are not.
    assert Metadata.decode(Metadata(topics=None).encode(1), 1).topics is None
    with pytest.raises(EncodeError):
        Metadata(topics=None).encode(0)


def test_known_and_unknown_tagged_fields() -> None:
    resp = FetchResp(
        throttle_time_ms=1,
        node_endpoints=[FetchResp.NodeEndpoint(node_id=1, host="h", port=9092, rack=None)],
        unknown_tagged_fields=((3, b"\x09"), (7, b"")),
    )
    data = resp.encode(16)
    # Top-level tag section at the end: tags 0 (known), 3 and 7 (unknown) in ascending order.
    endpoints = b"\x02" + resp.node_endpoints[0].encode(16)
    assert data.endswith(b"\x03" + b"\x00" + bytes([len(endpoints)]) + endpoints + b"\x03\x01\x09\x07\x00")
    back = FetchResp.decode(data, 16)
    assert back == resp
    assert back.unknown_tagged_fields == ((3, b"\x09"), (7, b""))
    assert back.encode(16) == data
    # An unknown tag below a known one is re-encoded in ascending order, interleaved.
    req = Fetch(cluster_id="c1", unknown_tagged_fields=((5, b"z"),), replica_state=Fetch.ReplicaState(replica_id=3))
    data = req.encode(15)
    back = Fetch.decode(data, 15)
    assert back == req and back.encode(15) == data
    state = Fetch.ReplicaState(replica_id=3).encode(15)
    assert data.endswith(b"\x03" + b"\x00\x03\x03c1" + b"\x01" + bytes([len(state)]) + state + b"\x05\x01z")
    # Known tagged fields are absent in non-flexible versions: ignorable cluster_id is dropped.
    assert Fetch.decode(Fetch(cluster_id="c1").encode(11), 11).cluster_id is None
    # Tagged fields at their default are not written at all.
    assert Fetch().encode(12)[-1:] == b"\x00"


def test_tagged_payload_must_be_consumed_exactly() -> None:
    good = Fetch(cluster_id="ab").encode(12)
    assert good.endswith(b"\x01\x00\x03\x03ab")
    bad = good[:-6] + b"\x01\x00\x04\x03abX"
    with pytest.raises(DecodeError, match="unread"):
        Fetch.decode(bad, 12)


def test_nullable_struct_marker() -> None:
    cgh = response_class(68)  # ConsumerGroupHeartbeatResponse.assignment: nullable struct
    none = cgh(member_id="m", assignment=None)
    some = cgh(member_id="m", assignment=cgh.Assignment(topic_partitions=[
        cgh.TopicPartitions(topic_id=UUID(int=5), partitions=[1, 2])]))
    d_none, d_some = none.encode(0), some.encode(0)
    assert cgh.decode(d_none, 0) == none and cgh.decode(d_some, 0) == some
    assert d_none[-2:] == b"\xff\x00"  # -1 marker, then the body's empty tag section
    assert len(d_some) > len(d_none)


def test_records_decode_zero_copy() -> None:
    produce = request_class(0)
    req = produce(acks=1, topic_data=[produce.TopicProduceData(name="t", partition_data=[
        produce.PartitionProduceData(index=0, records=b"RECORDBATCH")])])
    buf = bytearray(req.encode(9))
    back = produce.decode(buf, 9)
    recs = back.topic_data[0].partition_data[0].records
    assert isinstance(recs, memoryview) and bytes(recs) == b"RECORDBATCH"
    buf[buf.index(b"RECORDBATCH")] = ord("X")  # the slice shares the input's memory
    assert bytes(recs) == b"XECORDBATCH"
    assert produce.PartitionProduceData(index=0, records=memoryview(b"ab")).encode(9) == \
        produce.PartitionProduceData(index=0, records=b"ab").encode(9)


def test_uuid_and_float_and_unsigned() -> None:
    assert API_KEYS[1].flexible_min == 12
    topic = Fetch.FetchTopic(topic_id=UUID(int=(1 << 128) - 1))
    assert Fetch.FetchTopic.decode(topic.encode(13), 13) == topic
    with pytest.raises(EncodeError):
        request_class(11)(session_timeout_ms=1 << 40).encode(5)  # does not fit an int32


def test_strings_must_be_utf8_and_short() -> None:
    with pytest.raises(EncodeError, match="32767"):
        request_class(12)(group_id="x" * 40000).encode(0)


def test_strip_comments_keeps_slashes_in_strings() -> None:
    text = '{"a": "http://x//y", // comment\n  "b": "\\"//\\""} // end'
    assert strip_comments(text) == '{"a": "http://x//y", \n  "b": "\\"//\\""} '


@pytest.mark.parametrize(("name", "attr"), [("ThrottleTimeMs", "throttle_time_ms"), ("TopicID", "topic_id"),
                                            ("ClientId", "client_id"), ("IsInternal", "is_internal")])
def test_snake_names(name: str, attr: str) -> None:
    assert snake(name) == attr


def test_struct_equality_and_repr() -> None:
    a = Metadata(topics=[Metadata.MetadataRequestTopic(name="t")])
    assert a == Metadata(topics=[Metadata.MetadataRequestTopic(name="t")])
    assert a != Metadata()
    assert "MetadataRequestTopic(" in repr(a)
    with pytest.raises(TypeError):
        hash(a)
    assert isinstance(a, Struct)


def test_importing_kafka_wire_is_lazy() -> None:
    code = ("import sys, kafka_wire, kafka_wire.api, kafka_wire.frames; "
            "mods = [m for m in sys.modules if m.startswith('kafka_wire.messages.')]; print(len(mods))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert int(out.stdout) <= 2  # the two header modules


def test_versioned_consumer_protocol_blobs() -> None:
    from kafka_wire.api import decode_versioned, encode_versioned, schema_class

    sub_cls = schema_class("ConsumerProtocolSubscription")
    sub = sub_cls(topics=["a", "b"], user_data=b"u", owned_partitions=[], generation_id=3, rack_id="r")
    blob = encode_versioned(sub, 3)
    assert blob[:2] == b"\x00\x03"
    assert decode_versioned(sub_cls, blob) == (3, sub)
    # A newer version (more fields appended) is read as our newest, ignoring the extra bytes.
    newer = b"\x00\x09" + blob[2:] + b"\x00\x00\x00\x07extra"
    assert decode_versioned(sub_cls, newer) == (9, sub)
    with pytest.raises(DecodeError):
        decode_versioned(sub_cls, b"\xff\xff")
    with pytest.raises(DecodeError):
        decode_versioned(sub_cls, b"\x00")
