"""KIP-932 share groups with the unchanged Java KafkaShareConsumer 4.4.0 (the harness's
`share` command, compat_tests/java/src/quire/compat/ShareCommand.java) on `quire standalone`:
implicit and explicit acknowledgement, several consumers sharing one partition, records of a
crashed consumer coming back after their lock expires with their delivery count, the delivery
limit archiving them, and acknowledgements surviving a restart of the partition owner."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import pytest

from compat_tests.support.clients import create_topic, unique
from compat_tests.support.java_harness import one, only, run_harness
from compat_tests.support.kafka_dist import run_tool
from tests.support.gateway import StandaloneFactory, StandaloneGateway

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="java is not installed")
LOCK_MS = 4000  # group.share.record.lock.duration.ms of these gateways: a crashed holder's records return soon
LIMIT = 3  # group.share.delivery.count.limit


@pytest.fixture
def gw(standalone_factory: StandaloneFactory) -> StandaloneGateway:
    return standalone_factory(extra_args=["--group-share-record-lock-duration-ms", str(LOCK_MS),
                                          "--group-share-delivery-count-limit", str(LIMIT)])


def _bootstrap(gw: StandaloneGateway) -> str:
    return f"{gw.host}:{gw.port}"


@pytest.mark.compat(suite="share-groups", client="java-client")
@pytest.mark.parametrize("mode", ["implicit", "explicit"])
def test_share_consumer_reads_everything_once(gw: StandaloneGateway, mode: str) -> None:
    bs, topic, group, count = _bootstrap(gw), unique("sh"), unique("sg"), 300
    create_topic(bs, topic, partitions=2)
    run_harness("produce", bootstrap=bs, topic=topic, count=count, partitions=2)
    events = run_harness("share", bootstrap=bs, topic=topic, group=group, mode=mode, count=count, reset="earliest")
    deliveries = only(events, "delivery")
    got = Counter((d["partition"], d["offset"]) for d in deliveries)
    assert len(got) == count and set(got.values()) == {1}
    assert {d["delivery_count"] for d in deliveries} == {1}
    assert sorted(d["value"] for d in deliveries) == sorted(f"v-{i}" for i in range(count))


@pytest.mark.compat(suite="share-groups", client="java-client")
def test_share_consumers_split_one_partition(gw: StandaloneGateway) -> None:
    bs, topic, group, count = _bootstrap(gw), unique("sh1"), unique("sg"), 1000
    create_topic(bs, topic, partitions=1)
    run_harness("produce", bootstrap=bs, topic=topic, count=count, partitions=1)
    # Explicit acknowledgement, committed after every poll: a closing consumer releases what it
    # was given but had not returned yet, which would be delivered again (implicit mode too).
    events = run_harness("share", bootstrap=bs, topic=topic, group=group, consumers=8, max_poll=20, count=count,
                         mode="explicit", reset="earliest")
    deliveries = only(events, "delivery")
    offsets = [d["offset"] for d in deliveries]
    # 8 consumers on one partition: disjoint (nothing delivered twice) and together everything.
    assert sorted(offsets) == list(range(count))
    assert len({d["consumer"] for d in deliveries}) >= 2
    described = run_harness("share-describe", bootstrap=bs, group=group)
    assert one(described, "described")["state"] in ("EMPTY", "Empty")
    assert {e["group"]: e["type"] for e in only(described, "listed")}.get(group) == "Share"


@pytest.mark.compat(suite="share-groups", client="java-client")
def test_share_bench_counts_no_duplicates(gw: StandaloneGateway) -> None:
    """bench/share_groups.py's consumers (implicit acknowledgement, 8 on one partition, time spent
    per record) deliver every record once. The run used to count records delivered again after
    it had ended: the consumer that completed it closed without acknowledging its last poll (in
    implicit mode that happens at the next poll), so the records came back to consumers still
    polling, which processed them before seeing the run was over (105-210 a run)."""
    bs, topic, group, count = _bootstrap(gw), unique("shb"), unique("sg"), 2000
    create_topic(bs, topic, partitions=1)
    run_harness("produce", bootstrap=bs, topic=topic, count=count, partitions=1, **{"batch.size": 1024})
    ev = one(run_harness("share-bench", bootstrap=bs, topic=topic, group=group, reset="earliest", consumers=8,
                         count=count, work_us=500, max_poll=50), "throughput")
    assert (ev["records"], ev["deliveries"], ev["duplicates"]) == (count, count, [])


@pytest.mark.compat(suite="share-groups", client="java-client")
def test_crashed_holders_records_come_back_with_their_count(gw: StandaloneGateway) -> None:
    bs, topic, group, count = _bootstrap(gw), unique("sh2"), unique("sg"), 100
    create_topic(bs, topic, partitions=1)
    run_harness("produce", bootstrap=bs, topic=topic, count=count, partitions=1)
    held = only(run_harness("share", bootstrap=bs, topic=topic, group=group, hold="true", max_poll=30,
                            reset="earliest"), "delivery")
    assert held and {d["delivery_count"] for d in held} == {1}
    # The holder died without a word: its records come back once their lock expires.
    events = run_harness("share", bootstrap=bs, topic=topic, group=group, mode="explicit", count=count)
    deliveries = only(events, "delivery")
    assert sorted(d["offset"] for d in deliveries) == list(range(count))
    held_offsets = {d["offset"] for d in held}
    for d in deliveries:
        assert d["delivery_count"] == (2 if d["offset"] in held_offsets else 1), d


@pytest.mark.compat(suite="share-groups", client="java-client")
@pytest.mark.parametrize("ack", ["release", "reject"])
def test_released_records_stop_at_the_delivery_limit_and_rejected_ones_at_once(gw: StandaloneGateway, ack: str) -> None:
    bs, topic, group, count = _bootstrap(gw), unique("sh3"), unique("sg"), 5
    create_topic(bs, topic, partitions=1)
    run_harness("produce", bootstrap=bs, topic=topic, count=count, partitions=1)
    rounds = LIMIT if ack == "release" else 1
    deliveries = only(run_harness("share", bootstrap=bs, topic=topic, group=group, mode="explicit", ack=ack,
                                  deliveries=count * rounds, reset="earliest"), "delivery")
    per_offset: dict[int, list[int]] = {}
    for d in deliveries:
        per_offset.setdefault(d["offset"], []).append(d["delivery_count"])
    assert per_offset == {o: list(range(1, rounds + 1)) for o in range(count)}
    # Archived: nobody gets them again.
    again = run_harness("share", bootstrap=bs, topic=topic, group=group, mode="explicit", timeout_ms=2500)
    assert only(again, "delivery") == []


@pytest.mark.compat(suite="share-groups", client="java-client")
def test_acks_and_counts_survive_a_killed_partition_owner(gw: StandaloneGateway) -> None:
    bs, topic, group, count = _bootstrap(gw), unique("sh4"), unique("sg"), 90
    create_topic(bs, topic, partitions=1)
    # Small batches: records are acquired a batch at a time, and each consumer takes only some.
    run_harness("produce", bootstrap=bs, topic=topic, count=count, partitions=1, **{"batch.size": 120})
    first = only(run_harness("share", bootstrap=bs, topic=topic, group=group, mode="explicit", count=20,
                             max_poll=10, reset="earliest"), "delivery")
    accepted = {d["offset"] for d in first}
    held = only(run_harness("share", bootstrap=bs, topic=topic, group=group, hold="true", max_poll=10), "delivery")
    assert held and not accepted & {d["offset"] for d in held}
    gw.kill()
    gw.start()
    rest = only(run_harness("share", bootstrap=bs, topic=topic, group=group, mode="explicit",
                            count=count - len(accepted)), "delivery")
    # Nothing acknowledged comes again; everything else does, each count one more per earlier delivery.
    assert sorted(d["offset"] for d in rest) == sorted(set(range(count)) - accepted)
    before = Counter(d["offset"] for d in first + held)
    for d in rest:
        assert d["delivery_count"] == before[d["offset"]] + 1, d


def _admin_json(gw: StandaloneGateway, *argv: str) -> Any:
    out = subprocess.run([sys.executable, "-m", "quire", "admin", "--data-dir", str(gw.data_dir), "--json", *argv],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return json.loads(out)


def _share_groups(bs: str, *args: str) -> str:
    return run_tool("kafka-share-groups", ["--bootstrap-server", bs, *args], timeout=90).stdout


def _table(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip()]


@pytest.mark.compat(suite="share-groups", client="kafka-share-groups")
def test_share_groups_tool_list_describe_reset_and_delete(gw: StandaloneGateway) -> None:
    bs, topic, group, count = _bootstrap(gw), unique("sh5"), unique("sg"), 100
    create_topic(bs, topic, partitions=2)
    run_harness("produce", bootstrap=bs, topic=topic, count=count, partitions=2)
    run_harness("share", bootstrap=bs, topic=topic, group=group, mode="explicit", count=count, reset="earliest")
    assert group in _share_groups(bs, "--list").split()
    rows = _table(_share_groups(bs, "--describe", "--group", group))
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
    assert sorted(rows[1:]) == [[group, topic, "0", "50", "0"], [group, topic, "1", "50", "0"]]
    state = _table(_share_groups(bs, "--describe", "--group", group, "--state"))
    assert state[1][0] == group and state[1][-2:] == ["Empty", "0"]
    # Quire's own admin reads the same from the store.
    listed = {d["group"]: d for d in _admin_json(gw, "groups", "list")}
    assert (listed[group]["type"], listed[group]["state"]) == ("share", "Empty")
    want = [(0, 50, 0, 0, 50), (1, 50, 0, 0, 50)]
    deadline = time.monotonic() + 30
    while True:  # the owner publishes the states a moment after the last change
        doc = _admin_json(gw, "groups", "describe", group)
        got = [(p["partition"], p["start_offset"], p["in_flight"], p["backlog"], p["log_end_offset"])
               for p in doc["partitions"]]
        if got == want or time.monotonic() > deadline:
            break
    assert got == want
    # Back to the start: the next consumer gets everything again, as first deliveries.
    reset = _table(_share_groups(bs, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                                 "--execute"))
    assert sorted(reset[1:]) == [[group, topic, "0", "0"], [group, topic, "1", "0"]]
    again = only(run_harness("share", bootstrap=bs, topic=topic, group=group, mode="explicit", count=count),
                 "delivery")
    assert len(again) == count and {d["delivery_count"] for d in again} == {1}
    assert "Successful" in _share_groups(bs, "--delete-offsets", "--group", group, "--topic", topic)
    assert "has no offset information" in _share_groups(bs, "--describe", "--group", group)
    assert "was successful" in _share_groups(bs, "--delete", "--group", group)
    assert group not in _share_groups(bs, "--list").split()


@pytest.mark.compat(suite="share-groups", client="kafka-console-share-consumer")
def test_console_share_consumer_with_group_config_from_kafka_configs(gw: StandaloneGateway) -> None:
    bs, topic, group, count = _bootstrap(gw), unique("sh6"), unique("sg"), 20
    create_topic(bs, topic, partitions=1)
    run_harness("produce", bootstrap=bs, topic=topic, count=count, partitions=1)
    run_tool("kafka-configs", ["--bootstrap-server", bs, "--entity-type", "groups", "--entity-name", group,
                               "--alter", "--add-config", "share.auto.offset.reset=earliest"], timeout=90)
    described = run_tool("kafka-configs", ["--bootstrap-server", bs, "--entity-type", "groups", "--entity-name",
                                           group, "--describe"], timeout=90).stdout
    assert "share.auto.offset.reset=earliest" in described
    out = run_tool("kafka-console-share-consumer", ["--bootstrap-server", bs, "--topic", topic, "--group", group,
                                                    "--max-messages", str(count), "--timeout-ms", "30000"],
                   timeout=120).stdout
    assert sorted(out.split()) == sorted(f"v-{i}" for i in range(count))


@pytest.mark.compat(suite="share-groups", client="java-client")
def test_redelivery_backoff_set_with_kafka_configs(gw: StandaloneGateway) -> None:
    """Quire's redelivery backoff, set with Kafka's own kafka-configs on the group: the Java
    consumer's RELEASEd record comes back with its count + 1, only after 1.5 s then 3 s."""
    bs, topic, group = _bootstrap(gw), unique("sh7"), unique("sg")
    create_topic(bs, topic, partitions=1)
    run_harness("produce", bootstrap=bs, topic=topic, count=1, partitions=1)
    run_tool("kafka-configs", ["--bootstrap-server", bs, "--entity-type", "groups", "--entity-name", group,
                               "--alter", "--add-config", "share.auto.offset.reset=earliest,"
                               "quire.share.redelivery.backoff.min.ms=1500,"
                               "quire.share.redelivery.backoff.multiplier=2.0"], timeout=90)
    described = run_tool("kafka-configs", ["--bootstrap-server", bs, "--entity-type", "groups", "--entity-name",
                                           group, "--describe"], timeout=90).stdout
    assert "quire.share.redelivery.backoff.min.ms=1500" in described
    started = time.monotonic()
    deliveries = only(run_harness("share", bootstrap=bs, topic=topic, group=group, mode="explicit", ack="release",
                                  deliveries=LIMIT, reset="earliest"), "delivery")
    assert [d["delivery_count"] for d in deliveries] == [1, 2, 3]
    assert time.monotonic() - started >= 1.5 + 3.0



def _key_shared_checks(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pulsar's Key_Shared, checked on one harness run's events (one stdout written under a lock:
    real order). A consumer holds what it was delivered until the "acking" (then finished) or
    "closing" (then returned) that ends its poll: the broker held it from before the one until
    after the other, so what is seen overlapping here did overlap there. No consumer gets a
    record of a key another one holds, and no record of a key comes while a lower one of the key
    is unfinished, unless that one is the same consumer's, in the same poll."""
    deliveries = only(events, "delivery")
    of_key: dict[str, set[int]] = {}
    for d in deliveries:
        of_key.setdefault(d["key"], set()).add(d["offset"])
    finished: set[int] = set()
    holding: dict[str, dict[int, str]] = {}  # consumer -> offset -> key
    for e in events:
        if e["event"] == "delivery":
            c, o, k = e["consumer"], e["offset"], e["key"]
            for other, held in holding.items():
                assert other == c or k not in held.values(), f"{k} delivered to {c} while {other} holds it: {e}"
            mine = holding.setdefault(c, {})
            early = [p for p in of_key[k] if p < o and p not in finished and p not in mine]
            assert not early, f"{k}@{o} delivered to {c} before {early} were finished: {e}"
            mine[o] = k
        elif e["event"] == "acking":
            finished |= holding.pop(e["consumer"], {}).keys()
        elif e["event"] == "closing":
            holding.pop(e["consumer"], None)
    return deliveries


@pytest.mark.compat(suite="share-groups", client="java-client")
def test_key_shared_consumers_never_share_a_key_and_keep_its_order(gw: StandaloneGateway) -> None:
    """quire.share.mode=key_shared (set by the consumers' own Admin): four consumers on one
    partition with 24 keys, one of which closes while holding records: nobody else gets a key
    while a consumer holds it, each key's records come in offset order, and the closed one's
    records come back to the others, before later ones of their keys, with their count + 1."""
    bs, topic, group, count = _bootstrap(gw), unique("shk"), unique("sg"), 600
    create_topic(bs, topic, partitions=1)
    run_harness("produce", bootstrap=bs, topic=topic, count=count, partitions=1, keys=24, **{"batch.size": 400})
    events = run_harness("share", bootstrap=bs, topic=topic, group=group, mode="explicit", consumers=4, count=count,
                         max_poll=20, work_ms=2, leave_after=2, reset="earliest", share_mode="key_shared")
    deliveries = _key_shared_checks(events)
    assert sorted({d["offset"] for d in deliveries}) == list(range(count))
    assert len({d["consumer"] for d in deliveries}) >= 2  # the keys are spread over the consumers
    [closing] = only(events, "closing")
    gone = closing["consumer"]
    at = events.index(closing)
    ended = [e for e in events[:at] if e["event"] in ("acking", "delivery") and e["consumer"] == gone]
    last_acking = max((i for i, e in enumerate(ended) if e["event"] == "acking"), default=-1)
    returned = {e["offset"] for e in ended[last_acking + 1:]}  # its last poll, never acknowledged
    assert returned
    again = [d for d in deliveries if d["offset"] in returned and d["delivery_count"] == 2]
    assert {d["offset"] for d in again} == returned and all(d["consumer"] != gone for d in again)


@pytest.mark.compat(suite="share-groups", client="java-client")
def test_key_shared_keys_of_a_crashed_consumer_wait_for_its_lock(gw: StandaloneGateway) -> None:
    """A key_shared consumer dies (JVM halted) holding records: the others get those keys only
    after its lock expired, starting with the held records (count 2), in offset order."""
    bs, topic, group, count = _bootstrap(gw), unique("shk2"), unique("sg"), 200
    create_topic(bs, topic, partitions=1)
    run_harness("produce", bootstrap=bs, topic=topic, count=count, partitions=1, keys=8, **{"batch.size": 200})
    launched_ms = time.time() * 1000
    held = only(run_harness("share", bootstrap=bs, topic=topic, group=group, hold="true", max_poll=12,
                            reset="earliest", share_mode="key_shared"), "delivery")
    assert held
    events = run_harness("share", bootstrap=bs, topic=topic, group=group, mode="explicit", consumers=3, count=count,
                         max_poll=10, work_ms=1)
    deliveries = _key_shared_checks(events)
    assert sorted({d["offset"] for d in deliveries}) == list(range(count))
    for key in {d["key"] for d in held}:
        was = sorted(d["offset"] for d in held if d["key"] == key)
        now = [d for d in deliveries if d["key"] == key][: len(was)]
        assert [(d["offset"], d["delivery_count"]) for d in now] == [(o, 2) for o in was], key
        # Not before the crashed holder's lock (taken after its launch) expired.
        assert now[0]["at"] >= launched_ms + LOCK_MS


@pytest.mark.compat(suite="share-groups", client="java-client")
def test_key_shared_order_survives_a_killed_partition_owner(gw: StandaloneGateway) -> None:
    """key_shared through a SIGKILL of the gateway while a crashed consumer holds records: the
    new owner knows no key and holds nothing, delivers nothing acknowledged again, and every
    key's remaining records in offset order with their counts."""
    bs, topic, group, count = _bootstrap(gw), unique("shk3"), unique("sg"), 120
    create_topic(bs, topic, partitions=1)
    run_harness("produce", bootstrap=bs, topic=topic, count=count, partitions=1, keys=4, **{"batch.size": 120})
    first = only(run_harness("share", bootstrap=bs, topic=topic, group=group, mode="explicit", count=20,
                             max_poll=10, reset="earliest", share_mode="key_shared"), "delivery")
    accepted = {d["offset"] for d in first}
    held = only(run_harness("share", bootstrap=bs, topic=topic, group=group, hold="true", max_poll=10), "delivery")
    assert held and not accepted & {d["offset"] for d in held}
    gw.kill()
    gw.start()
    events = run_harness("share", bootstrap=bs, topic=topic, group=group, mode="explicit", consumers=3,
                         count=count - len(accepted), max_poll=10, work_ms=1)
    rest = _key_shared_checks(events)
    assert sorted({d["offset"] for d in rest}) == sorted(set(range(count)) - accepted)
    before = Counter(d["offset"] for d in first + held)
    for d in rest:
        assert d["delivery_count"] == before[d["offset"]] + 1, d
