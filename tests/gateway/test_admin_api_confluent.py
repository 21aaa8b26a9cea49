"""Topic and config administration through confluent-kafka's AdminClient (librdkafka)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from tests.support.gateway import StandaloneGateway

pytestmark = pytest.mark.timeout(120)
T = 15.0


@pytest.fixture(scope="module")
def admin(module_standalone: StandaloneGateway) -> AdminClient:
    return AdminClient({"bootstrap.servers": module_standalone.bootstrap})


def _code(fut) -> int:  # type: ignore[no-untyped-def]
    try:
        fut.result(T)
    except KafkaException as e:
        return int(e.args[0].code())
    return 0


def test_create_describe_delete_topics(admin: AdminClient) -> None:
    fs = admin.create_topics(
        [NewTopic("cf-orders", 3, 1, config={"retention.ms": "3600000"}), NewTopic("cf-events", 1, 1)],
        request_timeout=T,
    )
    assert {k: _code(f) for k, f in fs.items()} == {"cf-orders": 0, "cf-events": 0}
    md = admin.list_topics(timeout=T)
    assert len(md.topics["cf-orders"].partitions) == 3
    assert len(md.topics["cf-events"].partitions) == 1

    cfg = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "cf-orders")])
    entries = next(iter(cfg.values())).result(T)
    assert entries["retention.ms"].value == "3600000"
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["segment.bytes"].value == "1073741824"
    assert entries["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    fs = admin.delete_topics(["cf-orders", "cf-events"], request_timeout=T)
    assert {k: _code(f) for k, f in fs.items()} == {"cf-orders": 0, "cf-events": 0}
    assert "cf-orders" not in admin.list_topics(timeout=T).topics


def test_create_errors(admin: AdminClient) -> None:
    assert _code(admin.create_topics([NewTopic("cf-dup", 1, 1)])["cf-dup"]) == 0
    fs = admin.create_topics(
        [
            NewTopic("cf-dup", 1, 1),
            NewTopic("bad/name", 1, 1),
            NewTopic("cf-compact", 1, 1, config={"cleanup.policy": "compaction"}),
            NewTopic("cf-unknown-config", 1, 1, config={"no.such.thing": "1"}),
            NewTopic("cf-bad-value", 1, 1, config={"retention.ms": "soon"}),
            NewTopic("cf-zero", 0, 1),
        ],
        request_timeout=T,
    )
    codes = {k: _code(f) for k, f in fs.items()}
    assert codes == {
        "cf-dup": KafkaError.TOPIC_ALREADY_EXISTS,
        "bad/name": KafkaError.TOPIC_EXCEPTION,
        "cf-compact": KafkaError.INVALID_CONFIG,
        "cf-unknown-config": KafkaError.INVALID_CONFIG,
        "cf-bad-value": KafkaError.INVALID_CONFIG,
        "cf-zero": KafkaError.INVALID_PARTITIONS,
    }
    assert _code(admin.create_topics([NewTopic("cf-compact2", 1, 1, config={"cleanup.policy": "compact"})])[
        "cf-compact2"]) == 0
    topics = admin.list_topics(timeout=T).topics
    assert "cf-compact" not in topics and "bad/name" not in topics
    assert (
        _code(admin.delete_topics(["cf-never-existed"])["cf-never-existed"])
        == KafkaError.UNKNOWN_TOPIC_OR_PART
    )


def test_validate_only_creates_nothing(admin: AdminClient) -> None:
    assert _code(admin.create_topics([NewTopic("cf-dry", 2, 1)], validate_only=True)["cf-dry"]) == 0
    assert "cf-dry" not in admin.list_topics(timeout=T).topics


def test_partitions_increase_only(admin: AdminClient) -> None:
    assert _code(admin.create_topics([NewTopic("cf-grow", 2, 1)])["cf-grow"]) == 0
    assert _code(admin.create_partitions([NewPartitions("cf-grow", 4)])["cf-grow"]) == 0
    assert len(admin.list_topics(timeout=T).topics["cf-grow"].partitions) == 4
    assert (
        _code(admin.create_partitions([NewPartitions("cf-grow", 3)])["cf-grow"])
        == KafkaError.INVALID_PARTITIONS
    )
    assert (
        _code(admin.create_partitions([NewPartitions("cf-grow", 4)])["cf-grow"])
        == KafkaError.INVALID_PARTITIONS
    )
    assert (
        _code(admin.create_partitions([NewPartitions("cf-none", 4)])["cf-none"])
        == KafkaError.UNKNOWN_TOPIC_OR_PART
    )


def test_incremental_alter_configs(admin: AdminClient) -> None:
    assert (
        _code(admin.create_topics([NewTopic("cf-cfg", 1, 1, config={"retention.ms": "1000"})])["cf-cfg"]) == 0
    )

    def alter(*ops: ConfigEntry) -> int:
        res = ConfigResource(ResourceType.TOPIC, "cf-cfg", incremental_configs=list(ops))
        return _code(next(iter(admin.incremental_alter_configs([res]).values())))

    def describe() -> dict[str, str]:
        got = next(
            iter(admin.describe_configs([ConfigResource(ResourceType.TOPIC, "cf-cfg")]).values())
        ).result(T)
        return {k: v.value for k, v in got.items()}

    assert (
        alter(
            ConfigEntry("segment.ms", "60000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        )
        == 0
    )
    d = describe()
    assert (d["segment.ms"], d["retention.ms"]) == ("60000", "604800000")
    assert (
        alter(
            ConfigEntry(
                "leader.replication.throttled.replicas", "0:1", incremental_operation=AlterConfigOpType.APPEND
            )
        )
        == 0
    )
    assert (
        alter(
            ConfigEntry(
                "leader.replication.throttled.replicas", "1:1", incremental_operation=AlterConfigOpType.APPEND
            )
        )
        == 0
    )
    assert describe()["leader.replication.throttled.replicas"] == "0:1,1:1"
    assert (
        alter(
            ConfigEntry(
                "leader.replication.throttled.replicas",
                "0:1",
                incremental_operation=AlterConfigOpType.SUBTRACT,
            )
        )
        == 0
    )
    assert describe()["leader.replication.throttled.replicas"] == "1:1"
    assert (
        alter(ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND))
        == KafkaError.INVALID_CONFIG
    )
    assert (
        alter(ConfigEntry("cleanup.policy", "compaction", incremental_operation=AlterConfigOpType.SET))
        == KafkaError.INVALID_CONFIG
    )
    assert (
        alter(ConfigEntry("bogus.config", "1", incremental_operation=AlterConfigOpType.SET))
        == KafkaError.INVALID_CONFIG
    )
    assert describe()["segment.ms"] == "60000"  # failed alters changed nothing


def test_broker_configs_and_cluster(admin: AdminClient, module_standalone: StandaloneGateway) -> None:
    got = next(iter(admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")]).values())).result(T)
    assert got["node.id"].value == "1"
    assert got["advertised.listeners"].value == f"PLAINTEXT://{module_standalone.bootstrap}"
    assert got["auto.create.topics.enable"].value == "true"
    assert got["log.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    cluster = admin.describe_cluster(request_timeout=T).result(T)
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(1, "127.0.0.1", module_standalone.port)]
    assert cluster.controller.id == 1 and len(cluster.cluster_id) == 22


def test_delete_topic_removes_its_partition_logs(admin: AdminClient, module_standalone: StandaloneGateway) -> None:
    import asyncio
    import time

    from confluent_kafka import Producer

    from gateway import paths
    from kafka_wire.messages.metadata import MetadataRequest, MetadataResponse
    from store.managed.names import log_path
    from store.meta.factory import open_meta
    from tests.support.gateway import RawKafka

    assert _code(admin.create_topics([NewTopic("cf-doomed", 3, 1)])["cf-doomed"]) == 0
    p = Producer({"bootstrap.servers": module_standalone.bootstrap})
    for i in range(30):
        p.produce("cf-doomed", b"v", partition=i % 2)  # partition 2 stays empty
    assert p.flush(T) == 0
    with RawKafka(module_standalone.bootstrap) as c:
        md = c.request(3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="cf-doomed")]))
    assert isinstance(md, MetadataResponse)
    tid = md.topics[0].topic_id
    names = [log_path(paths.partition_log_name(tid, i)) for i in range(3)]

    async def existing() -> list[bool]:
        meta = open_meta(f"embedded://{module_standalone.data_dir.resolve() / 'meta'}")
        await meta.start()
        try:
            return [await meta.exists(n) is not None for n in names]
        finally:
            await meta.close()

    assert asyncio.run(existing())[:2] == [True, True]
    assert _code(admin.delete_topics(["cf-doomed"])["cf-doomed"]) == 0
    deadline = time.monotonic() + 20
    while any(left := asyncio.run(existing())) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert left == [False, False, False]
