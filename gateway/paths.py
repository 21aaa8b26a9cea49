"""Where the Kafka layer keeps its state in the metadata store (one place for all paths)."""

from __future__ import annotations

import uuid

KAFKA = "/kafka"
TOPICS = "/kafka/topics"  # child per topic name: JSON {topic_id, partitions, configs, created_ms}
TOPIC_IDS = "/kafka/topic-ids"  # child per topic id (uuid hex): the topic name
GATEWAYS = "/kafka/gateways"  # ephemeral child per live gateway, named by node id
OWNERS = "/kafka/owners"  # ephemeral lease per owned partition: /kafka/owners/<topic_id>/<partition>
PRODUCER_ID_BLOCK = "/kafka/producer-id-block"  # CAS-allocated blocks of producer ids
CLUSTER_ID = "/kafka/cluster-id"


def topic(name: str) -> str:
    return f"{TOPICS}/{name}"


def topic_id(tid: uuid.UUID) -> str:
    return f"{TOPIC_IDS}/{tid.hex}"


def gateway(node_id: int) -> str:
    return f"{GATEWAYS}/{node_id}"


def owner(tid: uuid.UUID, partition: int) -> str:
    return f"{OWNERS}/{tid.hex}/{partition}"


def partition_log_name(tid: uuid.UUID, partition: int) -> str:
    """The segmented log holding one partition (by topic id, so a re-created topic is new)."""
    return f"kafka/{tid.hex}/{partition}"
