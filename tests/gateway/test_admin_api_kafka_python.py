"""Topic and config administration through kafka-python's KafkaAdminClient."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kafka import KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic
from kafka.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

from tests.support.gateway import StandaloneGateway

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def admin(module_standalone: StandaloneGateway) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=module_standalone.bootstrap, request_timeout_ms=15000)
    yield client
    client.close()


def _topic_configs(admin: KafkaAdminClient, name: str, **kw: object) -> dict[str, dict[str, object]]:
    return admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)], **kw)["topic"][name]


def test_create_describe_delete(admin: KafkaAdminClient) -> None:
    resp = admin.create_topics([NewTopic("kp-orders", 3, 1, topic_configs={"retention.ms": "1000"})])
    (result,) = resp["topics"]
    assert (result["name"], result["error_code"], result["num_partitions"]) == ("kp-orders", 0, 3)
    assert result["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert "kp-orders" in admin.list_topics()
    (desc,) = admin.describe_topics(["kp-orders"])
    assert desc["error_code"] == 0 and desc["topic_id"] == result["topic_id"]
    assert sorted(p["partition_index"] for p in desc["partitions"]) == [0, 1, 2]

    modified = _topic_configs(admin, "kp-orders")
    assert set(modified) == {"retention.ms"} and modified["retention.ms"]["value"] == "1000"
    full = _topic_configs(admin, "kp-orders", include_synonyms=True, config_filter="all")
    assert [(s["name"], s["source"]) for s in full["retention.ms"]["synonyms"]] == [
        ("retention.ms", "DYNAMIC_TOPIC_CONFIG"),
        ("log.retention.ms", "DEFAULT_CONFIG"),
    ]
    assert full["max.message.bytes"]["value"] == "1048588"

    deleted = admin.delete_topics(["kp-orders"])
    assert [t["error_code"] for t in deleted["topics"]] == [0]
    assert "kp-orders" not in admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics(["kp-orders"])


def test_errors(admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("kp-dup", 1, 1)])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic("kp-dup", 1, 1)])
    with pytest.raises(InvalidTopicError):
        admin.create_topics([NewTopic("kp bad", 1, 1)])
    with pytest.raises(InvalidTopicError):
        admin.create_topics([NewTopic("x" * 250, 1, 1)])
    with pytest.raises(InvalidConfigurationError, match=r"cleanup\.policy"):
        admin.create_topics([NewTopic("kp-compact", 1, 1, topic_configs={"cleanup.policy": "compaction"})])
    admin.create_topics([NewTopic("kp-compacted", 1, 1, topic_configs={"cleanup.policy": "compact,delete"})])
    with pytest.raises(InvalidConfigurationError):
        admin.create_topics([NewTopic("kp-badcfg", 1, 1, topic_configs={"segment.bytes": "12"})])
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"kp-dup": NewPartitions(1)})
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.create_partitions({"kp-missing": NewPartitions(3)})
    assert not {"kp bad", "kp-compact", "kp-badcfg"} & set(admin.list_topics())
    # Several topics in one request: each gets its own answer.
    resp = admin.create_topics([NewTopic("kp-dup", 1, 1), NewTopic("kp-ok", 2, 1)], raise_errors=False)
    assert {t["name"]: t["error_code"] for t in resp["topics"]} == {"kp-dup": 36, "kp-ok": 0}


def test_partitions_and_configs(admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("kp-grow", 1, 1)])
    admin.create_partitions({"kp-grow": NewPartitions(3)})
    (desc,) = admin.describe_topics(["kp-grow"])
    assert len(desc["partitions"]) == 3
    res = admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "kp-grow", configs={"segment.ms": "60000"})]
    )
    assert res == {"topic": {"kp-grow": "OK"}}
    res = admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "kp-grow", configs={"retention.bytes": "1048576"})],
        incremental=False,
    )
    assert res == {"topic": {"kp-grow": "OK"}}
    got = {k: v["value"] for k, v in _topic_configs(admin, "kp-grow").items()}
    assert got == {"segment.ms": "60000", "retention.bytes": "1048576"}


def test_cluster_and_log_dirs(admin: KafkaAdminClient, module_standalone: StandaloneGateway) -> None:
    cluster = admin.describe_cluster()
    assert cluster["controller_id"] == 1
    assert [(b["broker_id"], b["port"]) for b in cluster["brokers"]] == [(1, module_standalone.port)]
    admin.create_topics([NewTopic("kp-dirs", 2, 1)])
    producer = KafkaProducer(bootstrap_servers=module_standalone.bootstrap, acks="all")
    for _ in range(10):
        producer.send("kp-dirs", b"x" * 1000, partition=1)
    producer.flush(15)
    producer.close()
    deadline = time.monotonic() + 15
    while True:
        (broker,) = admin.describe_log_dirs()
        (d,) = broker["log_dirs"]
        parts = {t["name"]: {p["partition_index"]: p["partition_size"] for p in t["partitions"]}
                 for t in d["topics"]}
        if sorted(parts.get("kp-dirs", {})) == [0, 1] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert broker["broker"] == 1 and d["error_code"] == 0
    assert d["log_dir"] == str(module_standalone.data_dir.resolve())
    sizes = parts["kp-dirs"]
    assert sizes[0] == 0 and 10_000 < sizes[1] < 20_000  # ten 1000-byte records, batch overhead
    assert d["total_bytes"] > 0
