"""Request order on one connection (Kafka handles a connection's requests one at a time, so each
sees the effects of those sent before it): in-process with gated test handlers (a later request
waits for the earlier one's effects; produces overlap their durability waits, other requests
wait for them), then back-to-back pairs of every state-changing API against a standalone."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest

from gateway.config import GatewayConfig
from gateway.context import RequestContext
from gateway.handlers.registry import HANDLERS
from gateway.handlers.spec import HandlerSpec, RawResponse
from gateway.server import GatewayServer
from gateway.services import GatewayServices
from kafka_wire.errors import ErrorCode
from kafka_wire.headers import RequestHeader
from kafka_wire.messages.alter_configs import AlterConfigsRequest
from kafka_wire.messages.create_partitions import CreatePartitionsRequest
from kafka_wire.messages.create_topics import CreateTopicsRequest
from kafka_wire.messages.delete_groups import DeleteGroupsRequest
from kafka_wire.messages.delete_records import DeleteRecordsRequest
from kafka_wire.messages.delete_topics import DeleteTopicsRequest
from kafka_wire.messages.describe_configs import DescribeConfigsRequest
from kafka_wire.messages.describe_groups import DescribeGroupsRequest
from kafka_wire.messages.find_coordinator import FindCoordinatorRequest
from kafka_wire.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kafka_wire.messages.init_producer_id import InitProducerIdRequest
from kafka_wire.messages.join_group import JoinGroupRequest
from kafka_wire.messages.leave_group import LeaveGroupRequest
from kafka_wire.messages.list_groups import ListGroupsRequest
from kafka_wire.messages.list_offsets import ListOffsetsRequest
from kafka_wire.messages.metadata import MetadataRequest
from kafka_wire.messages.offset_commit import OffsetCommitRequest
from kafka_wire.messages.offset_delete import OffsetDeleteRequest
from kafka_wire.messages.offset_fetch import OffsetFetchRequest
from kafka_wire.messages.sync_group import SyncGroupRequest
from kafka_wire.records import iter_batches
from tests.coordinator.gateway_support import start_gateway
from tests.gateway.test_produce_raw import Raw, batch, create_topic, fetch_request, produce_request
from tests.support.gateway import StandaloneGateway

TOPIC_RESOURCE = 2
WRITE, READ, PRODUCE = 3, 1, 0  # keys served by raw test handlers here (versions with header v1)


class _State:
    def __init__(self) -> None:
        self.value = 0
        self.gates: dict[int, asyncio.Event] = {}  # correlation id -> released
        self.started: dict[int, asyncio.Event] = {}

    def gate(self, cid: int) -> asyncio.Event:
        return self.gates.setdefault(cid, asyncio.Event())

    def start(self, cid: int) -> asyncio.Event:
        return self.started.setdefault(cid, asyncio.Event())


@pytest.fixture
async def served(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[GatewayServer, _State]]:
    st = _State()

    async def write(ctx: RequestContext, body: memoryview) -> RawResponse:
        st.start(ctx.correlation_id).set()
        await st.gate(ctx.correlation_id).wait()  # e.g. a metadata-store round trip
        st.value += 1
        return RawResponse([struct.pack(">i", st.value)])

    async def read(ctx: RequestContext, body: memoryview) -> RawResponse:
        st.start(ctx.correlation_id).set()
        return RawResponse([struct.pack(">i", st.value)])

    async def produce(ctx: RequestContext, body: memoryview) -> RawResponse:
        st.start(ctx.correlation_id).set()
        st.value += 1  # sequenced...
        seen = st.value
        ctx.effects_applied(durability_pending=True)
        await st.gate(ctx.correlation_id).wait()  # ...then durable
        return RawResponse([struct.pack(">i", seen)])

    monkeypatch.setitem(HANDLERS, WRITE, HandlerSpec(WRITE, write, True, None, None))
    monkeypatch.setitem(HANDLERS, READ, HandlerSpec(READ, read, True, None, None))
    monkeypatch.setitem(HANDLERS, PRODUCE, HandlerSpec(PRODUCE, produce, True, None, None, True))
    config = GatewayConfig(listen_port=0)
    srv = GatewayServer(cast(GatewayServices, SimpleNamespace(config=config)))
    await srv.start()
    try:
        yield srv, st
    finally:
        await srv.close()


_VERSION = {WRITE: 1, READ: 4, PRODUCE: 3}  # not flexible: request header v1, response v0


def _frame(key: int, cid: int) -> bytes:
    out = bytearray(4)
    RequestHeader(api_key=key, api_version=_VERSION[key], correlation_id=cid, client_id="t").encode_into(out, 1)
    out[0:4] = struct.pack(">i", len(out) - 4)
    return bytes(out)


async def _answers(r: asyncio.StreamReader, n: int) -> list[tuple[int, int]]:
    out = []
    for _ in range(n):
        (size,) = struct.unpack(">i", await r.readexactly(4))
        out.append(struct.unpack(">ii", await r.readexactly(size)))
    return out


async def test_a_request_sees_the_effects_of_the_one_before(served: tuple[GatewayServer, _State]) -> None:
    srv, st = served
    r, w = await asyncio.open_connection("127.0.0.1", srv.port)
    w.write(_frame(WRITE, 1) + _frame(READ, 2))
    await st.start(1).wait()
    # The write is stuck mid-way; the read must not have run yet (it would see 0).
    assert 2 not in st.started
    st.gate(1).set()
    assert await _answers(r, 2) == [(1, 1), (2, 1)]
    w.close()


async def test_produce_durability_waits_overlap_and_others_wait_for_them(
        served: tuple[GatewayServer, _State]) -> None:
    srv, st = served
    r, w = await asyncio.open_connection("127.0.0.1", srv.port)
    w.write(_frame(PRODUCE, 1) + _frame(PRODUCE, 2) + _frame(READ, 3) + _frame(PRODUCE, 4))
    # The second produce starts while the first still waits for durability...
    await st.start(2).wait()
    # ...but the read waits until both are answered, and so does the produce after it.
    assert 3 not in st.started and 4 not in st.started
    st.gate(2).set()
    st.gate(1).set()
    await st.start(4).wait()
    st.gate(4).set()
    assert await _answers(r, 4) == [(1, 1), (2, 2), (3, 2), (4, 3)]
    w.close()


# -- back-to-back pairs against a standalone -------------------------------------------------------


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneGateway]:
    g = start_gateway(tmp_path_factory.mktemp("request-order") / "data")  # groups rebalance at once
    try:
        yield g
    finally:
        g.stop(timeout=20.0)


@pytest.fixture
def raw(gw: StandaloneGateway) -> Iterator[Raw]:
    r = Raw(gw.bootstrap)
    yield r
    r.close()


def _pair(raw: Raw, first: tuple[Any, int], then: tuple[Any, int]) -> tuple[Any, Any]:
    """Both requests written before either answer is read: one connection, back to back."""
    raw.send(*first)
    raw.send(*then)
    return raw.recv(first[0].API_KEY, first[1]), raw.recv(then[0].API_KEY, then[1])


def _metadata(topic: str) -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                           allow_auto_topic_creation=False)


def _list_offsets(topic: str, timestamp: int) -> ListOffsetsRequest:
    LT, LP = ListOffsetsRequest.ListOffsetsTopic, ListOffsetsRequest.ListOffsetsPartition
    return ListOffsetsRequest(replica_id=-1, topics=[LT(name=topic, partitions=[LP(partition_index=0, timestamp=timestamp)])])


def test_topic_admin_pairs(raw: Raw) -> None:
    CT = CreateTopicsRequest.CreatableTopic
    c, m = _pair(raw, (CreateTopicsRequest(topics=[CT(name="ord-t", num_partitions=2, replication_factor=-1)]), 7),
                 (_metadata("ord-t"), 12))
    assert c.topics[0].error_code == 0
    assert (m.topics[0].error_code, len(m.topics[0].partitions)) == (0, 2)
    CP = CreatePartitionsRequest.CreatePartitionsTopic
    c, m = _pair(raw, (CreatePartitionsRequest(topics=[CP(name="ord-t", count=5, assignments=None)], timeout_ms=30000), 3),
                 (_metadata("ord-t"), 12))
    assert c.results[0].error_code == 0 and len(m.topics[0].partitions) == 5
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    AC = IncrementalAlterConfigsRequest.AlterableConfig
    DR = DescribeConfigsRequest.DescribeConfigsResource
    describe = DescribeConfigsRequest(resources=[DR(resource_type=TOPIC_RESOURCE, resource_name="ord-t",
                                                    configuration_keys=["retention.ms"])])
    a, d = _pair(raw, (IncrementalAlterConfigsRequest(resources=[R(resource_type=TOPIC_RESOURCE, resource_name="ord-t",
                                                                   configs=[AC(name="retention.ms", value="123456")])]), 1),
                 (describe, 4))
    assert a.responses[0].error_code == 0
    assert [(c.name, c.value) for c in d.results[0].configs] == [("retention.ms", "123456")]
    AR, AA = AlterConfigsRequest.AlterConfigsResource, AlterConfigsRequest.AlterableConfig
    a, d = _pair(raw, (AlterConfigsRequest(resources=[AR(resource_type=TOPIC_RESOURCE, resource_name="ord-t",
                                                         configs=[AA(name="retention.ms", value="654321")])]), 2),
                 (describe, 4))
    assert a.responses[0].error_code == 0
    assert [(c.name, c.value) for c in d.results[0].configs] == [("retention.ms", "654321")]
    dt, m = _pair(raw, (DeleteTopicsRequest(topic_names=["ord-t"], timeout_ms=30000), 5), (_metadata("ord-t"), 12))
    assert dt.responses[0].error_code == 0
    assert m.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_data_pairs(gw: StandaloneGateway, raw: Raw) -> None:
    create_topic(gw.bootstrap, "ord-d")
    off = 0
    for _ in range(5):
        p, f = _pair(raw, (produce_request("ord-d", batch(2)), 9), (fetch_request("ord-d", off), 12))
        assert p.responses[0].partition_responses[0].base_offset == off
        part = f.responses[0].partitions[0]
        assert part.high_watermark == off + 2
        assert [b.base_offset for b in iter_batches(bytes(part.records))] == [off]
        p, lo = _pair(raw, (produce_request("ord-d", batch(1)), 9), (_list_offsets("ord-d", -1), 7))
        assert lo.topics[0].partitions[0].offset == off + 3
        off += 3
    DT, DP = DeleteRecordsRequest.DeleteRecordsTopic, DeleteRecordsRequest.DeleteRecordsPartition
    end = _list_offsets_now(raw, "ord-d", -1)
    d, lo = _pair(raw, (DeleteRecordsRequest(topics=[DT(name="ord-d", partitions=[DP(partition_index=0, offset=end)])],
                                             timeout_ms=30000), 2),
                  (_list_offsets("ord-d", -2), 7))
    assert d.topics[0].partitions[0].low_watermark == end
    assert lo.topics[0].partitions[0].offset == end
    # a producer id is usable by the very next request
    i, p = _pair(raw, (InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4),
                 (produce_request("ord-d", batch(1)), 9))
    assert i.error_code == 0 and p.responses[0].partition_responses[0].error_code == 0


def test_a_long_poll_does_not_hold_up_the_connection(gw: StandaloneGateway, raw: Raw) -> None:
    """A Fetch waiting for data has applied all it will (nothing): the Produce sent behind it on
    the same connection goes ahead and wakes it."""
    create_topic(gw.bootstrap, "ord-poll")
    f, p = _pair(raw, (fetch_request("ord-poll", 0, max_wait_ms=60000, min_bytes=1), 12),
                 (produce_request("ord-poll", batch(1)), 9))
    assert p.responses[0].partition_responses[0].error_code == 0
    assert [b.base_offset for b in iter_batches(bytes(f.responses[0].partitions[0].records))] == [0]


def _list_offsets_now(raw: Raw, topic: str, ts: int) -> int:
    return int(raw.call(_list_offsets(topic, ts), 7).topics[0].partitions[0].offset)


def test_group_pairs(gw: StandaloneGateway, raw: Raw) -> None:
    create_topic(gw.bootstrap, "ord-g")
    g = "ord-group"
    assert raw.call(FindCoordinatorRequest(key=g, key_type=0), 3).error_code == 0
    T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestPartition
    OT = OffsetFetchRequest.OffsetFetchRequestTopic
    fetch = OffsetFetchRequest(group_id=g, topics=[OT(name="ord-g", partition_indexes=[0])])
    for n in (3, 7, 11):
        c, f = _pair(raw, (OffsetCommitRequest(group_id=g, generation_id_or_member_epoch=-1, member_id="",
                                               topics=[T(name="ord-g", partitions=[P(partition_index=0, committed_offset=n)])]), 8),
                     (fetch, 7))
        assert c.topics[0].partitions[0].error_code == 0
        assert f.topics[0].partitions[0].committed_offset == n
    OD = OffsetDeleteRequest.OffsetDeleteRequestTopic
    d, f = _pair(raw, (OffsetDeleteRequest(group_id=g, topics=[OD(name="ord-g", partitions=[
        OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]), 0), (fetch, 7))
    assert d.error_code == 0 and f.topics[0].partitions[0].committed_offset == -1
    # membership: join, sync, leave, each seen by the DescribeGroups sent right behind it
    proto = [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]
    join = JoinGroupRequest(group_id=g, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                            protocol_type="consumer", protocols=proto)
    j = raw.call(join, 9)
    assert j.error_code == ErrorCode.MEMBER_ID_REQUIRED
    join.member_id = j.member_id
    j, dg = _pair(raw, (join, 9), (DescribeGroupsRequest(groups=[g]), 5))
    assert j.error_code == 0
    assert [m.member_id for m in dg.groups[0].members] == [j.member_id]
    A = SyncGroupRequest.SyncGroupRequestAssignment
    s, dg = _pair(raw, (SyncGroupRequest(group_id=g, generation_id=j.generation_id, member_id=j.member_id,
                                         assignments=[A(member_id=j.member_id, assignment=b"as")]), 5),
                  (DescribeGroupsRequest(groups=[g]), 5))
    assert s.error_code == 0
    assert (dg.groups[0].group_state, dg.groups[0].members[0].member_assignment) == ("Stable", b"as")
    MI = LeaveGroupRequest.MemberIdentity
    le, dg = _pair(raw, (LeaveGroupRequest(group_id=g, members=[MI(member_id=j.member_id)]), 4),
                   (DescribeGroupsRequest(groups=[g]), 5))
    assert le.error_code == 0 and (dg.groups[0].group_state, dg.groups[0].members) == ("Empty", [])
    dl, lg = _pair(raw, (DeleteGroupsRequest(groups_names=[g]), 2), (ListGroupsRequest(), 4))
    assert dl.results[0].error_code == 0 and g not in {x.group_id for x in lg.groups}
