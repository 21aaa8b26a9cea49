"""Settings: `quire gateway` flags reach the GatewayConfig; file < environment < flags; the
properties syntax; unknown keys; the README's table is the settings table."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from gateway.config import GatewayConfig
from quire.cli import main
from quire.settings import GATEWAY, SettingsError, parse_properties, resolve, table_markdown


def test_gateway_flags_reach_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[GatewayConfig] = []

    async def fake_run_gateway(config: GatewayConfig, **_kwargs: object) -> None:
        seen.append(config)

    monkeypatch.setattr("gateway.app.run_gateway", fake_run_gateway)
    argv = [
        "gateway", "--meta", "zk://127.0.0.1:1/q", "--listen", "127.0.0.1:19092",
        "--advertise", "gw1:9092", "--id", "7", "--replication", "3/3/2",
        "--offsets-topic-partitions", "4", "--group-initial-rebalance-delay-ms", "0",
        "--session-timeout", "3", "--no-auto-create",
    ]  # fmt: skip
    assert main(argv) == 0
    (c,) = seen
    assert (c.meta_url, c.listen_host, c.listen_port) == ("zk://127.0.0.1:1/q", "127.0.0.1", 19092)
    assert c.advertised() == ("gw1", 9092) and c.node_id == 7
    assert (c.ensemble_size, c.write_quorum, c.ack_quorum) == (3, 3, 2)
    assert (c.offsets_topic_partitions, c.group["initial_rebalance_delay_ms"]) == (4, 0)
    assert c.meta_session_timeout_s == 3.0 and c.auto_create_topics is False


def test_bad_replication_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gateway", "--meta", "zk://127.0.0.1:1/q", "--replication", "1/2/2"]) == 2
    assert "E >= WQ >= AQ" in capsys.readouterr().err


def test_properties_syntax() -> None:
    text = "# comment\n! comment\na=1\nb : 2\nc 3\n  d = x\\\n     y\ne\\=k=v\\tw\\u0041\nf=\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "xy", "e=k": "v\twA", "f": ""}


def test_precedence_file_env_flag_and_legacy_env(tmp_path: Path) -> None:
    cfg = tmp_path / "server.properties"
    cfg.write_text("num.partitions=2\nbroker.id=5\nlog.retention.ms=1000\noffsets.topic.num.partitions=3\n")
    args = argparse.Namespace(num_partitions="7")
    env = {"QUIRE_LOG_RETENTION_MS": "2000", "QUIRE_OFFSETS_TOPIC_PARTITIONS": "9"}
    r = resolve(GATEWAY, args, env=env, file=cfg)
    assert (r["num.partitions"].value, r["num.partitions"].source) == (7, "flag")
    assert (r["log.retention.ms"].value, r["log.retention.ms"].source) == (2000, "env")
    assert (r["node.id"].value, r["node.id"].source) == (5, "file")  # broker.id is node.id
    assert (r["offsets.topic.num.partitions"].value, r["offsets.topic.num.partitions"].source) == (9, "env")
    assert r["delete.topic.enable"].source == "default"
    with pytest.raises(SettingsError, match="QUIRE_NUM_PARTITIONS"):
        resolve(GATEWAY, None, env={"QUIRE_NUM_PARTITIONS": "many"})


def test_unknown_or_foreign_keys_are_named(tmp_path: Path) -> None:
    cfg = tmp_path / "server.properties"
    cfg.write_text("log.retention.hour=1\n")
    with pytest.raises(SettingsError, match=r"unknown setting 'log\.retention\.hour'"):
        resolve(GATEWAY, None, env={}, file=cfg)
    cfg.write_text("quire.bookies=3\nquire.bookie.fsync=false\nnum.partitions=3\n")  # shared by roles
    r = resolve(GATEWAY, None, env={}, file=cfg)
    assert "quire.bookies" not in r and "quire.bookie.fsync" not in r and r.get_value("num.partitions") == 3


def test_readme_table_is_the_settings_table() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert table_markdown() in readme


async def test_group_settings_from_the_config_file_are_honoured(tmp_path: Path) -> None:
    """group.min/max.session.timeout.ms, group.initial.rebalance.delay.ms (Kafka's defaults
    otherwise) and the consumer protocol's group.consumer.* settings reach the coordinator."""
    import types

    from coordinator.group.config import GroupConfig
    from coordinator.group.coordinator import GroupCoordinator
    from gateway.groups import group_config
    from kafka_wire.errors import ErrorCode
    from quire.gateway import build_config
    from tests.coordinator.helpers import req
    from tests.coordinator.shard_logs import MemoryShardLog

    defaults = build_config(resolve(GATEWAY, None, env={}), GATEWAY)
    kafka = GroupConfig()
    assert (kafka.min_session_timeout_ms, kafka.max_session_timeout_ms, kafka.initial_rebalance_delay_ms) == (
        6000, 1800000, 3000)
    assert group_config(types.SimpleNamespace(config=defaults)) == kafka  # type: ignore[arg-type]
    cfg = tmp_path / "server.properties"
    cfg.write_text("quire.meta=zk://127.0.0.1:1/q\ngroup.min.session.timeout.ms=2000\n"
                   "group.max.session.timeout.ms=9000\ngroup.initial.rebalance.delay.ms=50\n"
                   "group.consumer.min.session.timeout.ms=10000\ngroup.consumer.session.timeout.ms=30000\n"
                   "group.consumer.assignors=range,uniform\n")
    gc = group_config(types.SimpleNamespace(config=build_config(resolve(GATEWAY, None, env={}, file=cfg), GATEWAY)))  # type: ignore[arg-type]
    assert (gc.min_session_timeout_ms, gc.max_session_timeout_ms, gc.initial_rebalance_delay_ms) == (2000, 9000, 50)
    assert (gc.consumer_session_timeout_ms, gc.consumer_assignors) == (30000, "range,uniform")
    c = GroupCoordinator(0, MemoryShardLog(), gc)
    await c.load()
    assert (await c.join(req(session_ms=1999))).error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert (await c.join(req(session_ms=9001))).error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert (await c.join(req(session_ms=2000, require_known=True))).error == ErrorCode.MEMBER_ID_REQUIRED
    c.unload()


def test_inconsistent_consumer_group_settings_stop_the_start(tmp_path: Path) -> None:
    from quire.gateway import build_config

    cfg = tmp_path / "server.properties"
    cfg.write_text("group.consumer.session.timeout.ms=10000\n")  # below Kafka's min (45000)
    with pytest.raises(SettingsError, match=r"group\.consumer\.session\.timeout\.ms must be greater than or equal"):
        build_config(resolve(GATEWAY, None, env={}, file=cfg), GATEWAY)
    cfg.write_text("group.consumer.min.session.timeout.ms=1000\ngroup.consumer.session.timeout.ms=4000\n")
    with pytest.raises(SettingsError, match=r"heartbeat\.interval\.ms must be less than"):
        build_config(resolve(GATEWAY, None, env={}, file=cfg), GATEWAY)
    # Kafka 4.4's checks of the streams and share-group settings, in its words.
    for text, message in (
            ("group.streams.num.standby.replicas=3\n",
             "group.streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"),
            ("group.streams.min.session.timeout.ms=1000\ngroup.streams.session.timeout.ms=5000\n",
             "group.streams.heartbeat.interval.ms must be less than group.streams.session.timeout.ms"),
            ("group.share.assignment.interval.ms=16000\n",
             "group.share.assignment.interval.ms must be less than or equal to group.share.max.assignment.interval.ms"),
            ("group.consumer.assignment.interval.ms=16000\n", "group.consumer.assignment.interval.ms must be less "
             "than or equal to group.consumer.max.assignment.interval.ms")):
        cfg.write_text(text)
        with pytest.raises(SettingsError, match=re.escape(message)):
            build_config(resolve(GATEWAY, None, env={}, file=cfg), GATEWAY)
