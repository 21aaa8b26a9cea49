"""Dynamic group configs (the GROUP config resource, KIP-848/KIP-932): kept in one metadata node
per group (`/kafka/group-configs/<group>`, JSON {name: value}), read by DescribeConfigs; heartbeats
and share-partitions read them through the watched GroupConfigCache."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from coordinator.group.config import GroupConfig
from coordinator.share.config import (
    AUTO_OFFSET_RESET_EARLIEST,
    AUTO_OFFSET_RESET_LATEST,
    BY_DURATION,
    MODE_KEY_SHARED,
    MODE_SHARED,
    ShareConfig,
    by_duration_ms,
)
from gateway.topics.configs import ConfigSource, ConfigType
from gateway.topics.describe import ConfigEntry, Synonym
from store.meta.api import BadVersionError, NodeExistsError, NoNodeError

if TYPE_CHECKING:
    from gateway.config import BrokerSetting
    from store.meta.api import MetaStore, WatchEvent

log = logging.getLogger(__name__)

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
    default: str | None
    doc: str
    choices: tuple[str, ...] = ()  # Kafka's ValidString (case-sensitive; Quire's own: any case)
    min: float | None = None  # Kafka's ConfigDef lower bound (the broker's limits come on top: limits())
    broker: str | None = None  # Kafka's broker synonym (GroupConfig.ALL_GROUP_CONFIG_SYNONYMS), the default
    field: tuple[str, str] | None = None  # ("group" | "share", attribute) holding the broker's value
    internal: bool = False  # Kafka's defineInternal: described only when set (here or by its broker synonym)


def _d(name: str, type_: ConfigType, default: str | None, doc: str, broker: str | None = None, *,
       min: float | None = None, choices: tuple[str, ...] = (), internal: bool = False) -> GroupConfigDef:
    """A group config; its default is the broker setting `broker` (a group.* or quire.share.* setting,
    held in GroupConfig or ShareConfig under its name less the prefix) where it has one."""
    field = None
    for prefix, holder in (("group.share.", "share"), ("group.", "group"), ("quire.share.", "share")):
        if broker is not None and broker.startswith(prefix):
            field = (holder, broker.removeprefix(prefix).replace(".", "_"))
            break
    return GroupConfigDef(name, type_, default, doc, choices, min, broker, field, internal)


_NO_EFFECT = " (accepted, stored and reported; no effect in Quire: {})"
_NO_THREAD = _NO_EFFECT.format("it has no assignor threads")
_NO_STREAMS = _NO_EFFECT.format("it serves no streams groups")
STREAMS_TAGS = "streams.rack.aware.assignment.tags"
STREAMS_ASSIGNOR = "streams.assignor.name"
_T = ConfigType
_BOOL = ("true", "false")

# Kafka 4.4's GroupConfig, in its definition order (the order its checks run in), with its
# names, types, defaults, bounds and broker synonyms; then Quire's own.
GROUP_CONFIG_DEFS: dict[str, GroupConfigDef] = {d.name: d for d in (
    _d("consumer.session.timeout.ms", _T.INT, "45000",
       "The timeout to detect client failures when using the consumer group protocol.",
       "group.consumer.session.timeout.ms", min=1),
    _d("consumer.heartbeat.interval.ms", _T.INT, "5000", "The heartbeat interval given to the members of a "
       "consumer group.", "group.consumer.heartbeat.interval.ms", min=1),
    _d("consumer.assignment.interval.ms", _T.INT, "1000", "The interval between assignment updates for a "
       "consumer group.", "group.consumer.assignment.interval.ms", min=0),
    _d("consumer.assignor.offload.enable", _T.BOOLEAN, "true", "Whether to offload consumer group assignment to "
       "a group coordinator background thread." + _NO_THREAD, "group.consumer.assignor.offload.enable", internal=True),
    _d("share.session.timeout.ms", _T.INT, "45000", "The timeout to detect client failures when using the share "
       "group protocol.", "group.share.session.timeout.ms", min=1),
    _d("share.heartbeat.interval.ms", _T.INT, "5000", "The heartbeat interval given to the members of a share "
       "group.", "group.share.heartbeat.interval.ms", min=1),
    _d("share.record.lock.duration.ms", _T.INT, "30000", "The record acquisition lock duration in milliseconds "
       "for share groups.", "group.share.record.lock.duration.ms", min=1000),
    _d("share.delivery.count.limit", _T.INT, "5", "The maximum number of delivery attempts for a record "
       "delivered to a share group.", "group.share.delivery.count.limit", min=2),
    _d("share.partition.max.record.locks", _T.INT, "2000", "Share-group record lock limit per share-partition.",
       "group.share.partition.max.record.locks", min=100),
    _d(AUTO_OFFSET_RESET, _T.STRING, "latest", "The strategy to initialize the share-partition start offset: "
       "earliest, latest or by_duration:<duration> (ISO 8601, PnDTnHnMn.nS; the first record at most that old)."),
    _d("share.isolation.level", _T.STRING, "read_uncommitted", "Controls how to read records written "
       "transactionally.", choices=("read_committed", "read_uncommitted")),
    _d(RENEW_ACK, _T.BOOLEAN, "true", "Whether the renew acknowledge type is enabled for the share group."),
    _d("share.assignment.interval.ms", _T.INT, "1000", "The interval between assignment updates for a share "
       "group." + _NO_EFFECT.format("a share group is assigned on the heartbeat that changes it"),
       "group.share.assignment.interval.ms", min=0),
    _d("share.assignor.offload.enable", _T.BOOLEAN, "true", "Whether to offload share group assignment to a "
       "group coordinator background thread." + _NO_THREAD, "group.share.assignor.offload.enable",
       internal=True),
    _d("streams.session.timeout.ms", _T.INT, "45000", "The timeout to detect client failures when using the "
       "streams group protocol." + _NO_STREAMS, "group.streams.session.timeout.ms", min=1),
    _d("streams.heartbeat.interval.ms", _T.INT, "5000", "The heartbeat interval given to the members."
       + _NO_STREAMS, "group.streams.heartbeat.interval.ms", min=1),
    _d("streams.num.standby.replicas", _T.INT, "0", "The number of standby replicas for each task." + _NO_STREAMS,
       "group.streams.num.standby.replicas", min=0),
    _d("streams.initial.rebalance.delay.ms", _T.INT, "3000", "The amount of time the group coordinator will wait "
       "for more streams clients to join a new group before performing the first rebalance." + _NO_STREAMS,
       "group.streams.initial.rebalance.delay.ms", min=0),
    _d("streams.assignment.interval.ms", _T.INT, "1000", "The interval between assignment updates for a streams "
       "group." + _NO_STREAMS, "group.streams.assignment.interval.ms", min=0),
    _d("streams.assignor.offload.enable", _T.BOOLEAN, "true", "Whether to offload streams group assignment to a "
       "group coordinator background thread." + _NO_STREAMS, "group.streams.assignor.offload.enable",
       internal=True),
    _d("streams.task.offset.interval.ms", _T.INT, "60000", "The interval in which the warmup task changelog "
       "offsets on a client are updated on the broker." + _NO_STREAMS, "group.streams.task.offset.interval.ms",
       min=1, internal=True),
    _d("streams.num.warmup.replicas", _T.INT, "2", "The maximum number of warmup task replicas." + _NO_STREAMS,
       "group.streams.num.warmup.replicas", min=0, internal=True),
    _d(STREAMS_TAGS, _T.LIST, "", "List of client tag keys used to distribute standby replicas across Kafka "
       "Streams instances." + _NO_STREAMS, "group.streams.rack.aware.assignment.tags"),
    _d("streams.acceptable.recovery.lag", _T.LONG, "10000", "The maximum acceptable lag (number of offsets to "
       "catch up) for a client to be considered caught-up enough to receive an active task assignment."
       + _NO_STREAMS, "group.streams.acceptable.recovery.lag", min=0, internal=True),
    _d(STREAMS_ASSIGNOR, _T.STRING, None, "The task assignor to use for this streams group, selected by short "
       "name from the assignors registered via the broker configuration group.streams.assignors." + _NO_STREAMS,
       "group.streams.assignors"),
    _d(DLQ_TOPIC, _T.STRING, "", "The name of the topic to be used as the dead-letter queue (DLQ) topic for this "
       "share group. If blank (the default), the group does not have a DLQ topic."),
    _d(DLQ_COPY_RECORD, _T.BOOLEAN, "false", "When writing onto the dead-letter queue topic, whether to copy the "
       "original record onto the DLQ topic, or just write a record containing the context information headers."),
    # Quire's own (Pulsar's negative-ack backoff), defaulting to the broker settings of the name.
    _d(BACKOFF_MIN, _T.INT, "0", "Wait before a released or lock-expired record is redelivered, after its first "
       "delivery; 0 redelivers at once.", BACKOFF_MIN, min=0),
    _d(BACKOFF_MAX, _T.INT, "60000", "The longest redelivery backoff.", BACKOFF_MAX, min=0),
    _d(BACKOFF_MULTIPLIER, _T.DOUBLE, "2.0", "Factor the redelivery backoff grows by with each further delivery.",
       BACKOFF_MULTIPLIER, min=1.0),
    # Pulsar's Key_Shared subscription for share groups.
    _d(SHARE_MODE, _T.STRING, MODE_SHARED, "shared: records go to any member; key_shared: while a member holds "
       "records of a key, no other member gets records of that key, and records of one key are delivered in "
       "offset order.", choices=(MODE_SHARED, MODE_KEY_SHARED)),
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


Bound = tuple[int | None, int | None]  # (least, most); None: no limit on that side


def limits(share: ShareConfig, group: GroupConfig) -> dict[str, Bound]:
    """The broker's bounds of group configs, in the order Kafka 4.4's GroupConfig.validateValues
    checks them: the group.{consumer,share,streams}.min/max.* settings."""
    g = group
    return {
        "consumer.heartbeat.interval.ms": (g.consumer_min_heartbeat_interval_ms, g.consumer_max_heartbeat_interval_ms),
        "consumer.session.timeout.ms": (g.consumer_min_session_timeout_ms, g.consumer_max_session_timeout_ms),
        "consumer.assignment.interval.ms": (g.consumer_min_assignment_interval_ms,
                                            g.consumer_max_assignment_interval_ms),
        "share.heartbeat.interval.ms": (share.min_heartbeat_interval_ms, share.max_heartbeat_interval_ms),
        "share.session.timeout.ms": (share.min_session_timeout_ms, share.max_session_timeout_ms),
        "share.record.lock.duration.ms": (share.min_record_lock_duration_ms, share.max_record_lock_duration_ms),
        "share.delivery.count.limit": (share.min_delivery_count_limit, share.max_delivery_count_limit),
        "share.partition.max.record.locks": (share.min_partition_max_record_locks,
                                             share.max_partition_max_record_locks),
        "share.assignment.interval.ms": (share.min_assignment_interval_ms, share.max_assignment_interval_ms),
        "streams.heartbeat.interval.ms": (g.streams_min_heartbeat_interval_ms, g.streams_max_heartbeat_interval_ms),
        "streams.session.timeout.ms": (g.streams_min_session_timeout_ms, g.streams_max_session_timeout_ms),
        "streams.num.standby.replicas": (None, g.streams_max_standby_replicas),
        "streams.assignment.interval.ms": (g.streams_min_assignment_interval_ms, g.streams_max_assignment_interval_ms),
        "streams.task.offset.interval.ms": (g.streams_min_task_offset_interval_ms, None),
        "streams.num.warmup.replicas": (None, g.streams_max_warmup_replicas),
    }


def _list(value: str) -> list[str]:
    return [x.strip() for x in value.split(",") if x.strip()]


_INTEGER = re.compile(r"[+-]?[0-9]+")
_RANGES = {ConfigType.INT: (-2**31, 2**31 - 1), ConfigType.LONG: (-2**63, 2**63 - 1)}


def _parse(d: GroupConfigDef, value: str) -> tuple[object, str | None]:
    """Kafka's ConfigDef.parse of one value: (parsed, None) or (None, Kafka's message)."""
    bad = f"Invalid value {value} for configuration {d.name}: "
    text = value.strip()
    if d.type in _RANGES:
        lo, hi = _RANGES[d.type]
        if not _INTEGER.fullmatch(text) or not lo <= int(text) <= hi:
            return None, bad + f"Not a number of type {d.type.name}"
        n = int(text)
        if d.min is not None and n < d.min:
            return None, f"Invalid value {n} for configuration {d.name}: Value must be at least {int(d.min)}"
        return n, None
    if d.type == ConfigType.DOUBLE:
        try:
            x = float(text)
        except ValueError:
            return None, bad + "Not a number of type DOUBLE"
        if d.min is not None and not x >= d.min:
            return None, bad + f"Value must be at least {d.min}"
        return x, None
    if d.type == ConfigType.BOOLEAN:
        if text.lower() not in _BOOL:
            return None, bad + "Expected value to be either true or false"
        return text.lower() == "true", None
    if d.type == ConfigType.LIST:
        return _list(value), None
    if d.name == AUTO_OFFSET_RESET:
        ok = text in (AUTO_OFFSET_RESET_EARLIEST, AUTO_OFFSET_RESET_LATEST)
        if not ok and text.startswith(BY_DURATION):
            try:
                ok = by_duration_ms(text) is not None
            except ValueError:
                ok = False
        if not ok:  # ShareGroupAutoOffsetResetStrategy's validator (Kafka 4.4), one message for all
            return None, bad + (f"Invalid value `{value}` for configuration {d.name}. The value must be either "
                                "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")
        return text, None
    given = value.lower() if d.name.startswith("quire.") else value
    if d.choices and given not in d.choices:
        return None, bad + f"String must be one of: {', '.join(d.choices)}"
    return value, None


def validate(configs: Mapping[str, str], share: ShareConfig, group: GroupConfig) -> str | None:
    """Why a group's configs (all of them, as they would be stored) are not acceptable, in Kafka
    4.4's words and order (GroupConfig.validate), else None."""
    for name in configs:
        if name not in GROUP_CONFIG_DEFS:
            return f"Unknown group config name: {name}"
    if STREAMS_TAGS in configs:
        tags = _list(configs[STREAMS_TAGS])
        if len(set(tags)) != len(tags):
            return f"{STREAMS_TAGS} must not contain duplicate tag keys."
    parsed: dict[str, object] = {}
    for name, d in GROUP_CONFIG_DEFS.items():
        if name in configs:
            parsed[name], reason = _parse(d, configs[name])
            if reason is not None:
                return reason
    for name, (lo, hi) in limits(share, group).items():
        n = parsed.get(name)
        if not isinstance(n, int):
            continue
        if lo is not None and hi is not None and not lo <= n <= hi:
            return f"{name} must be in the range {lo} to {hi} inclusive."
        if hi is not None and n > hi:
            return f"{name} must be less than or equal to {hi}"
        if lo is not None and n < lo:
            return f"{name} must be greater than or equal to {lo}"
    assignor = configs.get(STREAMS_ASSIGNOR)
    if assignor is not None and assignor not in _list(group.streams_assignors):
        return (f"{STREAMS_ASSIGNOR} '{assignor}' is not a registered task assignor. Registered assignors are: "
                f"[{', '.join(_list(group.streams_assignors))}].")
    for session, session_default, interval, interval_default in (
            ("consumer.session.timeout.ms", group.consumer_session_timeout_ms,
             "consumer.heartbeat.interval.ms", group.consumer_heartbeat_interval_ms),
            ("share.session.timeout.ms", share.session_timeout_ms,
             "share.heartbeat.interval.ms", share.heartbeat_interval_ms),
            ("streams.session.timeout.ms", group.streams_session_timeout_ms,
             "streams.heartbeat.interval.ms", group.streams_heartbeat_interval_ms)):
        if session in parsed or interval in parsed:
            s, i = parsed.get(session, session_default), parsed.get(interval, interval_default)
            if isinstance(s, int) and isinstance(i, int) and s <= i:
                return f"{session} must be greater than {interval}"
    if str(parsed.get(DLQ_TOPIC, "")).startswith("__"):
        return f"{DLQ_TOPIC}: DLQ topic name must not start with '__'"
    return None


def evaluate(overrides: Mapping[str, str], group_id: str, bounds: Mapping[str, Bound]) -> dict[str, str]:
    """The group's configs as they take effect (Kafka 4.4's GroupConfig.evaluate): a value the
    broker's limits (`bounds`: limits()) no longer allow, as they changed since it was set, is
    capped to the nearest one, with Kafka's warning."""
    out = dict(overrides)
    for name, (lo, hi) in bounds.items():
        text = out.get(name)
        if text is None or not _INTEGER.fullmatch(text.strip()):
            continue
        n = int(text)
        if lo is not None and n < lo:
            log.warning("The group config '%s' for group '%s' has value %d which is below the broker's allowed "
                        "minimum %d. The effective value will be capped to %d.", name, group_id, n, lo, lo)
            out[name] = str(lo)
        elif hi is not None and n > hi:
            log.warning("The group config '%s' for group '%s' has value %d which exceeds the broker's allowed "
                        "maximum %d. The effective value will be capped to %d.", name, group_id, n, hi, hi)
            out[name] = str(hi)
    return out


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _broker_value(d: GroupConfigDef, share: ShareConfig, group: GroupConfig, fresh: bool = False) -> str | None:
    """The value of `d`'s broker synonym in force (`fresh`: its default), None without one."""
    if d.field is None:
        return None
    holder, attr = d.field
    obj: object = (ShareConfig() if fresh else share) if holder == "share" else (GroupConfig() if fresh else group)
    return _text(getattr(obj, attr))


def group_entries(overrides: Mapping[str, str], share: ShareConfig, group: GroupConfig,
                  broker: Sequence[BrokerSetting] = ()) -> list[ConfigEntry]:
    """DescribeConfigs of the GROUP resource as Kafka 4.4 answers it (ConfigHelper): every group
    config, the group's value (source GROUP_CONFIG) or its broker synonym's (the broker setting's
    value: STATIC_BROKER_CONFIG when set, else DEFAULT_CONFIG), else the config's default; the
    synonyms most specific first; Kafka's internal ones only when set. `broker`: the settings the
    gateway resolved, with sources."""
    set_ = {b.name for b in broker if b.source != ConfigSource.DEFAULT_CONFIG}
    static, default, dynamic = ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG, \
        ConfigSource.DYNAMIC_GROUP_CONFIG
    out = []
    for name in sorted(GROUP_CONFIG_DEFS):
        d = GROUP_CONFIG_DEFS[name]
        if d.internal and name not in overrides and d.broker not in set_:
            continue
        syns: list[Synonym] = []
        value = d.default
        if d.broker is not None:
            broker_value = _broker_value(d, share, group)
            if d.broker in set_:
                syns.append(Synonym(d.broker, broker_value, static))
            # streams.assignor.name is the first of the group.streams.assignors list
            value = next(iter(_list(broker_value or "")), None) if name == STREAMS_ASSIGNOR else broker_value
            syns.append(Synonym(d.broker, _broker_value(d, share, group, fresh=True), default))
        elif d.default is not None:
            syns.append(Synonym(name, d.default, default))
        if name in overrides:
            value = overrides[name]
            syns.insert(0, Synonym(name, value, dynamic))
        out.append(ConfigEntry(name, value, syns[0].source if syns else default, False, d.type, d.doc, tuple(syns)))
    return out


class GroupConfigCache:
    """The groups' configs as this gateway last read them, each kept while a watch on its node says
    it is unchanged: ConsumerGroupHeartbeat, ShareGroupHeartbeat and share-partitions opening read
    them without a metadata read, and an alteration (here or on another gateway) reaches them."""

    def __init__(self, meta: MetaStore, bounds: Mapping[str, Bound]) -> None:
        self._meta = meta
        self._bounds = bounds  # limits(): the overrides are served as evaluate() makes them
        self._cache: dict[str, dict[str, str]] = {}
        self._watched: set[str] = set()  # groups with a watch outstanding on their node
        self._changes = 0  # bumped by every watch event: a read it overlaps is not cached

    async def get(self, group_id: str) -> Mapping[str, str]:
        """The group's overrides as they take effect (evaluate(); a mapping the caller must not change)."""
        found = self._cache.get(group_id)
        if found is not None:
            return found
        changes = self._changes
        # Marked armed before the call that arms it: its event may come before this resumes.
        arm = group_id not in self._watched
        self._watched.add(group_id)
        try:
            stat = await self._meta.exists(path_of(group_id), watch=self._on_event if arm else None)
            configs = {} if stat is None else evaluate(
                (await read_group_configs(self._meta, group_id))[0], group_id, self._bounds)
        except BaseException:
            if arm:
                self._watched.discard(group_id)
            raise
        if changes == self._changes and group_id in self._watched:
            self._cache[group_id] = configs
        return configs

    def invalidate(self, group_id: str) -> None:
        """Forget a group's configs (this gateway just wrote them: do not wait for the watch)."""
        self._cache.pop(group_id, None)
        self._changes += 1

    def _on_event(self, event: WatchEvent) -> None:
        group_id = bytes.fromhex(event.path.rsplit("/", 1)[1]).decode()
        self._watched.discard(group_id)
        self.invalidate(group_id)
