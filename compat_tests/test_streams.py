"""Kafka Streams, unchanged (kafka-streams 4.3.1, the newest on Maven Central here): the harness's
word count (groupBy + count into a KTable whose changelog is compacted, then an output topic).

- KTable restore on `quire standalone`: the application counts input while the cleaner compacts
  its changelog, stops, loses its local state directory, restarts, restores the KTable from the
  cleaned changelog and counts on: the output's final counts equal the input's.
- Exactly-once (`processing.guarantee=exactly_once_v2`) on a cluster (ZooKeeper, 3 bookies, 2
  gateways): the gateway coordinating the application's transactions is SIGKILLed while it
  processes; a read_committed reader of the output sees every word counted exactly once."""

from __future__ import annotations

import random
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from compat_tests.support.clients import create_topic, unique
from compat_tests.support.streams import WordCountApp, produce_lines, read_topic, word_counts
from compat_tests.support.targets import QuireCluster, Target
from compat_tests.support.wire import Wire

pytestmark = [pytest.mark.skipif(shutil.which("java") is None, reason="java is not installed"),
              pytest.mark.compat(suite="streams", client="kafka-streams")]

WORDS = [f"w{i:02d}" for i in range(30)]
# The changelog's segments roll and are cleaned as the application writes to it.
CLEANING = {"topic.segment.ms": "100", "topic.min.cleanable.dirty.ratio": "0.01",
            "topic.min.compaction.lag.ms": "0",
            # Streams never leaves its group on close: a static member's restart takes its place
            # at once instead of waiting out the session timeout
            "consumer.group.instance.id": "wc"}


def lines(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) for _ in range(n)]


def wait_counts(bootstrap: str, output: str, expected: dict[str, int], within: float = 120.0) -> dict[str, Any]:
    """Until the output's latest count per word (read_committed) is what the input implies."""
    deadline = time.monotonic() + within
    while True:
        got = read_topic(bootstrap, output)
        if got["latest"] == expected:
            return got
        assert time.monotonic() < deadline, (got["latest"], expected)


def test_ktable_restores_from_cleaned_changelog(target: Target, tmp_path: Path) -> None:
    rng = random.Random(12)
    app_id, topic_in, topic_out = unique("wc-restore"), unique("wc-in"), unique("wc-out")
    changelog = f"{app_id}-counts-changelog"
    create_topic(target.bootstrap, topic_in, partitions=2)
    create_topic(target.bootstrap, topic_out, partitions=2)
    state = tmp_path / "state"
    sent: list[str] = []
    app = WordCountApp(target.bootstrap, app_id=app_id, input=topic_in, output=topic_out, state_dir=state,
                       **CLEANING)
    try:
        app.wait_for("state", state="RUNNING")
        # Rounds of input until the cleaner has compacted part of the changelog (the event: fewer
        # records than offsets, each word's older counts removed).
        deadline = time.monotonic() + 150
        while True:
            batch = lines(rng, 60)
            produce_lines(target.bootstrap, topic_in, batch)
            sent += batch
            wait_counts(target.bootstrap, topic_out, word_counts(sent))
            cl = read_topic(target.bootstrap, changelog)
            assert cl["latest"] == word_counts(sent)
            if cl["records"] < cl["span"]:
                break
            assert time.monotonic() < deadline, f"changelog never cleaned: {cl['records']} records"
    finally:
        app.stop()
    shutil.rmtree(state)
    app = WordCountApp(target.bootstrap, app_id=app_id, input=topic_in, output=topic_out, state_dir=state,
                       **CLEANING)
    try:
        app.wait_for("state", state="RUNNING")
        restored = [e for e in app.events if e["event"] == "restored"]
        # both changelog partitions restored, from the cleaned log: at least every word's latest
        # count, at most what was left after the cleaning pass seen above
        assert {e["partition"] for e in restored} == {f"{changelog}-0", f"{changelog}-1"}, app.events
        assert len(word_counts(sent)) <= sum(e["records"] for e in restored) <= cl["records"]
        batch = lines(rng, 60)
        produce_lines(target.bootstrap, topic_in, batch)
        sent += batch
        wait_counts(target.bootstrap, topic_out, word_counts(sent))
    finally:
        app.stop()


def transactional_ids(bootstrap: str, prefix: str) -> list[str]:
    from kafka_wire.messages.list_transactions import ListTransactionsRequest

    ids: set[str] = set()
    for address in bootstrap.split(","):
        with Wire(address) as w:
            r = w.call((66, 1), ListTransactionsRequest(state_filters=[], producer_id_filters=[]))
            ids |= {t.transactional_id for t in r.transaction_states if t.transactional_id.startswith(prefix)}
    return sorted(ids)


def coordinator_port(bootstrap: str, txn_id: str) -> int:
    from kafka_wire.messages.find_coordinator import FindCoordinatorRequest

    with Wire(bootstrap.split(",")[0]) as w:
        r = w.call((10, 4), FindCoordinatorRequest(key_type=1, coordinator_keys=[txn_id]))
    (c,) = r.coordinators
    assert c.error_code == 0, c
    return int(c.port)


@pytest.mark.slow
def test_exactly_once_survives_coordinator_kill(zookeeper: Any, tmp_path: Path) -> None:
    cluster = QuireCluster(zookeeper.url(), tmp_path / "cluster").start()
    rng = random.Random(848)
    app_id, topic_in, topic_out = unique("wc-eos"), unique("wc-in"), unique("wc-out")
    app = None
    try:
        create_topic(cluster.bootstrap, topic_in, partitions=4)
        create_topic(cluster.bootstrap, topic_out, partitions=4)
        app = WordCountApp(cluster.bootstrap, app_id=app_id, input=topic_in, output=topic_out,
                           state_dir=tmp_path / "state", guarantee="exactly_once_v2")
        app.wait_for("state", state="RUNNING")
        sent = lines(rng, 200)
        produce_lines(cluster.bootstrap, topic_in, sent)
        wait_counts(cluster.bootstrap, topic_out, word_counts(sent))
        (txn_id,) = transactional_ids(cluster.bootstrap, app_id)  # one stream thread, one producer
        port = coordinator_port(cluster.bootstrap, txn_id)
        victim = next(g for g in cluster.gateways if g.port == port)
        survivor = next(g for g in cluster.gateways if g is not victim)
        # A burst of input, and the coordinator killed while the application works through it.
        burst = lines(rng, 2000)
        producing = threading.Thread(target=produce_lines, args=(cluster.bootstrap, topic_in, burst))
        producing.start()
        app.wait_for("progress", records=len(sent) + 300)  # 300 of the burst's 2000 lines seen
        victim.kill()
        producing.join()
        sent += burst
        more = lines(rng, 200)
        produce_lines(survivor.address, topic_in, more)
        sent += more
        wait_counts(survivor.address, topic_out, word_counts(sent), within=240)
        # Each count update once, in order, none lost or repeated: per word exactly 1, 2, ..., n.
        got = read_topic(survivor.address, topic_out, sequences=True)
        assert {w: list(range(1, n + 1)) for w, n in word_counts(sent).items()} == got["values"]
        assert coordinator_port(survivor.address, txn_id) == survivor.port
    finally:
        if app is not None:
            app.kill()
        cluster.stop()
