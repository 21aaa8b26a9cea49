"""One gateway process's settings (Kafka broker config names in the comments)."""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator.share.config import ShareConfig
from coordinator.txn.config import TxnConfig
from gateway.topics.configs import ConfigSource, ConfigType
from store.offload import OffloadSettings
from store.offload.offloader import (
    DEFAULT_CLEANUP_MARGIN_MS,
    DEFAULT_DELETION_LAG_MS,
    DEFAULT_MAX_CONCURRENT_LEDGERS,
)


@dataclass(frozen=True)
class BrokerSetting:
    """One broker config as DescribeConfigs reports it (the `quire` command derives these from its
    settings table, quire/settings.py)."""

    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    doc: str
    default: str | None = None  # reported as the DEFAULT_CONFIG synonym of a value set otherwise


@dataclass(frozen=True)
class CleanerSettings:
    """Kafka's log.cleaner.* broker settings (quire/settings.py)."""

    enable: bool = True  # log.cleaner.enable
    dedupe_buffer_bytes: int = 134_217_728  # log.cleaner.dedupe.buffer.size
    io_max_bytes_per_s: float = 1.7976931348623157e308  # log.cleaner.io.max.bytes.per.second
    backoff_ms: int = 15_000  # log.cleaner.backoff.ms


@dataclass
class GatewayConfig:
    meta_url: str = ""
    meta_session_timeout_s: float = 10.0
    listen_host: str = "127.0.0.1"
    listen_port: int = 9092  # 0: any free port (the bound one is advertised)
    advertised_host: str | None = None  # advertised.listeners; None: the listen address
    advertised_port: int | None = None
    node_id: int | None = None  # node.id; None: allocated via the metadata store
    rack: str | None = None  # broker.rack
    data_dir: str | None = None  # reported as the gateway's one log dir (DescribeLogDirs)
    auto_create_topics: bool = True  # auto.create.topics.enable
    num_partitions: int = 1  # num.partitions
    default_replication_factor: int = 1  # default.replication.factor (reported; E/WQ/AQ decide)
    delete_topic_enable: bool = True  # delete.topic.enable
    # Ledger replication of partition logs; a topic's min.insync.replicas raises AQ (up to WQ).
    ensemble_size: int = 1
    write_quorum: int = 1
    ack_quorum: int = 1
    socket_request_max_bytes: int = 104857600  # socket.request.max.bytes
    message_max_bytes: int = 1048588  # message.max.bytes (default max.message.bytes of topics)
    max_inflight_requests: int = 256  # per connection, before reading pauses
    fetch_session_cache_slots: int = 1000  # max.incremental.fetch.session.cache.slots
    shutdown_grace_s: float = 10.0
    # Consumer groups (Kafka's names); None: GroupConfig's default.
    offsets_topic_partitions: int | None = None  # offsets.topic.num.partitions (Quire: 16)
    # GroupConfig field -> value of the group.* settings (quire/settings.py); missing: the default.
    group: dict[str, int | str] = field(default_factory=dict)
    txn: TxnConfig = field(default_factory=TxnConfig)  # transaction.* settings
    transaction_partition_verification: bool = True  # transaction.partition.verification.enable
    share: ShareConfig = field(default_factory=ShareConfig)  # group.share.* (share groups)
    cache_mb: int | None = None  # quire.cache.mb: entry cache bound; None: EntryCache's default
    cleaner: CleanerSettings = field(default_factory=CleanerSettings)  # log.cleaner.*
    # Offload tier (quire.offload.*); None or driver "none": no tier (remote.storage.enable inert).
    offload: OffloadSettings | None = None
    offload_deletion_lag_ms: int = DEFAULT_DELETION_LAG_MS
    offload_cleanup_margin_ms: int = DEFAULT_CLEANUP_MARGIN_MS
    offload_max_concurrent_ledgers: int = DEFAULT_MAX_CONCURRENT_LEDGERS  # per log, copied at once
    import_enable: bool = False  # quire.import.enable: accept `quire migrate`'s imports (gateway/imports.py)
    # Broker-level defaults of topic configs by topic config name (log.retention.ms -> retention.ms).
    topic_defaults: dict[str, str] = field(default_factory=dict)
    # What DescribeConfigs reports for the BROKER resource, with sources (empty: built in-process).
    broker_settings: tuple[BrokerSetting, ...] = ()

    def __post_init__(self) -> None:
        if not self.ensemble_size >= self.write_quorum >= self.ack_quorum >= 1:
            raise ValueError(f"need E >= WQ >= AQ >= 1, got {self.ensemble_size}/{self.write_quorum}/{self.ack_quorum}")
        if self.num_partitions < 1:
            raise ValueError("num_partitions must be >= 1")

    def advertised(self, bound_port: int | None = None) -> tuple[str, int]:
        """The address clients are told to use (bound_port: the port actually listened on)."""
        host = self.advertised_host or self.listen_host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        port = self.advertised_port or bound_port or self.listen_port
        return host, port
