"""Differential runs: the shape of Metadata answers (node ids and hosts normalised away) and
the configs a new topic reports through DescribeConfigs (every config Kafka reports: value,
source, read-only, sensitive), against Apache Kafka and Quire."""

from __future__ import annotations

import pytest

from compat_tests.support.allowlist import Differences
from compat_tests.support.clients import unique
from compat_tests.support.differential import Observations, run_both
from compat_tests.support.targets import Target
from compat_tests.support.wire import Wire, batch

pytestmark = pytest.mark.compat(suite="differential", client="raw protocol")


def metadata_shape(bootstrap: str) -> Observations:
    topic = unique("d-md")
    with Wire(bootstrap) as w:
        w.create(topic, partitions=3)
        w.produce(topic, 1, batch(2))
        md = w.metadata([topic])
        everything = w.metadata(None)
    brokers = {b.node_id for b in md.brokers}
    (t,) = md.topics
    return {
        "brokers.count": len(md.brokers),
        "brokers.have_host_and_port": all(b.host and b.port > 0 for b in md.brokers),
        "cluster_id.present": bool(md.cluster_id),
        "controller.is_a_broker": md.controller_id in brokers,
        "topic.error": int(t.error_code),
        "topic.is_internal": t.is_internal,
        "topic.has_id": t.topic_id.int != 0,
        "topic.partitions": [
            (int(p.partition_index), int(p.error_code), p.leader_id in brokers, p.leader_epoch >= 0,
             len(p.replica_nodes), len(p.isr_nodes), p.leader_id in p.replica_nodes, list(p.offline_replicas))
            for p in sorted(t.partitions, key=lambda p: p.partition_index)
        ],
        "topic.authorized_operations": t.topic_authorized_operations,
        "all_topics.lists_topic": topic in {x.name for x in everything.topics},
        "all_topics.errors": sorted({int(x.error_code) for x in everything.topics}),
    }


def new_topic_configs(bootstrap: str) -> Observations:
    topic = unique("d-cfgdef")
    with Wire(bootstrap) as w:
        w.create(topic, partitions=1, configs={"retention.ms": "3600000"})
        res = w.describe_configs(topic)
    out: Observations = {"error": int(res.error_code)}
    for c in res.configs:
        out[f"configs.{c.name}"] = {"value": c.value, "source": int(c.config_source),
                                    "read_only": c.read_only, "sensitive": c.is_sensitive, "type": int(c.config_type)}
    return out


def test_metadata_shape(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, metadata_shape)


def test_new_topic_configs(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, new_topic_configs)
