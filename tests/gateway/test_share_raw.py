"""Share groups on the wire (ShareGroupHeartbeat, ShareFetch, ShareAcknowledge): Kafka's error
codes for sessions and acknowledgements, acquired ranges of whole batches, long polls woken by
records coming back, FindCoordinator for share keys; Quire's redelivery backoff, dead-letter
topics and delayed delivery."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest

from coordinator.share.partition import rendezvous
from gateway.share_keys import key_id
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kafka_wire.messages.describe_configs import DescribeConfigsRequest
from kafka_wire.messages.find_coordinator import FindCoordinatorRequest
from kafka_wire.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kafka_wire.messages.metadata import MetadataRequest
from kafka_wire.messages.share_acknowledge import ShareAcknowledgeRequest
from kafka_wire.messages.share_fetch import ShareFetchRequest, ShareFetchResponse
from kafka_wire.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from kafka_wire.records import iter_batches
from kafka_wire.records.builder import NewRecord, build_batch
from quire.admin import main as admin_main
from tests.gateway.test_produce_raw import Raw, batch, create_topic, produce_one
from tests.gateway.test_transactions_raw import fetch_committed, markers, new_pid, produce, values_batch
from tests.support.gateway import StandaloneGateway, module_gateway
from tests.support.wait import eventually

F = ShareFetchRequest
A = ShareAcknowledgeRequest
ACCEPT, RELEASE, REJECT = 1, 2, 3


@pytest.fixture(scope="module")
def module_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneGateway]:
    """Without partition verification: the read_committed test writes transactions of no
    coordinator's, its markers sent by hand (as in test_transactions_raw)."""
    yield from module_gateway(tmp_path_factory, "--no-transaction-partition-verification-enable")


@pytest.fixture
def raw(module_standalone: StandaloneGateway) -> Iterator[Raw]:
    r = Raw(module_standalone.bootstrap)
    yield r
    r.close()


def _earliest(raw: Raw, group: str, **more: str) -> None:
    R = IncrementalAlterConfigsRequest
    configs = {"share.auto.offset.reset": "earliest", **{k.replace("_", "."): v for k, v in more.items()}}
    resp = raw.call(R(resources=[R.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
        R.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()])]), 1)
    assert resp.responses[0].error_code == 0


def _fetch(tid: uuid.UUID, epoch: int, acks: list[tuple[int, int, list[int]]] | None = None, *, member: str = "m1",
           group: str = "rg", max_wait_ms: int = 0, max_records: int = 100) -> F:
    return F(group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms, min_bytes=1,
             max_records=max_records, batch_size=max_records, topics=[F.FetchTopic(topic_id=tid, partitions=[
                 F.FetchPartition(partition_index=0, acknowledgement_batches=[
                     F.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=t)
                     for f, la, t in acks or []])])])


def _ack(tid: uuid.UUID, epoch: int, acks: list[tuple[int, int, list[int]]], member: str = "m1",
         group: str = "rg") -> A:
    return A(group_id=group, member_id=member, share_session_epoch=epoch, topics=[A.AcknowledgeTopic(
        topic_id=tid, partitions=[A.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
            A.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=t) for f, la, t in acks])])])


def test_share_fetch_sessions_acks_and_errors(module_standalone: StandaloneGateway, raw: Raw) -> None:
    create_topic(module_standalone.bootstrap, "raw-share")
    tid = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="raw-share")]), 12).topics[0].topic_id
    for n in (3, 2):
        produce_one(raw, "raw-share", batch(n))
    _earliest(raw, "rg")
    hb = raw.call(ShareGroupHeartbeatRequest(group_id="rg", member_id="m1", member_epoch=0,
                                             subscribed_topic_names=["raw-share"]), 1)
    assert (hb.error_code, hb.member_epoch) == (0, 1)
    assert [(t.topic_id, t.partitions) for t in hb.assignment.topic_partitions] == [(tid, [0])]

    assert raw.call(_fetch(tid, 1), 2).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert raw.call(_fetch(tid, 0, member=""), 2).error_code == ErrorCode.INVALID_REQUEST
    # Whole stored batches, their offsets acquired.
    resp = raw.call(_fetch(tid, 0), 2)
    p = resp.responses[0].partitions[0]
    assert resp.error_code == 0 and resp.acquisition_lock_timeout_ms == 30000
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records] == [(0, 4, 1)]
    assert [b.base_offset for b in iter_batches(bytes(p.records))] == [0, 3]
    assert raw.call(_fetch(tid, 5), 2).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    # Another member finds nothing to acquire; an empty answer still carries an (empty) record set.
    resp = raw.call(_fetch(tid, 0, member="m2"), 2)
    assert all(not p.acquired_records for t in resp.responses for p in t.partitions)
    # Acknowledging what another member holds is INVALID_RECORD_STATE.
    resp = raw.call(_ack(tid, 1, [(0, 0, [ACCEPT])], member="m2"), 2)
    assert resp.responses[0].partitions[0].error_code == ErrorCode.INVALID_RECORD_STATE
    resp = raw.call(_ack(tid, 1, [(0, 1, [ACCEPT]), (2, 2, [RELEASE])]), 2)
    assert resp.error_code == 0 and resp.responses[0].partitions[0].error_code == 0
    # Twice: offset 0 is before the start offset now, finished; Kafka answers without an error.
    resp = raw.call(_ack(tid, 2, [(0, 0, [ACCEPT])]), 2)
    assert resp.responses[0].partitions[0].error_code == 0
    assert raw.call(_ack(tid, 0, [(3, 3, [ACCEPT])]), 2).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    # The released record comes back to m2 (piggybacked acks on m1's fetch: per-offset types).
    resp = raw.call(_fetch(tid, 2, member="m2"), 2)  # its ShareAcknowledge took epoch 1
    got = resp.responses[0].partitions[0].acquired_records
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in got] == [(2, 2, 2)]
    resp = raw.call(_fetch(tid, 3, [(3, 4, [ACCEPT, RELEASE])]), 2)
    p = resp.responses[0].partitions[0]
    assert p.acknowledge_error_code == 0
    # ... and the same fetch acquires the released record again.
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records] == [(4, 4, 2)]
    # A long poll is woken by m1 closing its session: the record it held comes back to m2.
    other = Raw(module_standalone.bootstrap)
    try:
        other.send(_ack(tid, -1, [], member="m1"), 2)
        resp = raw.call(_fetch(tid, 3, member="m2", max_wait_ms=20000), 2)
        other.recv(79, 2)
    finally:
        other.close()
    got = resp.responses[0].partitions[0].acquired_records
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in got] == [(4, 4, 3)]
    assert raw.call(_fetch(tid, 4, member="m1"), 2).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_find_coordinator_for_share_keys(module_standalone: StandaloneGateway, raw: Raw) -> None:
    create_topic(module_standalone.bootstrap, "raw-share-fc")
    tid = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="raw-share-fc")]), 12).topics[0].topic_id
    resp = raw.call(FindCoordinatorRequest(key_type=2, coordinator_keys=[f"g:{tid}:0", "g:nope:0", f"g:{tid}:9"]), 6)
    ok, bad, missing = resp.coordinators
    assert ok.error_code == 0 and ok.port == module_standalone.port
    assert bad.error_code == ErrorCode.INVALID_REQUEST
    assert missing.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_share_groups_read_committed(module_standalone: StandaloneGateway, raw: Raw, isolation: str) -> None:
    topic, group = f"raw-share-txn-{isolation}", f"rg-{isolation}"
    create_topic(module_standalone.bootstrap, topic)
    tid = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12).topics[0].topic_id
    pid = new_pid(raw)
    assert produce(raw, topic, values_batch([b"p0", b"p1"])) == 0
    produce(raw, topic, values_batch([b"a2", b"a3", b"a4"], pid=pid, epoch=0, seq=0, transactional=True), txn_id="t")
    assert markers(raw, topic, pid, 0, commit=False) == [0]  # offset 5
    produce(raw, topic, values_batch([b"c6", b"c7"], pid=pid, epoch=0, seq=3, transactional=True), txn_id="t")
    assert markers(raw, topic, pid, 0, commit=True) == [0]  # offset 8
    assert produce(raw, topic, values_batch([b"o9"], pid=pid, epoch=0, seq=5, transactional=True), txn_id="t") == 9
    _earliest(raw, group, share_isolation_level=isolation)
    resp = raw.call(_fetch(tid, 0, group=group), 2)
    got = [(a.first_offset, a.last_offset) for a in resp.responses[0].partitions[0].acquired_records]
    if isolation == "read_committed":
        # The aborted records and the markers are archived; nothing from the open transaction on.
        assert got == [(0, 1), (6, 7)]
    else:
        assert got == [(0, 4), (6, 7), (9, 9)]  # markers only are skipped


def test_redelivery_backoff_group_configs(module_standalone: StandaloneGateway, raw: Raw) -> None:
    """A released record is not redelivered before its backoff; a long poll waiting for it is
    woken when the backoff ends; DescribeConfigs reports the group's values."""
    topic, group = "raw-share-backoff", "rg-backoff"
    create_topic(module_standalone.bootstrap, topic)
    tid = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12).topics[0].topic_id
    produce_one(raw, topic, batch(1))
    _earliest(raw, group, quire_share_redelivery_backoff_min_ms="400",
              quire_share_redelivery_backoff_multiplier="3.0")
    DR = DescribeConfigsRequest.DescribeConfigsResource
    desc = raw.call(DescribeConfigsRequest(resources=[DR(resource_type=32, resource_name=group, configuration_keys=None)]), 4)
    values = {c.name: c.value for c in desc.results[0].configs}
    assert (values["quire.share.redelivery.backoff.min.ms"], values["quire.share.redelivery.backoff.multiplier"],
            values["quire.share.redelivery.backoff.max.ms"]) == ("400", "3.0", "60000")
    resp = raw.call(_fetch(tid, 0, group=group), 2)
    assert [(a.first_offset, a.delivery_count) for a in resp.responses[0].partitions[0].acquired_records] == [(0, 1)]
    released = time.monotonic()
    resp = raw.call(_fetch(tid, 1, [(0, 0, [RELEASE])], group=group), 2)
    assert resp.responses[0].partitions[0].acknowledge_error_code == 0
    assert not resp.responses[0].partitions[0].acquired_records  # backing off
    resp = raw.call(_fetch(tid, 2, group=group, max_wait_ms=20000), 2)
    got = resp.responses[0].partitions[0].acquired_records
    assert [(a.first_offset, a.delivery_count) for a in got] == [(0, 2)]
    assert time.monotonic() - released >= 0.4


def test_delivery_count_limit_and_record_locks_group_configs(module_standalone: StandaloneGateway, raw: Raw) -> None:
    """Kafka 4.4's group configs share.delivery.count.limit and share.partition.max.record.locks,
    bounded by the broker's group.share.min/max.* settings with Kafka's messages; the group's
    limit archives a record released that many times; its heartbeat interval reaches members."""
    topic, group = "raw-share-limits", "rg-limits"
    create_topic(module_standalone.bootstrap, topic)
    tid = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12).topics[0].topic_id
    produce_one(raw, topic, batch(1))
    R = IncrementalAlterConfigsRequest
    for name, value, message in (
        ("share.delivery.count.limit", "11", "share.delivery.count.limit must be in the range 2 to 10 inclusive."),
        ("share.delivery.count.limit", "1",
         "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"),
        ("share.partition.max.record.locks", "4001",
         "share.partition.max.record.locks must be in the range 100 to 4000 inclusive."),
        ("share.record.lock.duration.ms", "1000",
         "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."),
    ):
        resp = raw.call(R(resources=[R.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
            R.AlterableConfig(name=name, config_operation=0, value=value)])]), 1)
        assert (resp.responses[0].error_code, resp.responses[0].error_message) == (
            ErrorCode.INVALID_CONFIG, message)
    _earliest(raw, group, share_delivery_count_limit="2", share_heartbeat_interval_ms="6000")
    hb = raw.call(ShareGroupHeartbeatRequest(group_id=group, member_id="m1", member_epoch=0,
                                             subscribed_topic_names=[topic]), 1)
    assert (hb.error_code, hb.heartbeat_interval_ms) == (0, 6000)  # the group's, not the setting's 5000
    DR = DescribeConfigsRequest.DescribeConfigsResource
    desc = raw.call(DescribeConfigsRequest(resources=[DR(resource_type=32, resource_name=group, configuration_keys=[
        "share.delivery.count.limit", "share.partition.max.record.locks", "share.renew.acknowledge.enable"])]), 4)
    assert sorted((c.name, c.value, c.config_source) for c in desc.results[0].configs) == [
        ("share.delivery.count.limit", "2", 8), ("share.partition.max.record.locks", "2000", 5),
        ("share.renew.acknowledge.enable", "true", 5)]
    resp = raw.call(_fetch(tid, 0, group=group), 2)
    assert [(a.first_offset, a.delivery_count) for a in resp.responses[0].partitions[0].acquired_records] == [(0, 1)]
    resp = raw.call(_fetch(tid, 1, [(0, 0, [RELEASE])], group=group), 2)
    assert [(a.first_offset, a.delivery_count) for a in resp.responses[0].partitions[0].acquired_records] == [(0, 2)]
    resp = raw.call(_fetch(tid, 2, [(0, 0, [RELEASE])], group=group), 2)
    assert resp.responses[0].partitions[0].acknowledge_error_code == 0
    assert not resp.responses[0].partitions[0].acquired_records  # the group's limit (2, not 5) archived it


def test_auto_offset_reset_by_duration(module_standalone: StandaloneGateway, raw: Raw) -> None:
    """share.auto.offset.reset=by_duration:<ISO 8601> (Kafka 4.4): a new share-partition starts at
    the first record at most that old; malformed or negative durations (and other case) get Kafka
    4.4's message (its broker-side validator has one for all)."""
    topic, group = "raw-share-by-duration", "rg-by-duration"
    create_topic(module_standalone.bootstrap, topic)
    tid = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12).topics[0].topic_id
    now = int(time.time() * 1000)
    old = [NewRecord(b"k", b"old", (), now - 2 * 3600_000 + i) for i in range(3)]
    assert produce_one(raw, topic, build_batch(old)).error_code == 0
    assert produce_one(raw, topic, batch(2)).error_code == 0  # offsets 3-4, now
    R = IncrementalAlterConfigsRequest
    for value in ("by_duration:PT-1H", "by_duration:1h", "EARLIEST"):
        resp = raw.call(R(resources=[R.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
            R.AlterableConfig(name="share.auto.offset.reset", config_operation=0, value=value)])]), 1)
        name = "share.auto.offset.reset"
        assert (resp.responses[0].error_code, resp.responses[0].error_message) == (
            ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: Invalid value `{value}` for "
            f"configuration {name}. The value must be either 'earliest', 'latest' or of the format "
            "'by_duration:<PnDTnHnMn.nS>'.")
    resp = raw.call(R(resources=[R.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
        R.AlterableConfig(name="share.auto.offset.reset", config_operation=0, value="by_duration:PT1H")])]), 1)
    assert resp.responses[0].error_code == 0
    resp = raw.call(_fetch(tid, 0, group=group), 2)
    assert [(a.first_offset, a.last_offset) for a in resp.responses[0].partitions[0].acquired_records] == [(3, 4)]


def test_admin_groups_describe_shows_a_share_group_in_flight(
        module_standalone: StandaloneGateway, raw: Raw, capsys: pytest.CaptureFixture[str]) -> None:
    """`quire admin groups describe` of a share group while records are held: its members and,
    per partition, the SPSO, in-flight, archived (finished past the SPSO), backlog and log end."""
    topic, group = "raw-share-admin", "rg-admin"
    create_topic(module_standalone.bootstrap, topic)
    tid = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12).topics[0].topic_id
    produce_one(raw, topic, batch(5))  # 0-4
    _earliest(raw, group)
    hb = raw.call(ShareGroupHeartbeatRequest(group_id=group, member_id="m1", member_epoch=0,
                                             subscribed_topic_names=[topic]), 1)
    assert hb.error_code == 0
    resp = raw.call(_fetch(tid, 0, group=group), 2)
    assert [(a.first_offset, a.last_offset) for a in resp.responses[0].partitions[0].acquired_records] == [(0, 4)]
    produce_one(raw, topic, batch(3))  # 5-7, not delivered yet
    resp = raw.call(A(group_id=group, member_id="m1", share_session_epoch=1, topics=[A.AcknowledgeTopic(
        topic_id=tid, partitions=[A.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
            A.AcknowledgementBatch(first_offset=0, last_offset=1, acknowledge_types=[ACCEPT]),
            A.AcknowledgementBatch(first_offset=4, last_offset=4, acknowledge_types=[REJECT])])])]), 2)
    assert resp.responses[0].partitions[0].error_code == 0

    def describe(*more: str) -> tuple[int, str]:
        capsys.readouterr()
        code = admin_main(["--data-dir", str(module_standalone.data_dir), *more, "groups", "describe", group])
        return code, capsys.readouterr().out

    want = [(0, 2, 2, 1, 5, 8)]  # SPSO 2; 2-3 in flight; 4 archived; backlog 2-3 and 5-7; end 8

    def published() -> bool:  # the owner publishes a moment after the change
        doc = json.loads(describe("--json")[1])
        return [(p["partition"], p["start_offset"], p["in_flight"], p["finished"], p["backlog"], p["log_end_offset"])
                for p in doc["partitions"]] == want

    deadline = time.monotonic() + 30
    while not published():
        assert time.monotonic() < deadline, describe("--json")
        time.sleep(0.2)
    code, text = describe()
    assert code == 0
    lines = [line.split() for line in text.splitlines()]
    assert ["MEMBER", "CLIENT_ID", "HOST", "SUBSCRIBED"] in lines and any(r[:1] == ["m1"] for r in lines), text
    assert ["TOPIC", "PARTITION", "SPSO", "IN_FLIGHT", "ARCHIVED", "BACKLOG", "LOG_END"] in lines, text
    assert [topic, "0", "2", "2", "1", "5", "8"] in lines, text


def test_consumer_group_heartbeat_interval_group_config(module_standalone: StandaloneGateway, raw: Raw) -> None:
    """The GROUP resource's consumer.heartbeat.interval.ms reaches a consumer-protocol member too
    (beside the share groups' configs above)."""
    topic, group = "raw-consumer-configs", "cg-configs"
    create_topic(module_standalone.bootstrap, topic)
    R = IncrementalAlterConfigsRequest
    resp = raw.call(R(resources=[R.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
        R.AlterableConfig(name="consumer.heartbeat.interval.ms", config_operation=0, value="6000")])]), 1)
    assert resp.responses[0].error_code == 0
    hb = raw.call(ConsumerGroupHeartbeatRequest(group_id=group, member_id="x" * 22, member_epoch=0,
                                                rebalance_timeout_ms=30000, subscribed_topic_names=[topic],
                                                topic_partitions=[]), 1)
    assert (hb.error_code, hb.heartbeat_interval_ms) == (0, 6000)


def _set_group_configs(raw: Raw, group: str, configs: dict[str, str | None]) -> tuple[int, str | None]:
    """IncrementalAlterConfigs of a group: SET each value, DELETE each None."""
    R = IncrementalAlterConfigsRequest
    resp = raw.call(R(resources=[R.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
        R.AlterableConfig(name=k, config_operation=0 if v is not None else 1, value=v)
        for k, v in configs.items()])]), 1)
    return resp.responses[0].error_code, resp.responses[0].error_message


def test_group_config_changes_reach_live_members(module_standalone: StandaloneGateway, raw: Raw) -> None:
    """Altering consumer.heartbeat.interval.ms / share.heartbeat.interval.ms of a group with members
    reaches each member's next heartbeat (the heartbeats read the group's configs from the
    gateway's watched cache), and deleting it brings the broker's default back."""
    topic = "raw-live-configs"
    create_topic(module_standalone.bootstrap, topic)
    cg, member = "cg-live", "y" * 22

    def consumer_hb(epoch: int) -> tuple[int, int, int]:
        hb = raw.call(ConsumerGroupHeartbeatRequest(
            group_id=cg, member_id=member, member_epoch=epoch, rebalance_timeout_ms=30000,
            subscribed_topic_names=[topic] if epoch == 0 else None, topic_partitions=[] if epoch == 0 else None), 1)
        return hb.error_code, hb.member_epoch, hb.heartbeat_interval_ms

    code, epoch, interval = consumer_hb(0)
    assert (code, interval) == (0, 5000)
    assert consumer_hb(epoch)[2] == 5000  # cached now
    assert _set_group_configs(raw, cg, {"consumer.heartbeat.interval.ms": "7000",
                                        "consumer.session.timeout.ms": "50000"}) == (0, None)
    code, epoch, interval = consumer_hb(epoch)
    assert (code, interval) == (0, 7000)
    assert _set_group_configs(raw, cg, {"consumer.heartbeat.interval.ms": None}) == (0, None)
    assert consumer_hb(epoch)[::2] == (0, 5000)

    sg = "sg-live"
    hb = raw.call(ShareGroupHeartbeatRequest(group_id=sg, member_id="m1", member_epoch=0,
                                             subscribed_topic_names=[topic]), 1)
    assert (hb.error_code, hb.heartbeat_interval_ms) == (0, 5000)
    assert _set_group_configs(raw, sg, {"share.heartbeat.interval.ms": "8000"}) == (0, None)
    hb = raw.call(ShareGroupHeartbeatRequest(group_id=sg, member_id="m1", member_epoch=hb.member_epoch), 1)
    assert (hb.error_code, hb.heartbeat_interval_ms) == (0, 8000)


def test_streams_and_assignment_group_configs(module_standalone: StandaloneGateway, raw: Raw) -> None:
    """Kafka 4.4's streams.* and *.assignment.interval.ms / *.assignor.offload.enable group configs:
    refused with Kafka's messages against the broker's group.streams.* limits, else stored and
    described with their broker synonyms (Quire serves no streams groups: no effect)."""
    group = "rg-streams"
    for configs, message in (
        ({"streams.num.standby.replicas": "3"}, "streams.num.standby.replicas must be less than or equal to 2"),
        ({"streams.session.timeout.ms": "30000"},
         "streams.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
        ({"streams.assignor.name": "foo"},
         "streams.assignor.name 'foo' is not a registered task assignor. Registered assignors are: [sticky]."),
        ({"share.assignment.interval.ms": "16000"},
         "share.assignment.interval.ms must be in the range 0 to 15000 inclusive."),
    ):
        assert _set_group_configs(raw, group, dict(configs)) == (ErrorCode.INVALID_CONFIG, message)
    assert _set_group_configs(raw, group, {"streams.num.standby.replicas": "1", "share.assignor.offload.enable": "false",
                                           "streams.rack.aware.assignment.tags": "zone,rack"}) == (0, None)
    DR = DescribeConfigsRequest.DescribeConfigsResource
    desc = raw.call(DescribeConfigsRequest(include_synonyms=True, resources=[DR(
        resource_type=32, resource_name=group, configuration_keys=[
            "streams.num.standby.replicas", "share.assignor.offload.enable", "streams.rack.aware.assignment.tags",
            "streams.initial.rebalance.delay.ms"])]), 4)
    got = {c.name: (c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
           for c in desc.results[0].configs}
    assert got == {
        "streams.num.standby.replicas": ("1", 8, [("streams.num.standby.replicas", "1", 8),
                                                  ("group.streams.num.standby.replicas", "0", 5)]),
        "share.assignor.offload.enable": ("false", 8, [("share.assignor.offload.enable", "false", 8),
                                                       ("group.share.assignor.offload.enable", "true", 5)]),
        "streams.rack.aware.assignment.tags": ("zone,rack", 8, [("streams.rack.aware.assignment.tags", "zone,rack", 8),
                                                                ("group.streams.rack.aware.assignment.tags", "", 5)]),
        "streams.initial.rebalance.delay.ms": ("3000", 5, [("group.streams.initial.rebalance.delay.ms", "3000", 5)]),
    }


async def test_dead_letter_topic(module_standalone: StandaloneGateway, raw: Raw) -> None:
    """KIP-1191's group configs: a REJECTed record is copied to the dead-letter topic (created on
    demand) with Kafka's context headers, then archived; DescribeConfigs reports the configs."""
    topic, dlq = "raw-share-dlq", "dlq.raw-share-dlq"
    create_topic(module_standalone.bootstrap, topic)
    tid = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12).topics[0].topic_id
    produce(raw, topic, values_batch([b"a", b"poison", b"c"]))
    R = IncrementalAlterConfigsRequest
    bad = raw.call(R(resources=[R.AlterConfigsResource(resource_type=32, resource_name="rg-x", configs=[
        R.AlterableConfig(name="errors.deadletterqueue.topic.name", config_operation=0, value="__dlq")])]), 1)
    assert bad.responses[0].error_code == ErrorCode.INVALID_CONFIG
    _earliest(raw, "rg-dlq", errors_deadletterqueue_topic_name=dlq, errors_deadletterqueue_copy_record_enable="true")
    DR = DescribeConfigsRequest.DescribeConfigsResource
    desc = raw.call(DescribeConfigsRequest(resources=[DR(resource_type=32, resource_name="rg-dlq",
                                                         configuration_keys=None)]), 4)
    values = {c.name: c.value for c in desc.results[0].configs}
    assert values["errors.deadletterqueue.topic.name"] == dlq
    resp = raw.call(_fetch(tid, 0, group="rg-dlq"), 2)
    assert [(a.first_offset, a.last_offset) for a in resp.responses[0].partitions[0].acquired_records] == [(0, 2)]
    resp = raw.call(_fetch(tid, 1, [(0, 2, [ACCEPT, REJECT, ACCEPT])], group="rg-dlq"), 2)
    assert resp.responses[0].partitions[0].acknowledge_error_code == 0

    def dead_letters() -> list[tuple[bytes | None, dict[str, bytes | None]]]:
        p = fetch_committed(raw, dlq, 0, isolation=0)
        if p.error_code:
            return []
        return [(r.value, dict(r.headers)) for b in iter_batches(bytes(p.records or b"")) for r in b.records()]

    await eventually(lambda: bool(dead_letters()), what="the dead-letter record")
    [(value, headers)] = dead_letters()
    assert value == b"poison"
    assert {k: v for k, v in headers.items() if k.startswith("__dlq.")} == {
        "__dlq.errors.group": b"rg-dlq", "__dlq.errors.topic": topic.encode(), "__dlq.errors.partition": b"0",
        "__dlq.errors.offset": b"1", "__dlq.errors.delivery.count": b"1",
        "__dlq.errors.message": b"Offset rejected by client."}
    # Archived once dead-lettered: nothing comes back, and nothing more is appended.
    resp = raw.call(_fetch(tid, 2, group="rg-dlq"), 2)
    assert resp.error_code == 0 and all(not p.acquired_records for t in resp.responses for p in t.partitions)
    assert len(dead_letters()) == 1


def test_delayed_delivery(module_standalone: StandaloneGateway, raw: Raw) -> None:
    """quire.deliver.at headers (quire.delayed.delivery.enable) and quire.delivery.delay.ms: a
    record is not acquired before its time, later records are, and a long poll gets it then."""
    topic = "raw-share-delayed"
    create_topic(module_standalone.bootstrap, topic, **{"quire.delayed.delivery.enable": "true"})
    tid = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12).topics[0].topic_id
    now = int(time.time() * 1000)
    at = now + 1500
    produce(raw, topic, build_batch([NewRecord(None, b"a", (), now),
                                     NewRecord(None, b"later", (("quire.deliver.at", str(at).encode()),), now),
                                     NewRecord(None, b"c", (), now)]))
    _earliest(raw, "rg-delayed")
    resp = raw.call(_fetch(tid, 0, group="rg-delayed"), 2)
    got = resp.responses[0].partitions[0].acquired_records
    assert [(a.first_offset, a.last_offset) for a in got] == [(0, 0), (2, 2)]
    resp = raw.call(_fetch(tid, 1, [(0, 0, [ACCEPT]), (2, 2, [ACCEPT])], group="rg-delayed", max_wait_ms=20000), 2)
    got = resp.responses[0].partitions[0].acquired_records
    assert [(a.first_offset, a.last_offset) for a in got] == [(1, 1)]
    assert time.time() * 1000 >= at

    topic = "raw-share-delay-ms"
    create_topic(module_standalone.bootstrap, topic, **{"quire.delivery.delay.ms": "800"})
    tid = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12).topics[0].topic_id
    _earliest(raw, "rg-delay-ms")
    stamp = int(time.time() * 1000)
    produce(raw, topic, build_batch([NewRecord(None, b"x", (), stamp)]))
    resp = raw.call(_fetch(tid, 0, group="rg-delay-ms", member="m2"), 2)
    assert all(not p.acquired_records for t in resp.responses for p in t.partitions)
    resp = raw.call(_fetch(tid, 1, group="rg-delay-ms", member="m2", max_wait_ms=20000), 2)
    got = resp.responses[0].partitions[0].acquired_records
    assert [(a.first_offset, a.last_offset) for a in got] == [(0, 0)]
    assert time.time() * 1000 >= stamp + 800


def test_key_shared_mode(module_standalone: StandaloneGateway, raw: Raw) -> None:
    """quire.share.mode=key_shared (set and described on the GROUP resource): single records are
    acquired by key, a member's held keys go to nobody else, and a long poll waiting for a held
    key is woken when its holder accepts the record."""
    topic, group = "raw-share-keyed", "rg-keyed"
    create_topic(module_standalone.bootstrap, topic)
    tid = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12).topics[0].topic_id
    produce(raw, topic, build_batch([NewRecord(k, v, (), 0) for k, v in (
        (b"a", b"a0"), (b"b", b"b0"), (None, b"n0"), (b"a", b"a1"), (b"c", b"c0"), (b"", b"e0"))]))
    R = IncrementalAlterConfigsRequest
    bad = raw.call(R(resources=[R.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
        R.AlterableConfig(name="quire.share.mode", config_operation=0, value="exclusive")])]), 1)
    assert bad.responses[0].error_code == ErrorCode.INVALID_CONFIG
    DR = DescribeConfigsRequest.DescribeConfigsResource
    desc = raw.call(DescribeConfigsRequest(resources=[DR(resource_type=32, resource_name=group,
                                                         configuration_keys=["quire.share.mode"])]), 4)
    assert [(c.name, c.value) for c in desc.results[0].configs] == [("quire.share.mode", "shared")]
    _earliest(raw, group, quire_share_mode="key_shared")
    desc = raw.call(DescribeConfigsRequest(resources=[DR(resource_type=32, resource_name=group,
                                                         configuration_keys=["quire.share.mode"])]), 4)
    assert [(c.name, c.value) for c in desc.results[0].configs] == [("quire.share.mode", "key_shared")]

    def acquired(resp: ShareFetchResponse) -> list[tuple[int, int]]:
        return [(a.first_offset, a.last_offset) for t in resp.responses for p in t.partitions
                for a in p.acquired_records]

    # m1 takes the whole batch's records, one acquisition: several of a key, in order.
    assert acquired(raw.call(_fetch(tid, 0, group=group, max_records=1), 2)) == [(0, 5)]
    # m1 accepts b and c, releases a0 and e0. a0 comes back to m1 (a1 is m1's: nobody else may
    # have key a); e0 waits, for m1 too: n0 (null is the empty key) is held from before.
    resp = raw.call(_fetch(tid, 1, [(0, 1, [RELEASE, ACCEPT]), (4, 5, [ACCEPT, RELEASE])], group=group), 2)
    assert resp.responses[0].partitions[0].acknowledge_error_code == 0
    assert acquired(resp) == [(0, 0)]
    # A second member, one the empty key goes to when both fetch (keys spread over members).
    m2 = next(m for m in (f"m2-{i}" for i in range(100)) if rendezvous(["m1", m], key_id(b"")) == m)
    assert acquired(raw.call(_fetch(tid, 0, group=group, member=m2), 2)) == []
    # m2's long poll is woken by m1 accepting n0: e0 is free.
    other = Raw(module_standalone.bootstrap)
    try:
        started = time.monotonic()
        other.send(_fetch(tid, 1, group=group, member=m2, max_wait_ms=20000), 2)
        resp = raw.call(_ack(tid, 2, [(2, 2, [ACCEPT])], group=group), 2)
        assert resp.responses[0].partitions[0].error_code == 0
        got = other.recv(78, 2)
    finally:
        other.close()
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in got.responses[0].partitions[0].acquired_records
            ] == [(5, 5, 2)]
    assert time.monotonic() - started < 15  # woken, not the end of its 20 s wait
