"""Dynamic group configs (the GROUP config resource, KIP-848/KIP-932): kept in one metadata node
per group (`/kafka/group-configs/<group>`, JSON {name: value}), read by DescribeConfigs and by the
share-partitions of the group when they open."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from coordinator.share.config import (
    AUTO_OFFSET_RESET_EARLIEST,
    AUTO_OFFSET_RESET_LATEST,
    BY_DURATION,
    MODE_KEY_SHARED,
    MODE_SHARED,
    by_duration_ms,
)
from gateway.topics.configs import ConfigSource, ConfigType
from gateway.topics.describe import ConfigEntry
from store.meta.api import BadVersionError, NodeExistsError, NoNodeError

if TYPE_CHECKING:
    from coordinator.group.config import GroupConfig
    from coordinator.share.config import ShareConfig
    from store.meta.api import MetaStore

GROUP_CONFIGS_PATH = "/kafka/group-configs"
DLQ_TOPIC = "errors.deadletterqueue.topic.name"  # KIP-1191, as Kafka 4.4 names them
DLQ_COPY_RECORD = "errors.deadletterqueue.copy.record.enable"
BACKOFF_MIN = "quire.share.redelivery.backoff.min.ms"
BACKOFF_MAX = "quire.share.redelivery.backoff.max.ms"
BACKOFF_MULTIPLIER = "quire.share.redelivery.backoff.multiplier"
SHARE_MODE = "quire.share.mode"
AUTO_OFFSET_RESET = "share.auto.offset.reset"
RENEW_ACK = "share.renew.acknowledge.enable"  # KIP-1222 (Kafka 4.4)


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    type: ConfigType
    default: str
    doc: str
    choices: tuple[str, ...] = ()
    min: int | None = None  # Kafka's ConfigDef bound (the broker's limits come on top: limits())
    fmin: float | None = None  # DOUBLE configs' lower bound


# Kafka 4.4's GroupConfig names and defaults (the broker-level limits are Kafka's too).
GROUP_CONFIG_DEFS: dict[str, GroupConfigDef] = {d.name: d for d in (
    GroupConfigDef("consumer.heartbeat.interval.ms", ConfigType.INT, "5000",
                   "The heartbeat interval given to the members of a consumer group.", min=1),
    GroupConfigDef("consumer.session.timeout.ms", ConfigType.INT, "45000",
                   "The timeout to detect client failures when using the consumer group protocol.", min=1),
    GroupConfigDef(DLQ_COPY_RECORD, ConfigType.BOOLEAN, "false",
                   "When writing onto the dead-letter queue topic, whether to copy the original record onto the "
                   "DLQ topic, or just write a record containing the context information headers.",
                   choices=("true", "false")),
    GroupConfigDef(DLQ_TOPIC, ConfigType.STRING, "",
                   "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. "
                   "If blank (the default), the group does not have a DLQ topic."),
    GroupConfigDef(AUTO_OFFSET_RESET, ConfigType.STRING, "latest",
                   "The strategy to initialize the share-partition start offset: earliest, latest or "
                   "by_duration:<duration> (ISO 8601, PnDTnHnMn.nS; the first record at most that old)."),
    GroupConfigDef("share.delivery.count.limit", ConfigType.INT, "5",
                   "The maximum number of delivery attempts for a record delivered to a share group.", min=2),
    GroupConfigDef("share.heartbeat.interval.ms", ConfigType.INT, "5000",
                   "The heartbeat interval given to the members of a share group.", min=1),
    GroupConfigDef("share.isolation.level", ConfigType.STRING, "read_uncommitted",
                   "Controls how to read records written transactionally.",
                   choices=("read_uncommitted", "read_committed")),
    GroupConfigDef("share.partition.max.record.locks", ConfigType.INT, "2000",
                   "Share-group record lock limit per share-partition.", min=100),
    GroupConfigDef("share.record.lock.duration.ms", ConfigType.INT, "30000",
                   "The record acquisition lock duration in milliseconds for share groups.", min=1000),
    GroupConfigDef(RENEW_ACK, ConfigType.BOOLEAN, "true",
                   "Whether the renew acknowledge type is enabled for the share group.", choices=("true", "false")),
    GroupConfigDef("share.session.timeout.ms", ConfigType.INT, "45000",
                   "The timeout to detect client failures when using the share group protocol.", min=1),
    # Quire's own (Pulsar's negative-ack backoff), defaulting to the broker settings of the name.
    GroupConfigDef(BACKOFF_MIN, ConfigType.INT, "0",
                   "Wait before a released or lock-expired record is redelivered, after its first "
                   "delivery; 0 redelivers at once.", min=0),
    GroupConfigDef(BACKOFF_MAX, ConfigType.INT, "60000",
                   "The longest redelivery backoff.", min=0),
    GroupConfigDef(BACKOFF_MULTIPLIER, ConfigType.DOUBLE, "2.0",
                   "Factor the redelivery backoff grows by with each further delivery.", fmin=1.0),
    # Pulsar's Key_Shared subscription for share groups.
    GroupConfigDef(SHARE_MODE, ConfigType.STRING, MODE_SHARED,
                   "shared: records go to any member; key_shared: while a member holds records of a key, no "
                   "other member gets records of that key, and records of one key are delivered in offset order.",
                   choices=(MODE_SHARED, MODE_KEY_SHARED)),
)}


def path_of(group_id: str) -> str:
    return f"{GROUP_CONFIGS_PATH}/{group_id.encode().hex()}"


async def read_group_configs(meta: MetaStore, group_id: str) -> tuple[dict[str, str], int]:
    """(overrides, node version or -1)."""
    try:
        data, stat = await meta.get(path_of(group_id))
    except NoNodeError:
        return {}, -1
    return {str(k): str(v) for k, v in json.loads(data or b"{}").items()}, stat.version


async def write_group_configs(meta: MetaStore, group_id: str, configs: dict[str, str], version: int) -> None:
    """Replace the overrides (compare-and-set on `version`; BadVersionError if it moved)."""
    data = json.dumps(configs, sort_keys=True).encode()
    path = path_of(group_id)
    if version < 0:
        try:
            await meta.create(path, data, make_parents=True)
        except NodeExistsError:
            raise BadVersionError(path) from None
    else:
        await meta.set(path, data, version)


async def group_config_value(meta: MetaStore, group_id: str, name: str) -> str | None:
    """The group's override of `name`, None if not set."""
    configs, _ = await read_group_configs(meta, group_id)
    return configs.get(name)


def limits(share: ShareConfig, group: GroupConfig) -> dict[str, tuple[int, int]]:
    """The broker's bounds of group configs (Kafka's GroupConfig.validateValues): the
    group.consumer.min/max.* and group.share.min/max.* settings."""
    return {
        "consumer.session.timeout.ms": (group.consumer_min_session_timeout_ms, group.consumer_max_session_timeout_ms),
        "consumer.heartbeat.interval.ms": (group.consumer_min_heartbeat_interval_ms,
                                           group.consumer_max_heartbeat_interval_ms),
        "share.heartbeat.interval.ms": (share.min_heartbeat_interval_ms, share.max_heartbeat_interval_ms),
        "share.session.timeout.ms": (share.min_session_timeout_ms, share.max_session_timeout_ms),
        "share.record.lock.duration.ms": (share.min_record_lock_duration_ms, share.max_record_lock_duration_ms),
        "share.delivery.count.limit": (share.min_delivery_count_limit, share.max_delivery_count_limit),
        "share.partition.max.record.locks": (share.min_partition_max_record_locks,
                                             share.max_partition_max_record_locks),
    }


def validate(name: str, value: str, bounds: Mapping[str, tuple[int, int]]) -> str | None:
    """Why `value` is not acceptable for `name` (Kafka's wording), else None; `bounds`: limits()."""
    d = GROUP_CONFIG_DEFS.get(name)
    if d is None:
        return f"Unknown group config name: {name}"
    if name == DLQ_TOPIC and value.startswith("__"):
        return f"{name}: DLQ topic name must not start with '__'"
    if name == AUTO_OFFSET_RESET:
        try:
            if by_duration_ms(value) is not None:
                return None
        except ValueError as e:
            return f"Invalid value {value} for configuration {name}: {e}"
        if value.lower() not in (AUTO_OFFSET_RESET_EARLIEST, AUTO_OFFSET_RESET_LATEST):
            return (f"Invalid value {value} for configuration {name}: String must be one of: "
                    f"{AUTO_OFFSET_RESET_LATEST}, {AUTO_OFFSET_RESET_EARLIEST}, {BY_DURATION}<duration>")
    if d.choices and value.lower() not in d.choices:
        return f"Invalid value {value} for configuration {name}: String must be one of: {', '.join(d.choices)}"
    if d.type == ConfigType.INT:
        try:
            n = int(value)
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type INT"
        if d.min is not None and n < d.min:
            return f"Invalid value {value} for configuration {name}: Value must be at least {d.min}"
        lo, hi = bounds.get(name, (n, n))
        if not lo <= n <= hi:
            return f"{name} must be in the range {lo} to {hi} inclusive."
    if d.type == ConfigType.DOUBLE:
        try:
            x = float(value)
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type DOUBLE"
        if d.fmin is not None and not x >= d.fmin:
            return f"Invalid value {value} for configuration {name}: Value must be at least {d.fmin}"
    return None


def _default(share: ShareConfig, d: GroupConfigDef) -> str:
    """A group config's default: the broker setting it defaults to, where there is one."""
    broker = {
        "share.record.lock.duration.ms": share.record_lock_duration_ms,
        "share.session.timeout.ms": share.session_timeout_ms,
        "share.heartbeat.interval.ms": share.heartbeat_interval_ms,
        "share.delivery.count.limit": share.delivery_count_limit,
        "share.partition.max.record.locks": share.partition_max_record_locks,
        BACKOFF_MIN: share.redelivery_backoff_min_ms,
        BACKOFF_MAX: share.redelivery_backoff_max_ms,
        BACKOFF_MULTIPLIER: share.redelivery_backoff_multiplier,
    }
    return str(broker.get(d.name, d.default))


async def group_entries(meta: MetaStore, share: ShareConfig, group_id: str) -> list[ConfigEntry]:
    """DescribeConfigs of the GROUP resource: every group config, the group's value or the default
    (`share`: the broker's group.share.* settings some of them default to)."""
    overrides, _ = await read_group_configs(meta, group_id)
    out = []
    for name in sorted(GROUP_CONFIG_DEFS):
        d = GROUP_CONFIG_DEFS[name]
        if name in overrides:
            value, source = overrides[name], ConfigSource.DYNAMIC_GROUP_CONFIG
        else:
            value, source = _default(share, d), ConfigSource.DEFAULT_CONFIG
        out.append(ConfigEntry(name, value, source, False, d.type, d.doc, ()))
    return out
