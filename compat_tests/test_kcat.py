"""kcat (Debian's, librdkafka inside) against Quire, unchanged: produce with keys, headers and
compression, consume with offsets and format strings, metadata (-L) and group consumption (-G)."""

from __future__ import annotations

import json
import shutil
import time
from typing import Any

import pytest

from compat_tests.support.clients import create_topic, run, unique
from compat_tests.support.targets import Target

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (compat_tests/install.sh)")
BOTH = pytest.mark.parametrize("target", ["standalone", "cluster"], indirect=True)


def kcat(bootstrap: str, *args: str, input: bytes | None = None, timeout: float = 60.0) -> str:
    return run(["kcat", "-b", bootstrap, *args], input=input, timeout=timeout).stdout.decode()


def consume_json(bootstrap: str, topic: str, *args: str) -> list[dict[str, Any]]:
    out = kcat(bootstrap, "-C", "-t", topic, "-e", "-J", "-q", *args)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def produce_lines(bootstrap: str, topic: str, partition: int, lines: list[str], *args: str) -> None:
    kcat(bootstrap, "-P", "-t", topic, "-p", str(partition), "-K:", *args, input="".join(f"{x}\n" for x in lines).encode())


@pytest.mark.compat(suite="produce-consume", client="kcat")
@BOTH
def test_keys_headers_order_and_offsets(target: Target) -> None:
    topic = unique("kcat-kv")
    create_topic(target.bootstrap, topic, partitions=3)
    for p in range(3):
        produce_lines(target.bootstrap, topic, p, [f"k{p}-{i}:v{p}-{i}" for i in range(20)],
                      "-H", "trace=abc", "-H", f"part=p{p}")
    got = consume_json(target.bootstrap, topic, "-o", "beginning")
    assert len(got) == 60
    for p in range(3):
        rows = [m for m in got if m["partition"] == p]
        assert [m["offset"] for m in rows] == list(range(20))
        assert [m["key"] for m in rows] == [f"k{p}-{i}" for i in range(20)]
        assert [m["payload"] for m in rows] == [f"v{p}-{i}" for i in range(20)]
        assert all(m["headers"] == ["trace", "abc", "part", f"p{p}"] for m in rows)
        assert all(m["topic"] == topic and m["tstype"] == "create" and m["ts"] > 0 for m in rows)


@pytest.mark.compat(suite="produce-consume", client="kcat")
def test_offsets_and_format_strings(target: Target) -> None:
    topic = unique("kcat-fmt")
    create_topic(target.bootstrap, topic, partitions=2)
    produce_lines(target.bootstrap, topic, 1, [f"key{i}:value {i}" for i in range(10)], "-H", "h=1")
    fmt = "%t|%p|%o|%k|%s|%S|%h\\n"
    # From an absolute offset, a count; then from the end backwards (-o -3).
    out = kcat(target.bootstrap, "-C", "-t", topic, "-p", "1", "-o", "4", "-c", "3", "-f", fmt)
    assert out.splitlines() == [f"{topic}|1|{i}|key{i}|value {i}|{len(f'value {i}')}|h=1" for i in (4, 5, 6)]
    out = kcat(target.bootstrap, "-C", "-t", topic, "-p", "1", "-o", "-3", "-e", "-q", "-f", "%o:%s\\n")
    assert out.splitlines() == [f"{i}:value {i}" for i in (7, 8, 9)]
    # The untouched partition is empty: -e exits at once with nothing.
    assert kcat(target.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q") == ""


@pytest.mark.compat(suite="produce-consume", client="kcat")
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_produce(target: Target, codec: str) -> None:
    topic = unique(f"kcat-{codec}")
    create_topic(target.bootstrap, topic)
    values = [f"{codec}-{i}-" + "x" * (i * 7) for i in range(50)]
    produce_lines(target.bootstrap, topic, 0, [f"{i}:{v}" for i, v in enumerate(values)], "-z", codec)
    got = consume_json(target.bootstrap, topic, "-o", "beginning")
    assert [(m["offset"], m["key"], m["payload"]) for m in got] == [(i, str(i), v) for i, v in enumerate(values)]


@pytest.mark.compat(suite="metadata", client="kcat")
@BOTH
def test_metadata_list(target: Target) -> None:
    topic = unique("kcat-meta")
    create_topic(target.bootstrap, topic, partitions=4)
    # Leadership of a new topic's partitions may take a moment to show (as on Kafka).
    deadline = time.monotonic() + 15
    while True:
        md = json.loads(kcat(target.bootstrap, "-L", "-J"))
        mine = [t for t in md["topics"] if t["topic"] == topic]
        if (mine and all(p["leader"] >= 0 for p in mine[0]["partitions"])) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    broker_ids = {b["id"] for b in md["brokers"]}
    expected_brokers = len(target.bootstrap.split(","))
    assert len(broker_ids) == expected_brokers if target.kind != "external" else broker_ids
    assert all(b["name"].count(":") == 1 for b in md["brokers"])
    assert md["controllerid"] in broker_ids
    (t,) = [t for t in md["topics"] if t["topic"] == topic]
    assert "error" not in t
    assert sorted(p["partition"] for p in t["partitions"]) == [0, 1, 2, 3]
    for p in t["partitions"]:
        assert p["leader"] in broker_ids, t
        assert {r["id"] for r in p["isrs"]} <= {r["id"] for r in p["replicas"]}
    # A single topic query.
    one = json.loads(kcat(target.bootstrap, "-L", "-J", "-t", topic))
    assert [t["topic"] for t in one["topics"]] == [topic]


@pytest.mark.compat(suite="groups", client="kcat")
@BOTH
def test_group_consumption_commits_offsets(target: Target) -> None:
    topic, group = unique("kcat-grp"), unique("kcat-g")
    create_topic(target.bootstrap, topic, partitions=3)
    for p in range(3):
        produce_lines(target.bootstrap, topic, p, [f"a{p}:{p}-{i}" for i in range(5)])

    def group_consume() -> list[dict[str, Any]]:
        # Not -o: in -G mode it overrides the committed offsets on every assignment.
        out = kcat(target.bootstrap, "-G", group, topic, "-X", "auto.offset.reset=earliest", "-e", "-J", "-q",
                   timeout=90)
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    first = group_consume()
    assert sorted((m["partition"], m["offset"]) for m in first) == [(p, o) for p in range(3) for o in range(5)]
    for p in range(3):
        assert [m["payload"] for m in first if m["partition"] == p] == [f"{p}-{i}" for i in range(5)]
    # The group committed its position on close: a second run sees only the new messages.
    for p in range(3):
        produce_lines(target.bootstrap, topic, p, [f"b{p}:{p}-new"])
    second = group_consume()
    assert sorted((m["partition"], m["offset"], m["payload"]) for m in second) == [
        (p, 5, f"{p}-new") for p in range(3)
    ]
