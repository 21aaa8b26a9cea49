"""Config entries as DescribeConfigs / CreateTopics describe them: value, source, synonyms, type.

Topic configs: an override is a TOPIC_CONFIG (dynamic topic config) whose synonyms are itself and
the broker default it shadows; otherwise the value is the broker's default (DEFAULT_CONFIG).
Broker configs: the gateway's settings, read-only (no dynamic broker configs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gateway.config import GatewayConfig
from gateway.topics.configs import BROKER_DEFAULTS, TOPIC_CONFIGS, ConfigSource, ConfigType, default_of


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    type: ConfigType
    doc: str | None
    synonyms: tuple[Synonym, ...]

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG


def topic_entries(overrides: Mapping[str, str]) -> list[ConfigEntry]:
    out = []
    for name, defn in sorted(TOPIC_CONFIGS.items()):
        default_source = ConfigSource.STATIC_BROKER_CONFIG if name in BROKER_DEFAULTS else ConfigSource.DEFAULT_CONFIG
        default_syn = (Synonym(defn.broker_synonym, default_of(name), default_source),) \
            if defn.broker_synonym else ()
        if name in overrides:
            value, source = overrides[name], ConfigSource.TOPIC_CONFIG
            syns = (Synonym(name, value, ConfigSource.TOPIC_CONFIG), *default_syn)
        else:
            value, source, syns = default_of(name), default_source, default_syn
        doc = defn.doc + ("" if defn.applied else " (accepted and stored; no effect in Quire yet)")
        out.append(ConfigEntry(name, value, source, False, defn.type, doc, syns))
    return out


def broker_entries(config: GatewayConfig, node_id: int, advertised: tuple[str, int]) -> list[ConfigEntry]:
    """The settings the command resolved (config.broker_settings, with their sources), the values
    only known at run time (node id, bound listener), and the defaults of topic configs."""
    static, default = ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG
    t = ConfigType
    rows: dict[str, tuple[str | None, ConfigSource, ConfigType, str]] = {
        s.name: (s.value, s.source, s.type, s.doc) for s in config.broker_settings
    }
    # Kafka lists a set value's synonyms most specific first: the value, then the default.
    defaults = {s.name: s.default for s in config.broker_settings if s.source != default and s.default is not None}
    id_source = rows.get("node.id", (None, static))[1] if config.node_id is not None else default
    runtime: list[tuple[str, str | None, ConfigSource, ConfigType, str]] = [
        ("node.id", str(node_id), id_source, t.INT, "This gateway's node id."),
        ("broker.id", str(node_id), id_source, t.INT, "This gateway's node id."),
        ("advertised.listeners", f"PLAINTEXT://{advertised[0]}:{advertised[1]}",
         rows.get("advertised.listeners", (None, static))[1], t.STRING, "The address clients are told to use."),
        ("listeners", f"PLAINTEXT://{config.listen_host}:{config.listen_port}",
         rows.get("listeners", (None, static))[1], t.STRING, "The address this gateway listens on."),
        ("default.replication.factor", str(config.default_replication_factor), static, t.SHORT,
         "Reported replication factor; ledgers are replicated E/WQ/AQ over bookies (quire.replication)."),
        ("log.dirs", config.data_dir or "", static, t.STRING, "This gateway's reported log directory."),
    ]
    for name, value, source, typ, doc in runtime:
        rows[name] = (value, source, typ, doc)
    for defn in TOPIC_CONFIGS.values():
        if defn.broker_synonym and defn.broker_synonym not in rows:
            source = static if defn.name in BROKER_DEFAULTS else default
            rows[defn.broker_synonym] = (default_of(defn.name), source, defn.type, f"Default of topic config {defn.name}.")
    return [ConfigEntry(name, value, source, True, typ, doc, (Synonym(name, value, source),)
                        + ((Synonym(name, defaults[name], default),) if name in defaults else ()))
            for name, (value, source, typ, doc) in sorted(rows.items())]
