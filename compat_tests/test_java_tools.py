"""Apache Kafka's own command-line tools (from the Maven jars, run by main class) against Quire,
unchanged: kafka-topics, kafka-configs, console producer/consumer, kafka-consumer-groups, the
perf tests, and VerifiableProducer/VerifiableConsumer proving no acknowledged message is lost."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections import Counter, defaultdict
from typing import Any

import pytest

from compat_tests.support import kafka_dist
from compat_tests.support.clients import unique
from compat_tests.support.targets import Target

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="java is not installed")
BOTH = pytest.mark.parametrize("target", ["standalone", "cluster"], indirect=True)


@pytest.fixture(scope="module", autouse=True)
def _kafka_jars() -> None:
    kafka_dist.ensure_installed()


def tool(target: Target, name: str, *args: str, input: str | None = None, timeout: float = 120.0) -> str:
    """Run a tool with --bootstrap-server; a non-zero exit fails the test with its output."""
    return kafka_dist.run_tool(name, ["--bootstrap-server", target.bootstrap, *args], input=input,
                               timeout=timeout).stdout


def tool_fails(target: Target, name: str, *args: str) -> str:
    """Run a tool that must fail; returns its stdout + stderr."""
    proc = kafka_dist.run_tool(name, ["--bootstrap-server", target.bootstrap, *args], check=False)
    assert proc.returncode != 0, f"{name} {args} unexpectedly succeeded:\n{proc.stdout}"
    return proc.stdout + proc.stderr


def describe_partitions(target: Target, topic: str) -> dict[int, int]:
    """kafka-topics --describe: partition -> leader id."""
    out = tool(target, "kafka-topics", "--describe", "--topic", topic)
    header = re.search(rf"Topic: {re.escape(topic)}\s+TopicId: \S+\s+PartitionCount: (\d+)", out)
    assert header, out
    rows = {int(p): int(leader) for p, leader in re.findall(r"Partition: (\d+)\s+Leader: (-?\d+)", out)}
    assert len(rows) == int(header.group(1)), out
    return rows


def group_offsets(target: Target, group: str) -> dict[int, tuple[int, int]]:
    """kafka-consumer-groups --describe: partition -> (current offset, log end offset)."""
    out = tool(target, "kafka-consumer-groups", "--describe", "--group", group)
    rows: dict[int, tuple[int, int]] = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 5 and cols[0] == group and cols[2].isdigit():
            rows[int(cols[2])] = (int(cols[3]) if cols[3] != "-" else -1, int(cols[4]))
    return rows


def create(target: Target, topic: str, partitions: int, *extra: str) -> None:
    out = tool(target, "kafka-topics", "--create", "--topic", topic, "--partitions", str(partitions),
               "--replication-factor", "1", *extra)
    assert f"Created topic {topic}." in out
    await_leaders(target, topic, partitions)


def await_leaders(target: Target, topic: str, partitions: int, within: float = 30.0) -> None:
    """As on a multi-broker Kafka, a new topic (or partition) reaches every broker's metadata a
    moment after the admin call returns: wait until each partition has a leader."""
    deadline = time.monotonic() + within
    while True:
        proc = kafka_dist.run_tool("kafka-topics", ["--bootstrap-server", target.bootstrap, "--describe",
                                                    "--topic", topic], check=False)
        leaders = re.findall(r"Partition: \d+\s+Leader: (-?\d+)", proc.stdout)
        if proc.returncode == 0 and len(leaders) == partitions and all(int(x) >= 0 for x in leaders):
            return
        assert time.monotonic() < deadline, f"{topic}: no leader for every partition within {within} s:\n{proc.stdout}"
        time.sleep(0.3)


@pytest.mark.compat(suite="admin", client="java-tools")
@BOTH
def test_kafka_topics_lifecycle(target: Target) -> None:
    topic = unique("jt-topics")
    create(target, topic, 3, "--config", "retention.ms=7200000")
    assert topic in tool(target, "kafka-topics", "--list").split()
    leaders = describe_partitions(target, topic)
    assert sorted(leaders) == [0, 1, 2]
    assert all(leader >= 0 for leader in leaders.values())
    tool(target, "kafka-topics", "--alter", "--topic", topic, "--partitions", "5")
    await_leaders(target, topic, 5)
    assert sorted(describe_partitions(target, topic)) == [0, 1, 2, 3, 4]
    # Shrinking and re-creating are refused, as by Kafka.
    assert "already exists" in tool_fails(target, "kafka-topics", "--create", "--topic", topic,
                                          "--partitions", "1")
    assert "InvalidPartitionsException" in tool_fails(target, "kafka-topics", "--alter", "--topic", topic,
                                                      "--partitions", "2")
    tool(target, "kafka-topics", "--delete", "--topic", topic)
    assert topic not in tool(target, "kafka-topics", "--list").split()


@pytest.mark.compat(suite="admin", client="java-tools")
def test_kafka_configs_group_configs(target: Target) -> None:
    """Kafka 4.4's group configs Quire stores without acting on (streams.*, share.assignment.*,
    *.assignor.offload.enable) through kafka-configs: set, described with their broker synonyms,
    refused past the broker's limits with Kafka's message."""
    group = unique("jt-group-configs")
    cfg = ["--entity-type", "groups", "--entity-name", group]
    out = tool(target, "kafka-configs", "--alter", *cfg, "--add-config",
               "streams.num.standby.replicas=1,share.assignment.interval.ms=2000,consumer.assignor.offload.enable=false")
    assert f"Completed updating config for group {group}." in out
    described = tool(target, "kafka-configs", "--describe", *cfg)
    dynamic = dict(re.findall(r"^\s+([a-z.]+)=(\S*) sensitive=false synonyms=\{DYNAMIC_GROUP_CONFIG", described, re.M))
    assert dynamic == {"streams.num.standby.replicas": "1", "share.assignment.interval.ms": "2000",
                       "consumer.assignor.offload.enable": "false"}, described
    every = tool(target, "kafka-configs", "--describe", "--all", *cfg)
    assert re.search(r"^\s+streams\.session\.timeout\.ms=45000 sensitive=false "
                     r"synonyms=\{DEFAULT_CONFIG:group\.streams\.session\.timeout\.ms=45000\}", every, re.M), every
    assert re.search(r"^\s+streams\.num\.standby\.replicas=1 sensitive=false synonyms=\{DYNAMIC_GROUP_CONFIG:"
                     r"streams\.num\.standby\.replicas=1, DEFAULT_CONFIG:group\.streams\.num\.standby\.replicas=0\}",
                     every, re.M), every
    err = tool_fails(target, "kafka-configs", "--alter", *cfg, "--add-config", "streams.num.standby.replicas=3")
    assert "streams.num.standby.replicas must be less than or equal to 2" in err, err


@pytest.mark.compat(suite="admin", client="java-tools")
def test_kafka_configs_describe_alter(target: Target) -> None:
    topic = unique("jt-configs")
    create(target, topic, 1, "--config", "retention.ms=7200000")
    cfg = ["--entity-type", "topics", "--entity-name", topic]

    def dynamic() -> dict[str, str]:
        out = tool(target, "kafka-configs", "--describe", *cfg)
        assert f"Dynamic configs for topic {topic} are:" in out
        return dict(re.findall(r"^\s+([a-z.]+)=(\S*) sensitive=false synonyms=\{DYNAMIC_TOPIC_CONFIG", out, re.M))

    assert dynamic() == {"retention.ms": "7200000"}
    out = tool(target, "kafka-configs", "--alter", *cfg, "--add-config",
               "retention.ms=3600000,max.message.bytes=500000,cleanup.policy=delete")
    assert f"Completed updating config for topic {topic}." in out
    assert dynamic() == {"retention.ms": "3600000", "max.message.bytes": "500000", "cleanup.policy": "delete"}
    tool(target, "kafka-configs", "--alter", *cfg, "--delete-config", "max.message.bytes")
    assert dynamic() == {"retention.ms": "3600000", "cleanup.policy": "delete"}
    # --all lists the defaults too, each with its static synonym.
    every = tool(target, "kafka-configs", "--describe", "--all", *cfg)
    assert re.search(r"^\s+segment\.bytes=\d+ sensitive=false", every, re.M), every
    assert re.search(r"^\s+max\.message\.bytes=\d+ sensitive=false synonyms=\{DEFAULT_CONFIG:message\.max\.bytes=",
                     every, re.M), every
    assert "InvalidConfigurationException" in tool_fails(target, "kafka-configs", "--alter", *cfg,
                                                         "--add-config", "retention.ms=not-a-number")


CONSOLE_PROPS = ["--property", "print.key=true", "--property", "print.partition=true",
                 "--property", "print.offset=true", "--property", "key.separator=|"]


def console_consume(target: Target, topic: str, count: int, *extra: str) -> list[tuple[int, int, str, str]]:
    """(partition, offset, key, value) rows from the console consumer, --from-beginning."""
    out = tool(target, "kafka-console-consumer", "--topic", topic, "--from-beginning", "--max-messages",
               str(count), "--timeout-ms", "30000", *CONSOLE_PROPS, *extra, timeout=90)
    rows = []
    for line in out.splitlines():
        m = re.fullmatch(r"Partition:(\d+)\|Offset:(\d+)\|([^|]*)\|(.*)", line)
        if m:
            rows.append((int(m[1]), int(m[2]), m[3], m[4]))
    assert len(rows) == count, out
    return rows


def console_produce(target: Target, topic: str, lines: list[str]) -> None:
    tool(target, "kafka-console-producer", "--topic", topic, "--property", "parse.key=true",
         "--property", "key.separator=:", "--producer-property", "acks=all",
         input="".join(f"{line}\n" for line in lines))


@pytest.mark.compat(suite="produce-consume", client="java-tools")
@BOTH
def test_console_producer_consumer(target: Target) -> None:
    topic = unique("jt-console")
    create(target, topic, 3)
    lines = [f"key-{i % 7}:value {i}" for i in range(70)]
    console_produce(target, topic, lines)
    rows = console_consume(target, topic, 70)
    # Same key, same partition; per key, production order; offsets dense from 0 per partition.
    by_key: dict[str, set[int]] = defaultdict(set)
    for p, _, k, _ in rows:
        by_key[k].add(p)
    assert sorted(by_key) == [f"key-{i}" for i in range(7)]
    assert all(len(ps) == 1 for ps in by_key.values()), by_key
    for p in {r[0] for r in rows}:
        mine = sorted((o, k, v) for q, o, k, v in rows if q == p)
        assert [o for o, _, _ in mine] == list(range(len(mine)))
        produced_at = [lines.index(f"{k}:{v}") for _, k, v in mine]
        assert produced_at == sorted(produced_at)
    assert sorted(f"{k}:{v}" for _, _, k, v in rows) == sorted(lines)


@pytest.mark.compat(suite="groups", client="java-tools")
def test_console_consumer_group_and_reset_offsets(target: Target) -> None:
    topic, group = unique("jt-grp"), unique("jt-g")
    create(target, topic, 2)
    # Keys k0..k5 hash (murmur2) to both partitions.
    console_produce(target, topic, [f"k{i % 6}:m{i}" for i in range(40)])
    ends = Counter(p for p, *_ in console_consume(target, topic, 40))
    assert sorted(ends) == [0, 1]
    rows = console_consume(target, topic, 40, "--group", group)
    assert sorted((p, o) for p, o, *_ in rows) == sorted((p, o) for p in ends for o in range(ends[p]))
    # The group committed everything it read; it is now empty (the consumer left).
    assert group_offsets(target, group) == {p: (n, n) for p, n in ends.items()}
    assert group in tool(target, "kafka-consumer-groups", "--list").split()
    state = tool(target, "kafka-consumer-groups", "--describe", "--group", group, "--state")
    assert re.search(rf"{re.escape(group)}\s+\S+\s+\S+\s+\S+\s+Empty\s+0", state), state

    reset = tool(target, "kafka-consumer-groups", "--reset-offsets", "--group", group, "--topic", topic,
                 "--to-earliest", "--execute")
    assert all(re.search(rf"{re.escape(group)}\s+{re.escape(topic)}\s+{p}\s+0\b", reset) for p in ends), reset
    assert group_offsets(target, group) == {p: (0, n) for p, n in ends.items()}
    tool(target, "kafka-consumer-groups", "--reset-offsets", "--group", group, "--topic", f"{topic}:0",
         "--to-offset", "5", "--execute")
    assert group_offsets(target, group)[0] == (5, ends[0])
    # The group resumes from the reset positions: partition 0 from offset 5, the other from 0.
    again = console_consume(target, topic, 40 - 5, "--group", group)
    assert sorted((p, o) for p, o, *_ in again) == sorted(
        (p, o) for p in ends for o in range(5 if p == 0 else 0, ends[p]))


@pytest.mark.compat(suite="perf-tools", client="java-tools")
def test_producer_and_consumer_perf_test(target: Target) -> None:
    topic = unique("jt-perf")
    create(target, topic, 2)
    out = kafka_dist.run_tool("kafka-producer-perf-test", [
        "--topic", topic, "--num-records", "3000", "--record-size", "1024", "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={target.bootstrap}", "acks=all", "linger.ms=5"]).stdout
    assert re.search(r"^3000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\)", out, re.M), out
    out = tool(target, "kafka-consumer-perf-test", "--topic", topic, "--messages", "3000", "--timeout", "30000")
    header, values = out.strip().splitlines()[-2:]
    stats = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in values.split(",")]))
    assert int(stats["data.consumed.in.nMsg"]) == 3000, out
    assert abs(float(stats["data.consumed.in.MB"]) - 3000 * 1024 / 2**20) < 0.01, out
    offsets = kafka_dist.run_tool("kafka-get-offsets", ["--bootstrap-server", target.bootstrap,
                                                        "--topic", topic]).stdout
    assert sum(int(line.rsplit(":", 1)[1]) for line in offsets.split()) == 3000, offsets


def json_events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.mark.compat(suite="verifiable", client="java-tools")
@BOTH
def test_verifiable_producer_and_consumer(target: Target) -> None:
    topic, group = unique("jt-verify"), unique("jt-vg")
    create(target, topic, 3)
    produced = json_events(tool(target, "kafka-verifiable-producer", "--topic", topic, "--max-messages", "600",
                                "--acks", "-1", "--value-prefix", "9"))
    acked = {(e["partition"], e["offset"]): e["value"] for e in produced if e["name"] == "producer_send_success"}
    (summary,) = [e for e in produced if e["name"] == "tool_data"]
    assert summary["sent"] == summary["acked"] == 600 == len(acked)
    assert not [e for e in produced if e["name"] == "producer_send_error"]
    assert sorted(acked.values()) == sorted(f"9.{i}" for i in range(600))
    for p in {p for p, _ in acked}:
        assert sorted(o for q, o in acked if q == p) == list(range(sum(1 for q, _ in acked if q == p)))

    consumed = json_events(tool(target, "kafka-verifiable-consumer", "--topic", topic, "--group-id", group,
                                "--max-messages", "600", "--reset-policy", "earliest", timeout=120))
    names = [e["name"] for e in consumed]
    # The 4.3 tool's shutdown hook prints shutdown_requested after shutdown_complete (the same
    # against Apache Kafka 4.4).
    assert names[0] == "startup_complete" and names[-2:] == ["shutdown_complete", "shutdown_requested"], names
    assert "partitions_assigned" in names
    seen: Counter[tuple[int, int]] = Counter()
    for e in consumed:
        if e["name"] == "records_consumed":
            assert e["count"] == sum(p["count"] for p in e["partitions"])
            for p in e["partitions"]:
                assert p["maxOffset"] - p["minOffset"] + 1 == p["count"], e
                seen.update((p["partition"], o) for o in range(p["minOffset"], p["maxOffset"] + 1))
    # Every acknowledged message was consumed, exactly once.
    assert set(seen) == set(acked) and max(seen.values()) == 1
    commits = [e for e in consumed if e["name"] == "offsets_committed"]
    assert commits and all(c["success"] for c in commits), commits
    final: dict[int, int] = {}
    for c in commits:
        final.update({o["partition"]: o["offset"] for o in c["offsets"]})
    ends = Counter(p for p, _ in acked)
    assert final == dict(ends)
