"""Config entries as DescribeConfigs / CreateTopics describe them: value, source, synonyms, type.

Topic configs: an override is a TOPIC_CONFIG (dynamic topic config) whose synonyms are itself and
the broker default it shadows; otherwise the value is the broker's default (DEFAULT_CONFIG).
Broker configs: the gateway's settings, read-only (no dynamic broker configs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gateway.config import GatewayConfig
from gateway.topics.configs import TOPIC_CONFIGS, ConfigSource, ConfigType


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
        default_syn = (Synonym(defn.broker_synonym, defn.default, ConfigSource.DEFAULT_CONFIG),) \
            if defn.broker_synonym else ()
        if name in overrides:
            value, source = overrides[name], ConfigSource.TOPIC_CONFIG
            syns = (Synonym(name, value, ConfigSource.TOPIC_CONFIG), *default_syn)
        else:
            value, source, syns = defn.default, ConfigSource.DEFAULT_CONFIG, default_syn
        doc = defn.doc + ("" if defn.applied else " (accepted and stored; no effect in Quire yet)")
        out.append(ConfigEntry(name, value, source, False, defn.type, doc, syns))
    return out


def broker_entries(config: GatewayConfig, node_id: int, advertised: tuple[str, int]) -> list[ConfigEntry]:
    static, default = ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG
    t = ConfigType
    rows: list[tuple[str, str | None, ConfigSource, ConfigType, str]] = [
        ("node.id", str(node_id), static, t.INT, "This gateway's node id."),
        ("broker.id", str(node_id), static, t.INT, "This gateway's node id."),
        ("broker.rack", config.rack, static, t.STRING, "Rack of this gateway."),
        ("advertised.listeners", f"PLAINTEXT://{advertised[0]}:{advertised[1]}", static, t.STRING,
         "The address clients are told to use."),
        ("listeners", f"PLAINTEXT://{config.listen_host}:{config.listen_port}", static, t.STRING,
         "The address this gateway listens on."),
        ("auto.create.topics.enable", str(config.auto_create_topics).lower(), static, t.BOOLEAN,
         "Create unknown topics on Metadata requests that allow it."),
        ("num.partitions", str(config.num_partitions), static, t.INT, "Partitions of auto-created topics."),
        ("default.replication.factor", str(config.default_replication_factor), static, t.SHORT,
         "Reported replication factor; ledgers are replicated E/WQ/AQ over bookies."),
        ("delete.topic.enable", str(config.delete_topic_enable).lower(), static, t.BOOLEAN,
         "Whether DeleteTopics is allowed."),
        ("socket.request.max.bytes", str(config.socket_request_max_bytes), static, t.INT,
         "The largest request accepted; larger ones close the connection."),
        ("message.max.bytes", str(config.message_max_bytes), static, t.INT, "Largest record batch by default."),
        ("log.dirs", config.data_dir or "", static, t.STRING, "This gateway's reported log directory."),
        ("quire.ledger.ensemble.size", str(config.ensemble_size), static, t.INT, "Bookies per ledger (E)."),
        ("quire.ledger.write.quorum", str(config.write_quorum), static, t.INT, "Copies of each entry (WQ)."),
        ("quire.ledger.ack.quorum", str(config.ack_quorum), static, t.INT, "Acks before an entry counts (AQ)."),
    ]
    seen = {r[0] for r in rows}
    for defn in TOPIC_CONFIGS.values():
        if defn.broker_synonym and defn.broker_synonym not in seen:
            seen.add(defn.broker_synonym)
            rows.append((defn.broker_synonym, defn.default, default, defn.type, f"Default of topic config {defn.name}."))
    return [ConfigEntry(name, value, source, True, typ, doc, (Synonym(name, value, source),))
            for name, value, source, typ, doc in sorted(rows)]
