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
