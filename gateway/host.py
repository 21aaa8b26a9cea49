"""The part of a gateway's services (gateway/services.py's GatewayServices) that the coordinator
shards use, as a Protocol, so that gateway/groups.py and gateway/txns.py, which GatewayServices
names, need not name GatewayServices back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gateway.cluster.membership import ClusterView
    from gateway.cluster.partitions import PartitionManager
    from gateway.config import GatewayConfig
    from gateway.partition.producer_ids import ProducerIdAllocator
    from gateway.topics.registry import TopicRegistry
    from store.meta.api import MetaStore


class GatewayHost(Protocol):
    node_id: int
    config: GatewayConfig
    meta: MetaStore
    topics: TopicRegistry
    cluster: ClusterView
    partitions: PartitionManager
    producer_ids: ProducerIdAllocator
