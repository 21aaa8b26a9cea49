"""Group configs (the GROUP config resource): Kafka 4.4's validation messages (taken from its
GroupConfig.validate with the default broker settings), DescribeConfigs' values, sources and
broker synonyms, and the watched cache heartbeats read them from."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest

from coordinator.group.config import GroupConfig
from coordinator.share.config import ShareConfig
from gateway.config import BrokerSetting
from gateway.group_configs import (
    GROUP_CONFIG_DEFS,
    GroupConfigCache,
    evaluate,
    group_entries,
    limits,
    validate,
    write_group_configs,
)
from gateway.topics.configs import ConfigSource, ConfigType
from quire.settings import SETTINGS
from store.meta.api import MetaStore
from store.meta.factory import open_meta
from tests.support.wait import eventually

G, S = GroupConfig(), ShareConfig()
STATIC, DEFAULT, GROUP = ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG, \
    ConfigSource.DYNAMIC_GROUP_CONFIG


@pytest.mark.parametrize(("configs", "message"), [
    ({"streams.num.standby.replicas": "-1"},
     "Invalid value -1 for configuration streams.num.standby.replicas: Value must be at least 0"),
    ({"streams.num.standby.replicas": "3"}, "streams.num.standby.replicas must be less than or equal to 2"),
    ({"streams.num.warmup.replicas": "21"}, "streams.num.warmup.replicas must be less than or equal to 20"),
    ({"streams.session.timeout.ms": "70000"},
     "streams.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
    ({"streams.heartbeat.interval.ms": "4000"},
     "streams.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
    ({"streams.initial.rebalance.delay.ms": "-1"},
     "Invalid value -1 for configuration streams.initial.rebalance.delay.ms: Value must be at least 0"),
    ({"streams.initial.rebalance.delay.ms": "999999999"}, None),
    ({"streams.assignment.interval.ms": "16000"},
     "streams.assignment.interval.ms must be in the range 0 to 15000 inclusive."),
    ({"streams.task.offset.interval.ms": "1000"}, "streams.task.offset.interval.ms must be greater than or equal to "
                                                  "15000"),
    ({"streams.task.offset.interval.ms": "0"},
     "Invalid value 0 for configuration streams.task.offset.interval.ms: Value must be at least 1"),
    ({"streams.acceptable.recovery.lag": "x"},
     "Invalid value x for configuration streams.acceptable.recovery.lag: Not a number of type LONG"),
    ({"streams.acceptable.recovery.lag": "99999999999"}, None),
    ({"streams.assignor.name": "foo"},
     "streams.assignor.name 'foo' is not a registered task assignor. Registered assignors are: [sticky]."),
    ({"streams.assignor.name": "sticky"}, None),
    ({"streams.rack.aware.assignment.tags": " a , a"},
     "streams.rack.aware.assignment.tags must not contain duplicate tag keys."),
    ({"streams.rack.aware.assignment.tags": "a,b"}, None),
    ({"share.assignment.interval.ms": "16000"}, "share.assignment.interval.ms must be in the range 0 to 15000 "
                                                "inclusive."),
    ({"share.assignment.interval.ms": "-1"},
     "Invalid value -1 for configuration share.assignment.interval.ms: Value must be at least 0"),
    ({"share.assignor.offload.enable": "maybe"},
     "Invalid value maybe for configuration share.assignor.offload.enable: Expected value to be either true or "
     "false"),
    ({"share.assignor.offload.enable": "TRUE"}, None),
    ({"consumer.assignment.interval.ms": "16000"},
     "consumer.assignment.interval.ms must be in the range 0 to 15000 inclusive."),
    ({"consumer.assignor.offload.enable": "false"}, None),
    ({"share.isolation.level": "READ_COMMITTED"},
     "Invalid value READ_COMMITTED for configuration share.isolation.level: String must be one of: read_committed, "
     "read_uncommitted"),
    ({"consumer.session.timeout.ms": "abc"},
     "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ({"consumer.session.timeout.ms": "46000", "consumer.heartbeat.interval.ms": "50000"},
     "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
    ({"share.auto.offset.reset": "EARLIEST"},
     "Invalid value EARLIEST for configuration share.auto.offset.reset: Invalid value `EARLIEST` for configuration "
     "share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format "
     "'by_duration:<PnDTnHnMn.nS>'."),
    ({"unknown.config": "1"}, "Unknown group config name: unknown.config"),
])
def test_validation_as_kafka(configs: dict[str, str], message: str | None) -> None:
    assert validate(configs, S, G) == message


def test_session_must_exceed_heartbeat_with_the_broker_defaults() -> None:
    """With the broker's lower limits below its heartbeat intervals, a session timeout at most the
    group's (or else the broker's) heartbeat interval is refused, for each group type."""
    g = dataclasses.replace(G, consumer_min_session_timeout_ms=1000, streams_min_session_timeout_ms=1000)
    s = dataclasses.replace(S, min_session_timeout_ms=1000)
    for kind in ("consumer", "share", "streams"):
        assert validate({f"{kind}.session.timeout.ms": "5000"}, s, g) == \
            f"{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms"
        assert validate({f"{kind}.session.timeout.ms": "5001"}, s, g) is None


def test_values_past_changed_broker_limits_are_capped() -> None:
    """Kafka 4.4's GroupConfig.evaluate: a value set when the broker allowed it, outside the
    broker's limits now, takes effect capped to the nearest limit; the others are left alone."""
    g = dataclasses.replace(G, consumer_max_heartbeat_interval_ms=8000)
    s = dataclasses.replace(S, min_record_lock_duration_ms=20000)
    stored = {"consumer.heartbeat.interval.ms": "12000", "share.record.lock.duration.ms": "15000",
              "share.heartbeat.interval.ms": "6000", "share.isolation.level": "read_committed"}
    assert evaluate(stored, "g", limits(s, g)) == {
        "consumer.heartbeat.interval.ms": "8000", "share.record.lock.duration.ms": "20000",
        "share.heartbeat.interval.ms": "6000", "share.isolation.level": "read_committed"}


def test_every_broker_synonym_is_a_setting_with_a_field() -> None:
    """Each group config's broker synonym is one of Quire's settings (quire/settings.py), its
    value held by the GroupConfig or ShareConfig field the config's default is read from."""
    keys = {s.key for s in SETTINGS}
    for d in GROUP_CONFIG_DEFS.values():
        if d.broker is None:
            continue
        assert d.broker in keys, d.name
        assert d.field is not None and hasattr(G if d.field[0] == "group" else S, d.field[1]), d.name


def test_describe_values_sources_and_synonyms() -> None:
    """As Kafka 4.4's ConfigHelper: an override first (GROUP_CONFIG), then the broker synonym set in
    the file (STATIC_BROKER_CONFIG), then its default; a config without a broker synonym has its
    own default as its synonym; streams.assignor.name is the first of group.streams.assignors."""
    share = dataclasses.replace(S, heartbeat_interval_ms=7000)
    broker = [BrokerSetting("group.share.heartbeat.interval.ms", "7000", STATIC, ConfigType.INT, "", "5000")]
    entries = {e.name: e for e in group_entries({"streams.num.standby.replicas": "1"}, share, G, broker)}
    # Kafka's internal configs are described only when set on the group or by their broker synonym
    assert set(GROUP_CONFIG_DEFS) - set(entries) == {
        "consumer.assignor.offload.enable", "share.assignor.offload.enable", "streams.assignor.offload.enable",
        "streams.task.offset.interval.ms", "streams.num.warmup.replicas", "streams.acceptable.recovery.lag"}
    e = entries["share.heartbeat.interval.ms"]
    assert (e.value, e.source, [(s.name, s.value, s.source) for s in e.synonyms]) == ("7000", STATIC, [
        ("group.share.heartbeat.interval.ms", "7000", STATIC), ("group.share.heartbeat.interval.ms", "5000", DEFAULT)])
    e = entries["streams.num.standby.replicas"]
    assert (e.value, e.source, e.type, [(s.name, s.value, s.source) for s in e.synonyms]) == ("1", GROUP, ConfigType.INT, [
        ("streams.num.standby.replicas", "1", GROUP), ("group.streams.num.standby.replicas", "0", DEFAULT)])
    e = entries["share.isolation.level"]
    assert (e.value, e.source, [(s.name, s.value, s.source) for s in e.synonyms]) == ("read_uncommitted", DEFAULT, [
        ("share.isolation.level", "read_uncommitted", DEFAULT)])
    e = entries["streams.assignor.name"]
    assert (e.value, e.source, [(s.name, s.value) for s in e.synonyms]) == ("sticky", DEFAULT, [
        ("group.streams.assignors", "sticky")])
    entries = {e.name: e for e in group_entries({"share.assignor.offload.enable": "false"}, share, G, broker)}
    e = entries["share.assignor.offload.enable"]
    assert (e.value, e.type) == ("false", ConfigType.BOOLEAN) and "no effect in Quire" in (e.doc or "")


@pytest.fixture
async def stores(meta_url: str) -> AsyncIterator[tuple[MetaStore, MetaStore]]:
    """(the cache's store, a writer's): on ZooKeeper another session (as another gateway's), on
    the embedded store the same one (it serves one process)."""
    reader = open_meta(meta_url)
    await reader.start()
    writer = open_meta(meta_url) if meta_url.startswith("zk://") else reader
    if writer is not reader:
        await writer.start()
    try:
        yield reader, writer
    finally:
        if writer is not reader:
            await writer.close()
        await reader.close()


async def test_cache_reads_once_and_follows_changes(stores: tuple[MetaStore, MetaStore]) -> None:
    """A group's configs are read from the metadata store once, then served from memory until
    its node changes (a watch), when another writer creates, changes or deletes it."""
    meta, writer = stores
    reads = 0
    get, exists = meta.get, meta.exists

    async def counting_get(*a: object, **k: object) -> object:
        nonlocal reads
        reads += 1
        return await get(*a, **k)  # type: ignore[arg-type]

    async def counting_exists(*a: object, **k: object) -> object:
        nonlocal reads
        reads += 1
        return await exists(*a, **k)  # type: ignore[arg-type]

    cache = GroupConfigCache(meta, limits(S, G))
    meta.get, meta.exists = counting_get, counting_exists  # type: ignore[method-assign,assignment]
    assert await cache.get("g") == {}
    before = reads
    for _ in range(5):
        assert await cache.get("g") == {}
    assert reads == before  # served from memory

    await write_group_configs(writer, "g", {"consumer.heartbeat.interval.ms": "7000"}, -1)

    async def sees(expected: dict[str, str]) -> bool:
        return dict(await cache.get("g")) == expected

    await eventually(lambda: sees({"consumer.heartbeat.interval.ms": "7000"}), what="the created configs")
    before = reads
    assert dict(await cache.get("g")) == {"consumer.heartbeat.interval.ms": "7000"}
    assert reads == before
    await write_group_configs(writer, "g", {"consumer.heartbeat.interval.ms": "8000"}, 0)
    await eventually(lambda: sees({"consumer.heartbeat.interval.ms": "8000"}), what="the changed configs")
    await writer.delete("/kafka/group-configs/" + b"g".hex())
    await eventually(lambda: sees({}), what="the deletion")
