"""`quire admin groups` against a real `quire standalone` process and a real consumer group
(confluent-kafka): members, assignments, committed offsets, log-end offsets and lag, as JSON and
as tables, read while the gateway runs (its tail ledgers open, nothing fenced)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    build_records_batch,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from coordinator.group.stored import GroupLogReplay
from gateway.cluster.inspect import decode_assignment
from kafka_wire.api import encode_versioned, schema_class
from quire.admin import main as admin_main
from tests.coordinator.gateway_support import fast_group_env
from tests.support.gateway import StandaloneFactory, StandaloneGateway

ROOT = Path(__file__).resolve().parents[2]
TOPIC, GROUP = "adm-groups-t", "adm-groups-g"
PRODUCED = {0: 10, 1: 6}


def admin(capsys: pytest.CaptureFixture[str], gw: StandaloneGateway, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = admin_main(["--data-dir", str(gw.data_dir), *argv])
    return code, capsys.readouterr().out


def admin_json(capsys: pytest.CaptureFixture[str], gw: StandaloneGateway, *argv: str) -> Any:
    code, out = admin(capsys, gw, "--json", *argv)
    assert code == 0, out
    return json.loads(out)


def wait_for(what: str, check: Callable[[], Any], within: float = 15.0) -> Any:
    deadline = time.monotonic() + within
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def by_partition(doc: dict[str, Any]) -> dict[int, dict[str, Any]]:
    assert all(p["topic"] == TOPIC for p in doc["partitions"]), doc
    return {p["partition"]: p for p in doc["partitions"]}


def line_of(text: str, *cells: str) -> str:
    """The table line whose whitespace-separated cells start with `cells`."""
    for line in text.splitlines():
        if line.split()[: len(cells)] == list(cells):
            return line
    raise AssertionError(f"no line starting {cells} in:\n{text}")


def _offset(group: str, p: int, off: int | None) -> tuple[bytes, bytes | None]:
    key = encode_offset_key(OffsetCommitKey(group=group, topic="t", partition=p))
    if off is None:
        return key, None
    return key, encode_offset_value(OffsetCommitValue(offset=off, leader_epoch=0, metadata="", commit_timestamp=1))


def _group(group: str, members: list[MemberMetadata] | None) -> tuple[bytes, bytes | None]:
    key = encode_group_key(GroupMetadataKey(group=group))
    if members is None:
        return key, None
    return key, encode_group_value(GroupMetadataValue(protocol_type="consumer", generation=3, protocol="range",
                                                      leader=None, current_state_timestamp=1, members=members))


def test_replay_keeps_the_latest_records_and_honours_tombstones() -> None:
    cls = schema_class("ConsumerProtocolAssignment")
    blob = encode_versioned(cls(assigned_partitions=[cls.TopicPartition(topic="t", partitions=[2, 0])]), 1)
    member = MemberMetadata(member_id="m-1", group_instance_id=None, client_id="cid", client_host="/10.0.0.1",
                            rebalance_timeout=300, session_timeout=100, subscription=b"", assignment=blob)
    first = [_group("a", []), _offset("a", 0, 5), _offset("a", 1, 3), _group("b", []), _offset("c", 0, 9)]
    second = [
        _group("a", [member]),
        _offset("a", 0, 8),
        _offset("a", 1, None),  # offset deleted
        _group("b", None),  # group deleted, with no offsets left
        _group("d", []),
        (b"\x00\x05future-key", b"\x00\x00"),  # a newer coordinator's record type: skipped
    ]
    replay = GroupLogReplay(2, skip_unreadable=True)
    for batch in (build_records_batch(first), build_records_batch(second)):
        replay.apply(batch)
    got = replay.groups()
    assert sorted(got) == ["a", "c", "d"]
    a = got["a"]
    assert (
        a.shard == 2
        and a.state == "Stable"
        and {tp: v.offset for tp, v in a.offsets.items()} == {("t", 0): 8}
    )
    assert a.metadata is not None and [m.client_id for m in a.metadata.members] == ["cid"]
    assert (got["c"].state, got["c"].metadata, got["c"].offsets[("t", 0)].offset) == ("Empty", None, 9)
    assert got["d"].state == "Empty" and got["d"].offsets == {}
    assert decode_assignment(blob) == [{"topic": "t", "partitions": [0, 2]}]
    assert decode_assignment(b"") is None and decode_assignment(b"\x00\x00\x00") is None


def test_admin_groups_lists_members_offsets_and_lag(
    standalone_factory: StandaloneFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    with fast_group_env():
        gw = standalone_factory()
    # No offsets topic yet: no groups, and an unknown group is an error.
    assert admin_json(capsys, gw, "groups", "list") == []
    assert admin(capsys, gw, "groups", "describe", GROUP)[0] == 1

    kadmin = AdminClient({"bootstrap.servers": gw.bootstrap})
    kadmin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": gw.bootstrap, "linger.ms": 5})
    for p, n in PRODUCED.items():
        for i in range(n):
            producer.produce(TOPIC, value=f"{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": gw.bootstrap,
            "group.id": GROUP,
            "client.id": "adm-client",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range",
        }
    )
    try:
        consumer.subscribe([TOPIC])
        consumed: dict[int, int] = {0: 0, 1: 0}
        deadline = time.monotonic() + 30
        while sum(consumed.values()) < sum(PRODUCED.values()) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                consumed[msg.partition()] += 1
        assert consumed == PRODUCED
        # Commit part of what was consumed: 7 of partition 0, 2 of partition 1.
        consumer.commit(
            offsets=[TopicPartition(TOPIC, 0, 7), TopicPartition(TOPIC, 1, 2)], asynchronous=False
        )

        node = admin_json(capsys, gw, "gateways", "list")[0]
        listed = admin_json(capsys, gw, "groups", "list")
        assert [g["group"] for g in listed] == [GROUP]
        g = listed[0]
        assert (g["state"], g["member_count"], g["protocol_type"], g["protocol"]) == (
            "Stable",
            1,
            "consumer",
            "range",
        )
        assert g["coordinator"] == node["node_id"] and g["coordinator_address"] == node["address"]
        assert 0 <= g["shard"] < 4 and g["generation"] >= 1

        doc = admin_json(capsys, gw, "groups", "describe", GROUP)
        assert doc["state"] == "Stable" and doc["coordinator"] == node["node_id"]
        [member] = doc["members"]
        assert member["client_id"] == "adm-client" and member["client_host"] == "/127.0.0.1"
        assert member["assignment"] == [{"topic": TOPIC, "partitions": [0, 1]}]
        parts = by_partition(doc)
        assert sorted(parts) == [0, 1]
        for p, (committed, end) in {0: (7, 10), 1: (2, 6)}.items():
            row = parts[p]
            assert (row["committed_offset"], row["log_end_offset"], row["lag"]) == (
                committed,
                end,
                end - committed,
            )
            assert row["member_id"] == member["member_id"] and row["client_id"] == "adm-client"
        assert doc["total_lag"] == 3 + 4

        # The coordinator publishes the offsets (batched) and the partitions' owner moves the
        # group's durable cursors after them.
        def cursors_follow() -> dict[str, Any] | None:
            d = admin_json(capsys, gw, "groups", "describe", GROUP)
            rows = by_partition(d)
            ok = all(
                rows[p]["published_offset"] == o and rows[p]["durable_cursor"] for p, o in ((0, 7), (1, 2))
            )
            return d if ok else None

        wait_for("published offsets and durable cursors", cursors_follow)

        code, text = admin(capsys, gw, "groups", "describe", GROUP)
        assert code == 0
        assert f"Group: {GROUP}  state: Stable  protocol: consumer/range" in text
        assert "total lag: 7" in text
        assert line_of(text, TOPIC, "0").split()[:7] == [TOPIC, "0", "7", "10", "3", "7", "yes"]
        assert line_of(text, TOPIC, "1").split()[:7] == [TOPIC, "1", "2", "6", "4", "2", "yes"]
        assert f"{TOPIC}:0,1" in line_of(text, member["member_id"])
        code, text = admin(capsys, gw, "groups", "list")
        assert code == 0
        assert line_of(text, GROUP).split()[:4] == [GROUP, "Stable", "1", "consumer/range"]

        # More data and commits: everything of partition 1 consumed, then the member leaves.
        for i in range(3):
            producer.produce(TOPIC, value=f"0-late-{i}".encode(), partition=0)
        assert producer.flush(30) == 0
        consumer.commit(offsets=[TopicPartition(TOPIC, 1, 6)], asynchronous=False)
    finally:
        consumer.close()

    def empty() -> dict[str, Any] | None:
        d = admin_json(capsys, gw, "groups", "describe", GROUP)
        return d if d["state"] == "Empty" else None

    doc = wait_for("the group to be empty", empty)
    assert doc["members"] == [] and doc["member_count"] == 0
    parts = by_partition(doc)
    assert (parts[0]["committed_offset"], parts[0]["log_end_offset"], parts[0]["lag"]) == (7, 13, 6)
    assert (parts[1]["committed_offset"], parts[1]["log_end_offset"], parts[1]["lag"]) == (6, 6, 0)
    assert parts[0]["member_id"] is None

    # Once through the real command line (options after the subcommand).
    proc = subprocess.run(
        [sys.executable, "-m", "quire", "admin", "groups", "list", "--data-dir", str(gw.data_dir), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    [g] = json.loads(proc.stdout)
    assert (g["group"], g["state"], g["member_count"]) == (GROUP, "Empty", 0)
