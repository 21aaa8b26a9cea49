"""Every setting of every role, defined once: its `server.properties` key (Kafka's name where
Kafka has the setting, `quire.`-prefixed otherwise), type, default, help, flag and environment
variable. Command-line flags, QUIRE_* environment variables, the `--config FILE` keys and the
broker configs DescribeConfigs reports are all derived from SETTINGS.

Precedence: default < file < environment < flag. The environment variable of a key is derived
mechanically: drop a leading `quire.`, upper-case, dots to underscores, prefix QUIRE_
(`num.partitions` -> QUIRE_NUM_PARTITIONS, `quire.cache.mb` -> QUIRE_CACHE_MB).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coordinator.group.config import GroupConfig
from coordinator.share.config import ShareConfig
from coordinator.txn.config import TxnConfig
from gateway.config import BrokerSetting
from gateway.topics.configs import TOPIC_CONFIGS, ConfigSource, ConfigType
from store.bookie.bookie import BookieConfig
from store.bookie.disk import DiskConfig
from store.managed.cache import DEFAULT_CACHE_BYTES
from store.metrics import DEFAULT_METRICS, metrics_address
from store.offload import OffloadSettings, make_tier
from store.offload.offloader import (
    DEFAULT_CLEANUP_MARGIN_MS,
    DEFAULT_DELETION_LAG_MS,
    DEFAULT_MAX_CONCURRENT_LEDGERS,
)
from store.offload.tier import Tier
from store.recovery.service import RecoveryConfig

log = logging.getLogger(__name__)
GATEWAY, BOOKIE, STANDALONE, RECOVERY = "gateway", "bookie", "standalone", "recovery"
G = frozenset({GATEWAY, STANDALONE})
B = frozenset({BOOKIE, STANDALONE})
ALL = G | B
R = B | {RECOVERY}  # auto-recovery runs in bookies and in `quire recovery` processes


class SettingsError(ValueError):
    """A configuration that cannot be used; the message names the key and the problem."""


@dataclass(frozen=True)
class Setting:
    key: str
    type: type  # int, float, bool or str
    default: Any
    help: str
    roles: frozenset[str]
    flag: str | None = None  # None: derived from the key (--num-partitions, --cache-mb)
    aliases: tuple[str, ...] = ()  # other file keys meaning the same (broker.id for node.id)
    env_aliases: tuple[str, ...] = ()  # older environment variables still honoured
    role_defaults: Mapping[str, Any] = field(default_factory=dict)
    config_type: ConfigType | None = None  # DescribeConfigs type; None: from `type`
    described: bool = True  # reported by DescribeConfigs on the BROKER resource (gateway settings)
    flag_aliases: tuple[str, ...] = ()  # older flags still accepted (--dir for a bookie's --data-dir)
    topic_config: str | None = None  # the topic config this broker setting is the default of
    group_field: str | None = None  # the GroupConfig field this group coordinator setting sets
    share_field: str | None = None  # the ShareConfig field this share-group setting sets

    @property
    def dest(self) -> str:
        return self.key.replace(".", "_")

    @property
    def flag_name(self) -> str:
        return self.flag or "--" + self.key.removeprefix("quire.").replace(".", "-")

    @property
    def env(self) -> str:
        return "QUIRE_" + self.key.removeprefix("quire.").upper().replace(".", "_").replace("-", "_")

    def default_for(self, role: str) -> Any:
        return self.role_defaults.get(role, self.default)

    def describe_type(self) -> ConfigType:
        if self.config_type is not None:
            return self.config_type
        return {int: ConfigType.INT, float: ConfigType.DOUBLE, bool: ConfigType.BOOLEAN}.get(self.type, ConfigType.STRING)


_GROUP = GroupConfig()
_SHARE = ShareConfig()
_TXN = TxnConfig()
_BOOKIE = BookieConfig()
_DISK = DiskConfig()
_RECOVERY = RecoveryConfig()
_KAFKA_PREFIXED = ("PLAINTEXT://",)


def _parse(kind: type, raw: str, key: str) -> Any:
    s = raw.strip()
    try:
        if kind is bool:
            if s.lower() not in ("true", "false"):
                raise ValueError
            return s.lower() == "true"
        if kind is int:
            return int(s)
        if kind is float:
            return float(s)
    except ValueError:
        raise SettingsError(f"{key}: {raw!r} is not a valid {kind.__name__}") from None
    return s


def _topic_defaults() -> list[Setting]:
    """Broker-level defaults of topic configs (log.retention.ms ...), from Kafka's topic table."""
    kinds = {ConfigType.INT: int, ConfigType.LONG: int, ConfigType.SHORT: int, ConfigType.BOOLEAN: bool,
             ConfigType.DOUBLE: float}
    out = []
    for defn in sorted(TOPIC_CONFIGS.values(), key=lambda d: d.name):
        if defn.broker_synonym is None or not defn.applied:
            continue
        kind = kinds.get(defn.type, str)
        default: Any = _parse(kind, defn.default, defn.broker_synonym)
        out.append(Setting(defn.broker_synonym, kind, default, f"default {defn.name} of topics: {defn.doc}", G,
                           config_type=defn.type, topic_config=defn.name))
    return out


def _share_settings() -> list[Setting]:
    """The share groups' settings (Kafka's names and defaults), each setting one ShareConfig field."""
    table = (
        ("group.share.record.lock.duration.ms", "record_lock_duration_ms",
         "how long a share consumer holds acquired records before they return"),
        ("group.share.min.record.lock.duration.ms", "min_record_lock_duration_ms",
         "lower limit of the share.record.lock.duration.ms group config"),
        ("group.share.max.record.lock.duration.ms", "max_record_lock_duration_ms",
         "upper limit of the share.record.lock.duration.ms group config"),
        ("group.share.delivery.count.limit", "delivery_count_limit",
         "deliveries of a record to share consumers before it is archived"),
        ("group.share.min.delivery.count.limit", "min_delivery_count_limit",
         "lower limit of the share.delivery.count.limit group config"),
        ("group.share.max.delivery.count.limit", "max_delivery_count_limit",
         "upper limit of the share.delivery.count.limit group config"),
        ("group.share.session.timeout.ms", "session_timeout_ms", "share-group member session timeout"),
        ("group.share.min.session.timeout.ms", "min_session_timeout_ms",
         "lower limit of the share.session.timeout.ms group config"),
        ("group.share.max.session.timeout.ms", "max_session_timeout_ms",
         "upper limit of the share.session.timeout.ms group config"),
        ("group.share.heartbeat.interval.ms", "heartbeat_interval_ms", "heartbeat interval share-group members are told"),
        ("group.share.min.heartbeat.interval.ms", "min_heartbeat_interval_ms",
         "lower limit of the share.heartbeat.interval.ms group config"),
        ("group.share.max.heartbeat.interval.ms", "max_heartbeat_interval_ms",
         "upper limit of the share.heartbeat.interval.ms group config"),
        ("group.share.max.size", "max_size", "members of one share group, at most"),
        ("group.share.partition.max.record.locks", "partition_max_record_locks",
         "records in flight per share-partition, at most"),
        ("group.share.min.partition.max.record.locks", "min_partition_max_record_locks",
         "lower limit of the share.partition.max.record.locks group config"),
        ("group.share.max.partition.max.record.locks", "max_partition_max_record_locks",
         "upper limit of the share.partition.max.record.locks group config"),
        ("group.share.assignment.interval.ms", "assignment_interval_ms",
         "default of the share.assignment.interval.ms group config (no effect: Quire assigns a share group "
         "on the heartbeat that changes it)"),
        ("group.share.min.assignment.interval.ms", "min_assignment_interval_ms",
         "lower limit of the share.assignment.interval.ms group config"),
        ("group.share.max.assignment.interval.ms", "max_assignment_interval_ms",
         "upper limit of the share.assignment.interval.ms group config"),
        ("group.share.assignor.offload.enable", "assignor_offload_enable",
         "default of the share.assignor.offload.enable group config (no effect: no assignor thread)"),
    )
    return [Setting(key, type(getattr(_SHARE, name)), getattr(_SHARE, name), doc, G, share_field=name)
            for key, name, doc in table]


def _group_settings() -> list[Setting]:
    """The group coordinator's settings (Kafka's names and defaults), each setting one GroupConfig field."""
    table: tuple[tuple[str, str, str], ...] = (
        ("group.initial.rebalance.delay.ms", "initial_rebalance_delay_ms",
         "wait for more members before the first rebalance of an empty classic group"),
        ("group.min.session.timeout.ms", "min_session_timeout_ms", "smallest session timeout a classic member may ask for"),
        ("group.max.session.timeout.ms", "max_session_timeout_ms", "largest session timeout a classic member may ask for"),
        ("group.consumer.session.timeout.ms", "consumer_session_timeout_ms",
         "session timeout of consumer-protocol (KIP-848) members"),
        ("group.consumer.min.session.timeout.ms", "consumer_min_session_timeout_ms",
         "lower limit of group.consumer.session.timeout.ms"),
        ("group.consumer.max.session.timeout.ms", "consumer_max_session_timeout_ms",
         "upper limit of group.consumer.session.timeout.ms"),
        ("group.consumer.heartbeat.interval.ms", "consumer_heartbeat_interval_ms",
         "heartbeat interval given to consumer-protocol members"),
        ("group.consumer.min.heartbeat.interval.ms", "consumer_min_heartbeat_interval_ms",
         "lower limit of group.consumer.heartbeat.interval.ms"),
        ("group.consumer.max.heartbeat.interval.ms", "consumer_max_heartbeat_interval_ms",
         "upper limit of group.consumer.heartbeat.interval.ms"),
        ("group.consumer.max.size", "consumer_max_size", "most members of one consumer-protocol group"),
        ("group.consumer.assignment.interval.ms", "consumer_assignment_interval_ms",
         "least time between two target assignments of a consumer-protocol group"),
        ("group.consumer.min.assignment.interval.ms", "consumer_min_assignment_interval_ms",
         "lower limit of the consumer.assignment.interval.ms group config"),
        ("group.consumer.max.assignment.interval.ms", "consumer_max_assignment_interval_ms",
         "upper limit of the consumer.assignment.interval.ms group config"),
        ("group.consumer.assignor.offload.enable", "consumer_assignor_offload_enable",
         "default of the consumer.assignor.offload.enable group config (no effect: no assignor thread)"),
        ("group.consumer.assignors", "consumer_assignors",
         "server-side assignors consumer-protocol members may name (uniform, range); the first is the default"),
        ("group.consumer.migration.policy", "consumer_migration_policy",
         "classic <-> consumer group conversions allowed: disabled, upgrade, downgrade or bidirectional"),
    )
    # Streams groups (KIP-1071): not served; the defaults and limits of the streams.* group configs.
    streams = " of the streams.* group configs (no effect: Quire serves no streams groups)"
    table += (
        ("group.streams.session.timeout.ms", "streams_session_timeout_ms", "default of streams.session.timeout.ms"),
        ("group.streams.min.session.timeout.ms", "streams_min_session_timeout_ms",
         "lower limit of streams.session.timeout.ms"),
        ("group.streams.max.session.timeout.ms", "streams_max_session_timeout_ms",
         "upper limit of streams.session.timeout.ms"),
        ("group.streams.heartbeat.interval.ms", "streams_heartbeat_interval_ms",
         "default of streams.heartbeat.interval.ms"),
        ("group.streams.min.heartbeat.interval.ms", "streams_min_heartbeat_interval_ms",
         "lower limit of streams.heartbeat.interval.ms"),
        ("group.streams.max.heartbeat.interval.ms", "streams_max_heartbeat_interval_ms",
         "upper limit of streams.heartbeat.interval.ms"),
        ("group.streams.num.standby.replicas", "streams_num_standby_replicas",
         "default of streams.num.standby.replicas"),
        ("group.streams.max.standby.replicas", "streams_max_standby_replicas",
         "upper limit of streams.num.standby.replicas"),
        ("group.streams.initial.rebalance.delay.ms", "streams_initial_rebalance_delay_ms",
         "default of streams.initial.rebalance.delay.ms"),
        ("group.streams.assignment.interval.ms", "streams_assignment_interval_ms",
         "default of streams.assignment.interval.ms"),
        ("group.streams.min.assignment.interval.ms", "streams_min_assignment_interval_ms",
         "lower limit of streams.assignment.interval.ms"),
        ("group.streams.max.assignment.interval.ms", "streams_max_assignment_interval_ms",
         "upper limit of streams.assignment.interval.ms"),
        ("group.streams.assignors", "streams_assignors",
         "task assignors streams.assignor.name may name (the first is its default)"),
        ("group.streams.rack.aware.assignment.tags", "streams_rack_aware_assignment_tags",
         "default of streams.rack.aware.assignment.tags"),
        ("group.streams.assignor.offload.enable", "streams_assignor_offload_enable",
         "default of streams.assignor.offload.enable"),
        ("group.streams.task.offset.interval.ms", "streams_task_offset_interval_ms",
         "default of streams.task.offset.interval.ms"),
        ("group.streams.min.task.offset.interval.ms", "streams_min_task_offset_interval_ms",
         "lower limit of streams.task.offset.interval.ms"),
        ("group.streams.num.warmup.replicas", "streams_num_warmup_replicas", "default of streams.num.warmup.replicas"),
        ("group.streams.max.warmup.replicas", "streams_max_warmup_replicas",
         "upper limit of streams.num.warmup.replicas"),
        ("group.streams.acceptable.recovery.lag", "streams_acceptable_recovery_lag",
         "default of streams.acceptable.recovery.lag"),
    )
    lists = {"group.consumer.assignors", "group.streams.assignors", "group.streams.rack.aware.assignment.tags"}
    types = {**{k: ConfigType.LIST for k in lists}, "group.streams.acceptable.recovery.lag": ConfigType.LONG}
    return [Setting(key, type(getattr(_GROUP, name)), getattr(_GROUP, name),
                    doc + (streams if key.startswith("group.streams.") else ""), G, group_field=name,
                    config_type=types.get(key))
            for key, name, doc in table]


SETTINGS: tuple[Setting, ...] = (
    # Kafka's names
    Setting("listeners", str, "PLAINTEXT://127.0.0.1:9092", "HOST:PORT (or PLAINTEXT://HOST:PORT) to listen on",
            G, flag="--listen"),
    Setting("advertised.listeners", str, None, "HOST:PORT clients are told (default: the listener)", G,
            flag="--advertise"),
    Setting("node.id", int, None, "node id (default: allocated, stable per address; standalone: 1)", G,
            flag="--id", aliases=("broker.id",)),
    Setting("broker.rack", str, None, "rack of this gateway or bookie (placement spreads ledgers over racks)",
            ALL, flag="--rack"),
    Setting("num.partitions", int, 1, "partitions of auto-created topics", G),
    Setting("auto.create.topics.enable", bool, True, "create unknown topics on Metadata requests", G,
            flag="--auto-create"),
    Setting("delete.topic.enable", bool, True, "allow DeleteTopics", G),
    Setting("socket.request.max.bytes", int, 104857600, "largest request accepted", G),
    Setting("max.incremental.fetch.session.cache.slots", int, 1000,
            "incremental fetch sessions (KIP-227) kept per gateway", G),
    Setting("offsets.topic.num.partitions", int, _GROUP.offsets_topic_partitions,
            "consumer-group coordinator shards (partitions of __consumer_offsets)", G,
            flag="--offsets-topic-partitions", env_aliases=("QUIRE_OFFSETS_TOPIC_PARTITIONS",)),
    *_group_settings(),
    Setting("transaction.state.log.num.partitions", int, _TXN.state_log_num_partitions,
            "transaction-coordinator shards (partitions of __transaction_state)", G),
    Setting("transaction.state.log.segment.bytes", int, _TXN.state_log_segment_bytes,
            "segment.bytes of __transaction_state", G),
    Setting("transaction.max.timeout.ms", int, _TXN.max_timeout_ms,
            "largest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT above)", G),
    Setting("transactional.id.expiration.ms", int, _TXN.id_expiration_ms,
            "a transactional id idle this long (no transaction open) is forgotten", G),
    Setting("transaction.abort.timed.out.transaction.cleanup.interval.ms", int, _TXN.abort_timed_out_interval_ms,
            "how often transactions past their timeout are looked for and aborted", G),
    Setting("transaction.remove.expired.transaction.cleanup.interval.ms", int, _TXN.remove_expired_interval_ms,
            "how often expired transactional ids are removed", G),
    Setting("transaction.partition.verification.enable", bool, True,
            "a partition owner asks the transaction coordinator that a partition is in the transaction "
            "before appending its first transactional batch", G),
    *_share_settings(),
    *_topic_defaults(),
    Setting("log.cleaner.enable", bool, True, "run the log cleaner on compacted topics' partitions", G),
    Setting("log.cleaner.dedupe.buffer.size", int, 134217728,
            "memory of the cleaner's key map (24 bytes a key, as Kafka's); a pass stops at the ledger "
            "whose keys do not fit", G, config_type=ConfigType.LONG),
    Setting("log.cleaner.io.max.bytes.per.second", float, 1.7976931348623157e308,
            "throttle of the cleaner's reads and writes", G),
    Setting("log.cleaner.backoff.ms", int, 15000,
            "how often the cleaner looks at compacted partitions besides when a ledger closes", G,
            config_type=ConfigType.LONG),
    # Quire's own
    Setting("quire.share.redelivery.backoff.min.ms", int, _SHARE.redelivery_backoff_min_ms,
            "share groups: wait before a released or lock-expired record is redelivered (0: at once); "
            "the default of the group config of the name", G),
    Setting("quire.share.redelivery.backoff.max.ms", int, _SHARE.redelivery_backoff_max_ms,
            "share groups: the longest redelivery backoff", G),
    Setting("quire.share.redelivery.backoff.multiplier", float, _SHARE.redelivery_backoff_multiplier,
            "share groups: factor the redelivery backoff grows by per delivery", G),
    Setting("quire.meta", str, None, "metadata store: zk://host:port/chroot or embedded:///dir (required)",
            frozenset({GATEWAY, BOOKIE, RECOVERY}), described=False),
    Setting("quire.meta.session.timeout.s", float, 10.0,
            "metadata-store session timeout in seconds: how fast a dead gateway's partitions move", G,
            flag="--session-timeout"),
    Setting("quire.replication", str, "3/3/2",
            "E/WQ/AQ of partition ledgers (standalone default: min(N,3)/min(N,3)/min(N,2) for N bookies)", G,
            role_defaults={STANDALONE: None}),
    Setting("quire.data.dir", str, None,
            "data directory (standalone: everything; bookie: ledgers; gateway: reported log dir)", ALL,
            role_defaults={STANDALONE: "./quire-data"}, aliases=("log.dirs",), flag_aliases=("--dir",)),
    Setting("quire.bookies", int, 1, "bookie child processes of the standalone", frozenset({STANDALONE}),
            described=False),
    Setting("quire.cache.mb", int, DEFAULT_CACHE_BYTES >> 20, "entry cache of the gateway (recent and read-ahead entries): bounds its memory, MiB", G),
    Setting("quire.import.enable", bool, False,
            "accept `quire migrate`'s imports of batches at their original offsets (internal; off but while migrating)", G),
    Setting("quire.offload.driver", str, "fs",
            "offload tier of topics with remote.storage.enable: fs (a directory), s3 or none", G),
    Setting("quire.offload.dir", str, None, "fs offload directory (default: DATA_DIR/offload)", G),
    Setting("quire.offload.s3.endpoint", str, None,
            "S3 endpoint URL (e.g. http://127.0.0.1:8333 for SeaweedFS; default: AWS)", G),
    Setting("quire.offload.s3.bucket", str, "quire-offload", "S3 bucket (created if missing)", G),
    Setting("quire.offload.s3.prefix", str, "", "key prefix inside the bucket", G),
    Setting("quire.offload.s3.region", str, None, "S3 region (default us-east-1)", G),
    Setting("quire.offload.s3.access.key", str, None,
            "S3 access key (default: boto3's chain: AWS_ACCESS_KEY_ID, profiles, ...)", G, described=False),
    Setting("quire.offload.s3.secret.key", str, None,
            "S3 secret key (default: boto3's chain: AWS_SECRET_ACCESS_KEY, ...)", G, described=False),
    Setting("quire.offload.concurrency", int, 8, "offload tier requests in flight (thread pool)", G),
    Setting("quire.offload.deletion.lag.ms", int, DEFAULT_DELETION_LAG_MS,
            "how long an offloaded ledger's bookie copy is kept", G),
    Setting("quire.offload.cleanup.margin.ms", int, DEFAULT_CLEANUP_MARGIN_MS,
            "offloaded objects no metadata names are removed by cleanup once this old", G),
    Setting("quire.offload.max.concurrent.ledgers", int, DEFAULT_MAX_CONCURRENT_LEDGERS,
            "ledgers of one log copied to the tier at once (each switched by its own compare-and-set)", G),
    Setting("quire.metrics", str, None,
            "HOST:PORT of the Prometheus metrics endpoint, or off (standalone: the gateway's; its bookies "
            "take the following ports)", ALL | {RECOVERY}, described=False, role_defaults={STANDALONE: DEFAULT_METRICS}),
    Setting("quire.realtime.priority", int, 0,
            "SCHED_RR priority (1-99) for every thread of the process, for hosts where the servers share "
            "CPUs with batch work such as Spark: woken threads then preempt it at once (0: the normal "
            "scheduler; needs CAP_SYS_NICE or ulimit -r; standalone: its bookies too). The bookies' background "
            "send threads (scans) step back down to SCHED_OTHER", ALL, described=False),
    Setting("quire.bookie.host", str, "127.0.0.1", "address the bookie listens on", frozenset({BOOKIE}),
            flag="--host", described=False),
    Setting("quire.bookie.port", int, None, "port the bookie listens on (required)", frozenset({BOOKIE}),
            flag="--port", described=False),
    Setting("quire.bookie.journal.dir", str, None, "journal directory (default: DATA_DIR/journal)",
            frozenset({BOOKIE}), flag="--journal-dir", described=False),
    Setting("quire.bookie.fsync", bool, _BOOKIE.journal_sync,
            "fdatasync the journal before acking adds (--no-fsync is UNSAFE, benchmarks only)", B,
            flag="--fsync", described=False),
    Setting("quire.bookie.journal.batch.wait.s", float, _BOOKIE.journal_batch_wait,
            "seconds an add that follows another may wait to share its journal write and fdatasync (0: none)", B,
            flag="--journal-batch-wait", described=False),
    Setting("quire.bookie.journal.loop.sync.max.s", float, _BOOKIE.journal_loop_sync_max,
            "seconds the bookie's recent journal group commits (write and fdatasync) may take on average "
            "and the next still run on its event loop; slower sends them to a writer thread for a while, "
            "so a slow disk holds up the adds, not the reads (0: always the thread)", B,
            flag="--journal-loop-sync-max", described=False),
    Setting("quire.bookie.background.read.threads", int, _BOOKIE.background_read_threads,
            "threads sending bulk range reads (a scan's, flagged background) with sendfile", B,
            flag="--background-read-threads", described=False),
    Setting("quire.bookie.background.read.nice", int, _BOOKIE.background_read_nice,
            "nice level of those threads (0: the bookie's own; a lower priority makes the bookie's "
            "loop wait for them through the GIL)", B,
            flag="--background-read-nice", described=False),
    Setting("quire.bookie.background.read.ahead.bytes", int, _BOOKIE.background_read_ahead,
            "bytes those threads read ahead a chunk, with the kernel's read-ahead off for the logs "
            "they send from, so a scan's reads queue little ahead of the journal's writes on a shared "
            "disk (0: the kernel's read-ahead)", B,
            flag="--background-read-ahead-bytes", described=False),
    Setting("quire.bookie.flush.interval.s", float, _BOOKIE.storage.flush_interval,
            "seconds between checkpoints", B, flag="--flush-interval", described=False),
    Setting("quire.bookie.write.cache.mb", float, _BOOKIE.storage.write_cache_bytes / (1 << 20),
            "bookie write cache, MiB; adds wait beyond it", B, flag="--write-cache-mb", described=False),
    Setting("quire.bookie.disk.usage.threshold", float, _DISK.threshold,
            "fraction of the data disk in use at which the bookie turns read-only (refuses adds)", B,
            described=False),
    Setting("quire.bookie.disk.usage.lwm", float, _DISK.lwm,
            "fraction of the data disk in use below which a read-only bookie is writable again", B, described=False),
    Setting("quire.bookie.disk.check.interval.s", float, _DISK.check_interval_s,
            "seconds between disk-usage checks", B, described=False),
    Setting("quire.recovery.enable", bool, True,
            "run auto-recovery in the bookie: an auditor candidate and a replication worker", B, described=False),
    Setting("quire.recovery.delay.s", float, _RECOVERY.delay_s,
            "seconds a bookie must be gone before its ledgers are marked under-replicated", R, described=False),
    Setting("quire.recovery.audit.interval.s", float, _RECOVERY.audit_interval_s,
            "seconds between the auditor's scans for lost bookies (it also wakes on every bookie change)", R,
            described=False),
    Setting("quire.recovery.check.interval.s", float, _RECOVERY.check_interval_s,
            "seconds between the auditor's sampled read checks of every replica (missing or corrupt copies)", R,
            described=False),
    Setting("quire.recovery.check.sample", int, _RECOVERY.check_sample,
            "entries the sampled check reads per bookie and fragment", R, described=False),
)
BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}
_BY_ANY_KEY: dict[str, Setting] = {**BY_KEY, **{a: s for s in SETTINGS for a in s.aliases}}


# -- Java properties (server.properties) --------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 2:i + 6]):
                out.append(chr(int(s[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _logical_lines(text: str) -> list[str]:
    """Physical lines joined where a line ends in an odd number of backslashes (continuation);
    the continuation's leading whitespace is dropped; comments and blank lines skipped."""
    out: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        body = line[:-1] if trailing % 2 else line
        pending = body if pending is None else pending + body
        if not trailing % 2:
            out.append(pending)
            pending = None
    if pending is not None:
        out.append(pending)
    return out


def parse_properties(text: str) -> dict[str, str]:
    """Java Properties.load syntax: `#`/`!` comments, `=`, `:` or whitespace separators,
    backslash escapes (\\t \\n \\uXXXX ...), line continuations."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i = 0
        while i < len(line):
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=: \t\f":
                break
            i += 1
        key, j = line[:i], i
        while j < len(line) and line[j] in " \t\f":
            j += 1
        if j < len(line) and line[j] in "=:":
            j += 1
        while j < len(line) and line[j] in " \t\f":
            j += 1
        rest = line[j:]
        props[_unescape(key)] = _unescape(rest)
    return props


# -- resolution -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Value:
    value: Any
    source: str  # "default", "file", "env" or "flag"


class Resolved(dict[str, Value]):
    def get_value(self, key: str) -> Any:
        return self[key].value


def for_role(role: str) -> list[Setting]:
    return [s for s in SETTINGS if role in s.roles]


def add_arguments(parser: argparse.ArgumentParser, role: str) -> None:
    """One flag per setting of the role (default None: 'not given', so the file and environment
    can fill it); the help shows the effective default."""
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="server.properties-style file (Kafka's keys; see the README's table)")
    for s in for_role(role):
        default = s.default_for(role)
        shown = "-" if default is None else (str(default).lower() if s.type is bool else default)
        text = f"{s.help} [{s.key}, ${s.env}; default: {shown}]"
        if s.type is bool:
            parser.add_argument(s.flag_name, *s.flag_aliases, dest=s.dest, action=argparse.BooleanOptionalAction,
                                default=None, help=text)
        else:
            parser.add_argument(s.flag_name, *s.flag_aliases, dest=s.dest, type=str, default=None,
                                metavar=s.dest.split("_")[-1].upper(), help=text)


def resolve(role: str, args: argparse.Namespace | None = None, env: Mapping[str, str] | None = None,
            file: str | os.PathLike[str] | None = None, given: Mapping[str, str] | None = None) -> Resolved:
    """Every setting of `role` with its value and where it came from. SettingsError on an unknown
    key in the file or in `given`, an unreadable file, or a value of the wrong type; keys of
    other roles are ignored (with a warning). `given`: values by key, taking a flag's precedence
    (a Spark data source's options)."""
    env = os.environ if env is None else env
    settings = for_role(role)
    mine = {s.key for s in settings}
    from_file: dict[str, tuple[Setting, str]] = {}
    if file is not None:
        try:
            text = Path(file).read_text(encoding="latin-1")
        except OSError as e:
            raise SettingsError(f"cannot read config file {file}: {e.strerror or e}") from None
        for key, raw in parse_properties(text).items():
            s = _BY_ANY_KEY.get(key)
            if s is None:
                raise SettingsError(f"{file}: unknown setting {key!r} (see the README's settings table)")
            if s.key not in mine:  # one file may serve every role of a host
                log.warning("%s: %s does not apply to quire %s: ignored", file, key, role,
                            extra={"fields": {"event": "setting_ignored", "key": key, "role": role}})
                continue
            from_file[s.key] = (s, raw)
    given = dict(given or {})
    for key in given:
        if _BY_ANY_KEY.get(key) is None:
            raise SettingsError(f"unknown setting {key!r} (see the README's settings table)")
    out = Resolved()
    for s in settings:
        v = Value(s.default_for(role), "default")
        if s.key in from_file:
            v = Value(_parse(s.type, from_file[s.key][1], s.key), "file")
        for name in (*s.env_aliases, s.env):  # the mechanical name wins over an older alias
            if env.get(name):
                v = Value(_parse(s.type, env[name], f"{s.key} (${name})"), "env")
        flag = getattr(args, s.dest, None) if args is not None else None
        if flag is not None:
            v = Value(flag if isinstance(flag, bool) else _parse(s.type, flag, f"{s.key} ({s.flag_name})"), "flag")
        if s.key in given:
            v = Value(_parse(s.type, given[s.key], s.key), "option")
        out[s.key] = v
    return out


def offload_settings(r: Resolved, data_dir: str | None) -> OffloadSettings | None:
    """The offload tier from quire.offload.*; fs without a directory or data dir: none."""
    driver = r.get_value("quire.offload.driver")
    directory = r.get_value("quire.offload.dir") or (str(Path(data_dir) / "offload") if data_dir else "")
    if driver == "none" or (driver == "fs" and not directory):
        return None
    if driver not in ("fs", "s3"):
        raise SettingsError(f"quire.offload.driver: {driver!r} is not fs, s3 or none")
    return OffloadSettings(
        driver=driver, directory=directory,
        s3_endpoint=r.get_value("quire.offload.s3.endpoint") or "",
        s3_bucket=r.get_value("quire.offload.s3.bucket"), s3_prefix=r.get_value("quire.offload.s3.prefix") or "",
        s3_region=r.get_value("quire.offload.s3.region") or "",
        s3_access_key=r.get_value("quire.offload.s3.access.key") or "",
        s3_secret_key=r.get_value("quire.offload.s3.secret.key") or "",
        concurrency=r.get_value("quire.offload.concurrency"),
    )


def offload_tier(r: Resolved, data_dir: str | None) -> Tier | None:
    """The tier readers of offloaded ledgers use (`quire admin`), or None when offload is off."""
    s = offload_settings(r, data_dir)
    return make_tier(s) if s is not None else None


def hostport(value: str, what: str) -> tuple[str, int]:
    """HOST:PORT, also in Kafka's listener form PLAINTEXT://HOST:PORT (the first of a list)."""
    first = value.split(",")[0].strip()
    for prefix in _KAFKA_PREFIXED:
        if first.upper().startswith(prefix):
            first = first[len(prefix):]
    host, sep, port = first.rpartition(":")
    if not sep or not port.isdigit():
        raise SettingsError(f"{what} must be HOST:PORT, got {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def metrics(r: Resolved) -> tuple[str, int] | None:
    """quire.metrics as (host, port); None when off."""
    try:
        return metrics_address(r.get_value("quire.metrics"))
    except ValueError as e:
        raise SettingsError(f"quire.metrics (--metrics) {e}") from None


def replication(value: str) -> tuple[int, int, int]:
    try:
        e, wq, aq = (int(x) for x in value.split("/"))
    except ValueError:
        raise SettingsError(f"quire.replication must be E/WQ/AQ, got {value!r}") from None
    return e, wq, aq


def _text(value: Any) -> str | None:
    return None if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def described(resolved: Resolved, role: str, overrides: Mapping[str, Any] | None = None) -> tuple[BrokerSetting, ...]:
    """The broker configs DescribeConfigs reports: values, types, help and Kafka's sources
    (DEFAULT_CONFIG for a default, STATIC_BROKER_CONFIG for file, environment and flags, as
    Kafka reports its server.properties and --override values)."""
    out = []
    overrides = overrides or {}
    for s in for_role(role):
        if not s.described or s.key not in resolved:
            continue
        v = resolved[s.key]
        source = ConfigSource.DEFAULT_CONFIG if v.source == "default" else ConfigSource.STATIC_BROKER_CONFIG
        out.append(BrokerSetting(s.key, _text(overrides.get(s.key, v.value)), source, s.describe_type(), s.help,
                                 _text(s.default_for(role))))
    return tuple(out)


def table_markdown(roles: Sequence[str] = (GATEWAY, BOOKIE, STANDALONE, RECOVERY)) -> str:
    """The README's settings table (tests check the README matches it)."""
    rows = ["| key | env | flag | default | roles | meaning |", "|---|---|---|---|---|---|"]
    for s in SETTINGS:
        defaults = {r: s.default_for(r) for r in roles if r in s.roles}
        shown = {("-" if d is None else str(d).lower() if isinstance(d, bool) else str(d)) for d in defaults.values()}
        default = " / ".join(f"{r}: {'-' if d is None else d}" for r, d in defaults.items()) if len(shown) > 1 \
            else next(iter(shown))
        flag = s.flag_name if s.type is not bool else f"{s.flag_name} / --no-{s.flag_name[2:]}"
        flag += "".join(f"`, `{a}" for a in s.flag_aliases)
        aliases = "".join(f", `{a}`" for a in s.aliases)
        envs = "".join(f", `{e}`" for e in s.env_aliases)
        rows.append(f"| `{s.key}`{aliases} | `{s.env}`{envs} | `{flag}` | {default} | "
                    f"{', '.join(r for r in roles if r in s.roles)} | {s.help} |")
    return "\n".join(rows)
