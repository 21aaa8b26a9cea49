"""`quire gateway` flags reach the GatewayConfig the gateway runs with."""

from __future__ import annotations

import pytest

from gateway.config import GatewayConfig
from quire.cli import main


def test_gateway_flags_reach_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[GatewayConfig] = []

    async def fake_run_gateway(config: GatewayConfig) -> None:
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
    assert (c.offsets_topic_partitions, c.group_initial_rebalance_delay_ms) == (4, 0)
    assert c.meta_session_timeout_s == 3.0 and c.auto_create_topics is False


def test_bad_replication_is_a_clear_error() -> None:
    with pytest.raises(SystemExit, match="E >= WQ >= AQ"):
        main(["gateway", "--meta", "zk://127.0.0.1:1/q", "--replication", "1/2/2"])
