"""Kafka's topic configs: names, types, defaults, validation and broker synonyms (Kafka 4.x).

`APPLIED` configs change how Quire stores a partition; the rest are accepted, stored and
described like Kafka does but do not change behaviour yet (listed in NOT_APPLIED).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from kafka_wire.errors import ErrorCode

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647


class ConfigType(IntEnum):
    """DescribeConfigs' config_type (Kafka's ConfigEntry.ConfigType ids)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    UNKNOWN = 0
    TOPIC_CONFIG = 1  # DYNAMIC_TOPIC_CONFIG
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8


class ConfigError(ValueError):
    """An invalid config name or value; maps to INVALID_CONFIG."""

    error_code = ErrorCode.INVALID_CONFIG


Validator = Callable[[object], str | None]  # parsed value -> reason it is invalid, or None


def at_least(lo: float) -> Validator:
    return lambda v: None if isinstance(v, int | float) and v >= lo else f"Value must be at least {lo}"


def between(lo: float, hi: float) -> Validator:
    return lambda v: None if isinstance(v, int | float) and lo <= v <= hi else f"Value must be in [{lo}, {hi}]"


def one_of(*allowed: str) -> Validator:
    def check(v: object) -> str | None:
        items = v if isinstance(v, list) else [v]
        bad = [x for x in items if x not in allowed]
        return f"String must be one of: {', '.join(allowed)}" if bad else None

    return check


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: str
    broker_synonym: str | None
    doc: str
    validator: Validator | None = None
    applied: bool = False  # changes Quire's behaviour (vs accepted and stored only)


def _d(name: str, t: ConfigType, default: str, broker: str | None, doc: str,
       validator: Validator | None = None, applied: bool = False) -> ConfigDef:
    return ConfigDef(name, t, default, broker, doc, validator, applied)


L, INT, S, B, D, LST = (ConfigType.LONG, ConfigType.INT, ConfigType.STRING, ConfigType.BOOLEAN,
                      ConfigType.DOUBLE, ConfigType.LIST)
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

TOPIC_CONFIGS: dict[str, ConfigDef] = {c.name: c for c in (
    _d("cleanup.policy", LST, "delete", "log.cleanup.policy",
       "delete (retention by time and size), compact (a cleaner keeps the latest record per key) or both.",
       one_of("compact", "delete"), applied=True),
    _d("compression.type", S, "producer", "compression.type",
       "Final compression of the topic; Quire stores batches as produced.", one_of(*_COMPRESSION)),
    _d("compression.gzip.level", INT, "-1", "compression.gzip.level", "gzip level (stored only).",
       lambda v: None if v == -1 or (isinstance(v, int) and 1 <= v <= 9) else "Value must be -1 or in [1, 9]"),
    _d("compression.lz4.level", INT, "9", "compression.lz4.level", "lz4 level (stored only).", between(1, 17)),
    _d("compression.zstd.level", INT, "3", "compression.zstd.level", "zstd level (stored only).", between(-131072, 22)),
    _d("delete.retention.ms", L, "86400000", "log.cleaner.delete.retention.ms",
       "How long a compacted topic keeps tombstones (null values) once cleaned.", at_least(0), applied=True),
    _d("errors.deadletterqueue.group.enable", B, "false", None,
       "Whether share groups may use this topic as a dead-letter queue (stored only)."),
    _d("file.delete.delay.ms", L, "60000", "log.segment.delete.delay.ms", "Stored only.", at_least(0)),
    _d("flush.messages", L, str(LONG_MAX), "log.flush.interval.messages",
       "Stored only: every acknowledged batch is already fsynced on the bookies.", at_least(1)),
    _d("flush.ms", L, str(LONG_MAX), "log.flush.interval.ms", "Stored only.", at_least(0)),
    _d("follower.replication.throttled.replicas", LST, "", "follower.replication.throttled.replicas",
       "Stored only."),
    _d("index.interval.bytes", INT, "4096", "log.index.interval.bytes", "Stored only.", at_least(0)),
    _d("leader.replication.throttled.replicas", LST, "", "leader.replication.throttled.replicas", "Stored only."),
    _d("local.retention.bytes", L, "-2", "log.local.retention.bytes",
       "With remote.storage.enable: bytes of closed ledgers kept on bookies only; older ones are "
       "offloaded (-2: retention.bytes, -1: no size rule).", at_least(-2), applied=True),
    _d("local.retention.ms", L, "-2", "log.local.retention.ms",
       "With remote.storage.enable: ledgers older than this are offloaded (-2: retention.ms, "
       "-1: no age rule).", at_least(-2), applied=True),
    _d("max.compaction.lag.ms", L, str(LONG_MAX), "log.cleaner.max.compaction.lag.ms",
       "A ledger older than this is cleaned whatever the dirty ratio.", at_least(1), applied=True),
    _d("max.message.bytes", INT, "1048588", "message.max.bytes",
       "The largest record batch size allowed.", at_least(0), applied=True),
    _d("max.decompressed.message.bytes", INT, "2147483639", "max.decompressed.message.bytes",
       "Largest decompressed record (stored only: batches are stored as produced).", between(1, 2147483639)),
    _d("message.timestamp.after.max.ms", L, "3600000", "log.message.timestamp.after.max.ms",
       "Stored only.", at_least(0)),
    _d("message.timestamp.before.max.ms", L, str(LONG_MAX), "log.message.timestamp.before.max.ms",
       "Stored only.", at_least(0)),
    _d("message.timestamp.type", S, "CreateTime", "log.message.timestamp.type",
       "CreateTime or LogAppendTime.", one_of("CreateTime", "LogAppendTime"), applied=True),
    _d("min.cleanable.dirty.ratio", D, "0.5", "log.cleaner.min.cleanable.ratio",
       "Clean once this fraction of the cleanable log is not yet cleaned.", between(0, 1), applied=True),
    _d("min.compaction.lag.ms", L, "0", "log.cleaner.min.compaction.lag.ms",
       "Records younger than this are never cleaned.", at_least(0), applied=True),
    _d("min.insync.replicas", INT, "1", "min.insync.replicas",
       "Raises the ledgers' ack quorum (up to the write quorum).", at_least(1), applied=True),
    _d("preallocate", B, "false", "log.preallocate", "Stored only."),
    _d("remote.storage.enable", B, "false", None,
       "Offload closed ledgers to the gateway's offload tier (quire.offload.*) by local.retention.*; "
       "retention.* still bounds the whole log.", applied=True),
    _d("remote.log.copy.disable", B, "false", None, "Stored only."),
    _d("remote.log.delete.on.disable", B, "false", None, "Stored only."),
    _d("remote.copy.lag.bytes", L, "-1", "log.remote.copy.lag.bytes", "Stored only.", at_least(-1)),
    _d("remote.copy.lag.ms", L, "0", "log.remote.copy.lag.ms", "Stored only.", at_least(-1)),
    _d("retention.bytes", L, "-1", "log.retention.bytes",
       "Maximum partition size before old ledgers are deleted (-1: no limit).", applied=True),
    _d("retention.ms", L, "604800000", "log.retention.ms",
       "Age after which old ledgers are deleted (-1: forever).", at_least(-1), applied=True),
    _d("segment.bytes", INT, "1073741824", "log.segment.bytes",
       "Ledger rollover size.", at_least(1024 * 1024), applied=True),
    _d("segment.index.bytes", INT, "10485760", "log.index.size.max.bytes", "Stored only.", at_least(4)),
    _d("segment.jitter.ms", L, "0", "log.roll.jitter.ms", "Stored only.", at_least(0)),
    _d("segment.ms", L, "604800000", "log.roll.ms", "Ledger rollover age.", at_least(1), applied=True),
    _d("unclean.leader.election.enable", B, "false", "unclean.leader.election.enable", "Stored only."),
    # Quire's own: delayed delivery for share groups (gateway/delayed_delivery.py)
    _d("quire.delayed.delivery.enable", B, "false", None,
       "Share groups deliver no record before the epoch-ms time of its quire.deliver.at header.", applied=True),
    _d("quire.delivery.delay.ms", L, "0", None,
       "Share groups deliver no record before its timestamp plus this delay.", at_least(0), applied=True),
)}

APPLIED = frozenset(n for n, c in TOPIC_CONFIGS.items() if c.applied)
NOT_APPLIED = frozenset(TOPIC_CONFIGS) - APPLIED
TOPIC_DEFAULTS: dict[str, str] = {n: c.default for n, c in TOPIC_CONFIGS.items()}
# This process's broker-level defaults (server.properties `log.retention.ms`...), by topic config
# name. Process-wide because one gateway process has one configuration and topic lookups happen
# far from it; set once at start (set_broker_defaults).
BROKER_DEFAULTS: dict[str, str] = {}


def set_broker_defaults(defaults: Mapping[str, str]) -> None:
    for name, raw in defaults.items():
        validate_value(name, raw)
    BROKER_DEFAULTS.clear()
    BROKER_DEFAULTS.update(defaults)


def default_of(name: str) -> str:
    """A topic config's value when the topic has no override: the broker's, else Kafka's."""
    return BROKER_DEFAULTS.get(name, TOPIC_CONFIGS[name].default)


def parse(defn: ConfigDef, raw: str) -> object:
    """The typed value of `raw`, or ConfigError (Kafka's ConfigDef.parseType messages)."""
    s = raw.strip()
    t = defn.type
    try:
        if t in (ConfigType.LONG, ConfigType.INT, ConfigType.SHORT):
            v = int(s)
            bound = LONG_MAX if t == ConfigType.LONG else INT_MAX
            if not -bound - 1 <= v <= bound:
                raise ValueError
            return v
        if t == ConfigType.DOUBLE:
            return float(s)
    except ValueError:
        kind = {ConfigType.LONG: "long", ConfigType.INT: "int", ConfigType.DOUBLE: "double"}.get(t, "number")
        raise ConfigError(f"Invalid value {raw} for configuration {defn.name}: Not a number of type "
                          f"{kind.upper()}") from None
    if t == ConfigType.BOOLEAN:
        if s.lower() not in ("true", "false"):
            raise ConfigError(f"Invalid value {raw} for configuration {defn.name}: Expected value to be "
                              "either true or false")
        return s.lower() == "true"
    if t == ConfigType.LIST:
        return [x.strip() for x in s.split(",") if x.strip()] if s else []
    return s


def validate_value(name: str, raw: str | None) -> str:
    """Check one topic config; returns the value to store. ConfigError if invalid."""
    defn = TOPIC_CONFIGS.get(name)
    if defn is None:
        raise ConfigError(f"Unknown topic config name: {name}")
    if raw is None:
        raise ConfigError(f"Null value not supported for topic configs: {name}")
    value = parse(defn, raw)
    if defn.validator is not None:
        reason = defn.validator(value)
        if reason:
            raise ConfigError(f"Invalid value {raw} for configuration {name}: {reason}")
    if name == "cleanup.policy" and not value:
        raise ConfigError("Invalid value for configuration cleanup.policy: must not be empty")
    return raw.strip() if defn.type != ConfigType.STRING else raw


def validate_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Validate a whole set of topic overrides; returns them normalised. ConfigError if any is bad."""
    out = {name: validate_value(name, raw) for name, raw in configs.items()}
    # Kafka's LogConfig.validateNoRemoteStorageForCompactedTopic
    if (effective(out, "remote.storage.enable").strip().lower() == "true"
            and "compact" in effective(out, "cleanup.policy").lower()):
        raise ConfigError("Remote log storage is unsupported for the compacted topics")
    return out


def effective(configs: Mapping[str, str], name: str) -> str:
    """The effective value of a topic config: its override, else Kafka's default."""
    v = configs.get(name)
    if v is not None:
        return v
    if name not in TOPIC_CONFIGS:
        raise KeyError(f"unknown topic config {name!r}")
    return default_of(name)
