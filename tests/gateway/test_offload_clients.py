"""Tiered storage through a real standalone: a topic with remote.storage.enable is produced
across ledger rollovers, offloaded (`quire admin offload trigger`) to a directory or SeaweedFS
S3 with its bookie copies deleted, and read back byte-identical by unchanged clients;
ListOffsets by timestamp, EARLIEST_LOCAL and LATEST_TIERED answer from the tiered ledgers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTP

from kafka_wire.messages.list_offsets import ListOffsetsRequest
from tests.gateway.test_produce_clients import confluent_consume
from tests.gateway.test_produce_raw import Raw, create_topic
from tests.support.gateway import ROOT, StandaloneFactory, _env

pytestmark = pytest.mark.slow
T0 = 1_700_000_000_000
N = 600


def admin(data_dir: Any, *argv: str) -> Any:
    proc = subprocess.run(
        [sys.executable, "-m", "quire", "admin", "--json", "--data-dir", str(data_dir), *argv],
        capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(proc.stdout)


def list_offset(bs: str, topic: str, ts: int) -> tuple[int, int]:
    raw = Raw(bs)
    try:
        part = ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=ts)
        req = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[part])])
        p = raw.call(req, 9).topics[0].partitions[0]
        assert p.error_code == 0
        return p.offset, p.timestamp
    finally:
        raw.sock.close()


@pytest.mark.parametrize("kind", ["fs", "s3"])
def test_clients_read_offloaded_topic_byte_identical(
    standalone_factory: StandaloneFactory, request: pytest.FixtureRequest, kind: str
) -> None:
    args = ["--offload-deletion-lag-ms", "0"]
    if kind == "s3":
        sw = request.getfixturevalue("seaweed")
        args += ["--offload-driver", "s3", "--offload-s3-endpoint", sw.endpoint, "--offload-s3-bucket",
                 sw.new_bucket(), "--offload-s3-access-key", sw.access_key, "--offload-s3-secret-key", sw.secret_key]
    gw = standalone_factory(extra_args=args)
    bs = gw.bootstrap
    topic = "tiered"
    create_topic(bs, topic, **{"remote.storage.enable": "true", "local.retention.bytes": "-1",
                               "local.retention.ms": "-1", "segment.bytes": str(1 << 20)})
    values = [os.urandom(8000 + i % 900) for i in range(N)]  # ~5 MB: several 1 MiB ledgers
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.num.messages": 10, "acks": "all"})
    for i, v in enumerate(values):
        p.produce(topic, value=v, key=b"%d" % i, timestamp=T0 + 1000 * i, partition=0)
    assert p.flush(60) == 0
    # nothing tiered yet (the policy's rules are off): LATEST_TIERED answers -1
    assert list_offset(bs, topic, -5)[0] == -1
    status = admin(gw.data_dir, "offload", "trigger", topic)
    assert status[0]["offloaded_ledgers"] >= 3 and status[0]["offloaded_bytes"] > 3 << 20
    desc = admin(gw.data_dir, "topics", "describe", topic)
    tiered = [lg for lg in desc["partitions"][0]["ledgers"] if "offload" in lg]
    assert tiered and all(lg["offload"]["bookie_deleted"] and lg["state"] == "offloaded" for lg in tiered)
    # EARLIEST_LOCAL: the first offset still on bookies; LATEST_TIERED: the last one offloaded
    local, _ = list_offset(bs, topic, -4)
    last_tiered, _ = list_offset(bs, topic, -5)
    assert local == tiered[-1]["next_offset"] == last_tiered + 1 and 0 < local <= N
    assert list_offset(bs, topic, -2)[0] == 0
    # by timestamp, inside an offloaded ledger
    assert list_offset(bs, topic, T0 + 1000 * 7 + 1) == (8, T0 + 8000)
    # consumers from offset 0: byte-identical, though no bookie holds the offloaded ledgers
    got = confluent_consume(bs, topic, N, start=0)
    assert [m.value() for m in got] == values
    kc = KafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False, fetch_max_bytes=1 << 20)
    try:
        tp = KpTP(topic, 0)
        kc.assign([tp])
        kc.seek(tp, 0)
        seen: list[bytes] = []
        while len(seen) < N:
            batch = kc.poll(timeout_ms=10_000)
            assert batch, f"kafka-python stalled at {len(seen)}"
            seen += [r.value for r in batch.get(tp, [])]
        assert seen == values
        assert kc.offsets_for_times({tp: T0 + 1000 * 3})[tp].offset == 3
    finally:
        kc.close()
    # nothing orphaned
    assert admin(gw.data_dir, "offload", "cleanup", "--margin-ms", "0")["deleted"] == []
