"""Prometheus metrics of a real `quire standalone` (gateway and bookie child processes), scraped
over HTTP after real traffic from confluent-kafka: a producer, a consumer group that consumes
and commits, then more messages so that the group lags."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from store.net import free_port_run
from tests.coordinator.gateway_support import fast_group_env, wait_for
from tests.support.gateway import StandaloneGateway
from tests.support.metrics import scrape, value

TOPIC, GROUP = "metrics-t", "metrics-g"
BOOKIES = 2


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[tuple[StandaloneGateway, int]]:
    port = free_port_run(1 + BOOKIES)
    with fast_group_env():
        g = StandaloneGateway(tmp_path / "data", bookies=BOOKIES, extra_args=["--metrics", f"127.0.0.1:{port}"])
        g.start()
    try:
        yield g, port
    finally:
        g.stop(timeout=20.0)


def test_gateway_and_bookie_metrics_move_with_traffic(gw: tuple[StandaloneGateway, int]) -> None:
    from confluent_kafka import Consumer, Producer

    g, port = gw
    wait_for(lambda: f"metrics http://127.0.0.1:{port}/metrics (bookies on ports {port + 1}, {port + 2})" in g.output(),
             30, "the ready line with the metrics URLs")
    producer = Producer({"bootstrap.servers": g.bootstrap, "linger.ms": 5})
    for i in range(100):
        producer.produce(TOPIC, value=b"v%03d" % i)
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": g.bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([TOPIC])
        got = 0
        while got < 100:
            msg = consumer.poll(30)
            assert msg is not None, f"consumed {got} of 100"
            if msg.error() is None:
                got += 1
        consumer.commit(asynchronous=False)

        m = scrape(port)
        assert value(m, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC) > 0
        assert value(m, "kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) > 0
        for api in ("Produce", "Fetch", "OffsetCommit", "JoinGroup"):
            assert value(m, "kafka_network_requestmetrics_requests_total", request=api) > 0, api
        assert value(m, "kafka_network_requestmetrics_totaltimems_count", request="Produce") > 0
        assert value(m, "kafka_server_socketservermetrics_connection_count") >= 2  # producer, consumer
        assert value(m, "kafka_server_replicamanager_partitioncount") >= 1
        assert value(m, "quire_gateway_leases_gained_total") >= 1
        assert value(m, "quire_entry_cache_hits_total") + value(m, "quire_entry_cache_misses_total") > 0
        assert value(m, "quire_entry_cache_bytes") > 0
        assert any(n == "quire_entry_cache_readahead_reserved_bytes" for n, _ in m)  # 0 when idle
        assert value(m, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1
        assert value(m, "kafka_coordinator_group_groupmetadatamanager_numgroupsstable") >= 1
        # Adds, client side, labelled by bookie: both bookies of the ensemble.
        adds = {dict(ls)["bookie"] for (n, ls), v in m.items()
                if n == "quire_bookie_client_request_seconds_count" and dict(ls).get("op") == "add" and v > 0}
        assert len(adds) == BOOKIES
        assert ("quire_ledger_ensemble_changes_total", frozenset()) in m  # 0, but there from the start
        # The journal is the bookies' business: the gateway does not export it.
        assert not any(n.startswith("quire_bookie_journal") for n, _ in m)
        # Both kinds of server settled their heaps once serving: that full collection is timed.
        assert value(m, "quire_gc_pause_seconds_count", generation="2") >= 1

        for i in range(BOOKIES):
            b = scrape(port + 1 + i)
            assert value(b, "quire_bookie_journal_fdatasync_seconds_count") > 0
            # Each commit counted where it ran (counted as it starts): the first always on the loop.
            on_loop = value(b, "quire_bookie_journal_commits_total", on="loop")
            assert on_loop >= 1
            assert on_loop + value(b, "quire_bookie_journal_commits_total", on="thread") >= value(
                b, "quire_bookie_journal_batch_records_count")
            assert value(b, "quire_gc_pause_seconds_count", generation="2") >= 1
            assert not any(n.startswith(("quire_entry_cache", "quire_ledger", "kafka_")) for n, _ in b)
            assert value(b, "quire_bookie_journal_batch_records_sum") >= value(
                b, "quire_bookie_journal_batch_records_count") > 0

        # 7 more messages the group has not consumed: its lag, once the owner sees the commit.
        for i in range(7):
            producer.produce(TOPIC, value=b"late%d" % i)
        assert producer.flush(30) == 0
        wait_for(lambda: value(scrape(port), "kafka_consumergroup_lag_sum", consumergroup=GROUP, topic=TOPIC) == 7,
                 30, "the group's lag to reach 7")
    finally:
        consumer.close()


def test_bad_metrics_address_is_a_usage_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.support.gateway import ROOT, _env

    r = subprocess.run([sys.executable, "-m", "quire", "standalone", "--data-dir", str(tmp_path / "d"),
                        "--metrics", "nowhere"], capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=60)
    assert r.returncode == 2
    assert "quire.metrics (--metrics) must be HOST:PORT or off" in r.stderr
    assert not (tmp_path / "d").exists()
