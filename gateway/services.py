"""The components one gateway process is made of, handed to every handler via the context.

Each is built by its own subsystem; this module only names them so handlers can reach them:
- topics (gateway/topics/): Kafka topics, their ids, partition counts and configs, kept in the
  metadata store;
- cluster (gateway/cluster/): live gateways, partition ownership leases, who leads what;
- partitions (gateway/cluster/): the PartitionLog of each partition this gateway owns;
- producer_ids (gateway/partition/): producer id allocation for InitProducerId;
- groups (gateway/groups.py): the consumer-group coordinators of the shards this gateway owns;
- txns (gateway/txns.py): the transaction coordinators of the shards this gateway owns;
- txn_verifier (kafka_log/txn.py TxnVerifier): asks the transaction coordinator whether a
  partition is in a producer's transaction before its first transactional batch is appended
  (default: accept; gateway/app.py installs gateway/txns.py's);
- fetch_sessions (gateway/fetch_sessions.py): the incremental fetch session cache (KIP-227);
- group_configs (gateway/group_configs.py): the groups' configs (GROUP resource), watched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gateway.dead_letters import DeadLetterSink
from gateway.fetch_sessions import FetchSessionCache
from gateway.group_configs import GroupConfigCache, limits
from gateway.groups import GroupCoordinators, group_config
from gateway.shares import SharePartitions
from gateway.txns import TxnCoordinators
from kafka_log.txn import TxnVerifier, accept_all

if TYPE_CHECKING:
    from gateway.cluster.membership import ClusterView
    from gateway.cluster.partitions import PartitionManager
    from gateway.config import GatewayConfig
    from gateway.partition.producer_ids import ProducerIdAllocator
    from gateway.topics.registry import TopicRegistry
    from store.ledger.client import LedgerClient
    from store.meta.api import MetaStore
    from store.offload.offloader import Offloader


@dataclass
class GatewayServices:
    node_id: int
    config: GatewayConfig
    meta: MetaStore
    ledgers: LedgerClient
    topics: TopicRegistry
    cluster: ClusterView
    partitions: PartitionManager
    producer_ids: ProducerIdAllocator
    groups: GroupCoordinators | None = None
    shares: SharePartitions | None = None  # gateway/shares.py: share-partitions and share sessions
    group_configs: GroupConfigCache | None = None  # gateway/group_configs.py: the groups' configs, watched
    txns: TxnCoordinators | None = None
    offloader: Offloader | None = None  # the offload tier's driver (None: no tier configured)
    txn_verifier: TxnVerifier = accept_all
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)

    def group_coordinators(self) -> GroupCoordinators:
        """The process's GroupCoordinators: made and started with the gateway (gateway/app.py), or
        on first use when services were assembled without them (in-process tests)."""
        if self.groups is None:
            self.groups = GroupCoordinators(self)
            self.groups.start()
        return self.groups

    def txn_coordinators(self) -> TxnCoordinators:
        """The process's TxnCoordinators, made like group_coordinators()."""
        if self.txns is None:
            self.txns = TxnCoordinators(self, self.group_coordinators())
            self.txns.start()
        return self.txns

    def share_partitions(self) -> SharePartitions:
        """The process's SharePartitions, made on first use."""
        if self.shares is None:
            sink = DeadLetterSink(self.topics, self.partitions, self.cluster, self.node_id, self.config.num_partitions)
            self.shares = SharePartitions(self.config.share, self.meta, sink, self.group_config_cache())
        return self.shares

    def group_config_cache(self) -> GroupConfigCache:
        """The process's watched cache of group configs (gateway/group_configs.py), made on first use."""
        if self.group_configs is None:
            self.group_configs = GroupConfigCache(self.meta, limits(self.config.share, group_config(self)))
        return self.group_configs
