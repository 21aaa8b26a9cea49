"""Topic naming rules and topic config validation (pure functions)."""

from __future__ import annotations

import pytest

from gateway.topics import configs as cfg
from gateway.topics.describe import topic_entries
from gateway.topics.naming import collision_key, invalid_reason, is_valid


@pytest.mark.parametrize("name", ["a", "A-b_c.d", "x" * 249, "__consumer_offsets", "0"])
def test_legal_names(name: str) -> None:
    assert is_valid(name)


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a b", "a/b", "ü", "a,b", None])
def test_illegal_names(name: str | None) -> None:
    assert not is_valid(name)
    assert invalid_reason(name)


def test_collision_key() -> None:
    assert collision_key("a.b") == collision_key("a_b") != collision_key("a-b")


def test_defaults_are_kafkas() -> None:
    d = cfg.TOPIC_DEFAULTS
    assert d["retention.ms"] == "604800000"
    assert d["retention.bytes"] == "-1"
    assert d["segment.bytes"] == "1073741824"
    assert d["max.message.bytes"] == "1048588"
    assert d["message.timestamp.type"] == "CreateTime"
    assert d["min.insync.replicas"] == "1"
    assert d["cleanup.policy"] == "delete"
    assert {"retention.ms", "segment.bytes", "min.insync.replicas", "cleanup.policy"} <= cfg.APPLIED
    assert "flush.messages" in cfg.NOT_APPLIED


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("no.such.config", "1", "Unknown topic config name"),
        ("retention.ms", "abc", "Not a number"),
        ("retention.ms", "-2", "at least"),
        ("segment.bytes", "1000", "at least"),
        ("segment.bytes", str(1 << 40), "Not a number"),
        ("message.timestamp.type", "Whenever", "one of"),
        ("min.insync.replicas", "0", "at least"),
        ("preallocate", "maybe", "true or false"),
        ("cleanup.policy", "shred", "one of"),
        ("retention.ms", None, "Null value"),
    ],
)
def test_invalid_values(name: str, value: str | None, fragment: str) -> None:
    with pytest.raises(cfg.ConfigError, match=fragment):
        cfg.validate_value(name, value)


def test_valid_values_normalised() -> None:
    assert cfg.validate_configs(
        {
            "retention.ms": " 1000 ",
            "cleanup.policy": "compact, delete",
            "message.timestamp.type": "LogAppendTime",
            "preallocate": "TRUE",
        }
    ) == {
        "retention.ms": "1000",
        "cleanup.policy": "compact, delete",
        "message.timestamp.type": "LogAppendTime",
        "preallocate": "TRUE",
    }


def test_effective_and_entries() -> None:
    assert cfg.effective({"retention.ms": "5"}, "retention.ms") == "5"
    assert cfg.effective({}, "retention.ms") == "604800000"
    entries = {e.name: e for e in topic_entries({"retention.ms": "5"})}
    assert set(entries) == set(cfg.TOPIC_CONFIGS)
    r = entries["retention.ms"]
    assert (r.value, r.source) == ("5", cfg.ConfigSource.TOPIC_CONFIG)
    assert [(s.name, s.source) for s in r.synonyms] == [
        ("retention.ms", cfg.ConfigSource.TOPIC_CONFIG),
        ("log.retention.ms", cfg.ConfigSource.DEFAULT_CONFIG),
    ]
    s = entries["segment.bytes"]
    assert (s.value, s.source, s.is_default) == ("1073741824", cfg.ConfigSource.DEFAULT_CONFIG, True)


def test_compacted_topic_log_config() -> None:
    """compact alone: no time/size retention; a ledger closes by max.compaction.lag.ms too."""
    import uuid

    from gateway.partition.config import log_config_for
    from gateway.topics.registry import TopicInfo

    def lc(**configs: str):  # type: ignore[no-untyped-def]
        return log_config_for(TopicInfo("t", uuid.uuid4(), 1, configs), replication=(1, 1, 1))

    plain = lc(**{"retention.ms": "1000", "segment.ms": "60000", "max.compaction.lag.ms": "5000"})
    assert (plain.retention_ms, plain.max_age_s) == (1000, 60.0)
    compact = lc(**{"cleanup.policy": "compact", "retention.ms": "1000", "retention.bytes": "10",
                    "segment.ms": "60000", "max.compaction.lag.ms": "5000"})
    assert (compact.retention_ms, compact.retention_bytes, compact.max_age_s) == (-1, -1, 5.0)
    both = lc(**{"cleanup.policy": "compact,delete", "retention.ms": "1000"})
    assert both.retention_ms == 1000
    t = TopicInfo("t", uuid.uuid4(), 1, {"cleanup.policy": "delete, compact"})
    assert t.compacted and t.deletes


def test_compacted_topics_cannot_be_tiered() -> None:
    with pytest.raises(cfg.ConfigError, match="Remote log storage is unsupported for the compacted topics"):
        cfg.validate_configs({"cleanup.policy": "compact,delete", "remote.storage.enable": "true"})
    assert cfg.validate_configs({"cleanup.policy": "delete", "remote.storage.enable": "true"})
