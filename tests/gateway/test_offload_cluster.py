"""The issue's tiered-storage test on a cluster of real processes: ZooKeeper, bookie processes and
`quire gateway` processes (E=WQ=AQ=2). A topic with remote.storage.enable is produced across
ledger rollovers onto two "old" bookies and offloaded (to a directory or SeaweedFS S3) with its
bookie copies deleted. Two fresh bookies join, the owning gateway is SIGKILLed and its successor
closes the old tail, which is offloaded too; then both old bookies, which held every offloaded
ledger, are SIGKILLed, and more is produced onto the fresh ones. Consumers from offset 0
(confluent-kafka, kafka-python, the Java client through the compat harness) read everything
byte-identical, and ListOffsets by timestamp answers inside offloaded ledgers.

The suite produces 32 MB; QUIRE_OFFLOAD_TEST_MB=200 runs the issue's 200 MB variant."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTP

from compat_tests.support import kafka_dist
from compat_tests.support.java_harness import one, run_harness
from gateway.cluster import inspect
from store.meta.factory import open_meta
from tests.gateway.test_offload_clients import list_offset
from tests.support.cluster import ROOT, GatewayProc
from tests.support.wait import eventually

MB = int(os.environ.get("QUIRE_OFFLOAD_TEST_MB", "32"))
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300 + 6 * MB),
    pytest.mark.skipif(shutil.which("java") is None, reason="java is not installed"),
]

TOPIC = "tiered"
T0 = 1_700_000_000_000
VALUE = 8 << 10
N = MB * (1 << 20) // VALUE  # produced onto the old bookies, then offloaded
M = 100  # produced after the old bookies are gone
SEGMENT = (2 if MB <= 40 else 8) << 20


def values_for(n: int, start: int) -> list[bytes]:
    # random bytes (incompressible, every byte value) with varied sizes
    return [os.urandom(VALUE - 512 + (i * 37) % 1024) for i in range(start, start + n)]


def produce(bootstrap: str, values: list[bytes], first: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 32, "acks": "all",
                  "message.timeout.ms": 120_000})
    failed: list[Any] = []
    for i, v in enumerate(values, first):
        while True:
            try:
                p.produce(TOPIC, value=v, key=b"%d" % i, timestamp=T0 + 1000 * i, partition=0,
                          on_delivery=lambda err, _m: failed.append(err) if err else None)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    assert p.flush(120) == 0
    assert not failed, failed[:3]


def digest(values: list[bytes]) -> str:
    """What the harness's `checksum` command prints: SHA-256 over (length, value) in order."""
    h = hashlib.sha256()
    for v in values:
        h.update(struct.pack(">i", len(v)))
        h.update(v)
    return h.hexdigest()


def admin(meta_url: str, *argv: str) -> Any:
    proc = subprocess.run(
        [sys.executable, "-m", "quire", "admin", "--json", "--meta", meta_url, *argv],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(proc.stdout)


def confluent_read_all(bootstrap: str, n: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 120
        while len(got) < n:
            assert time.monotonic() < deadline, f"confluent-kafka stalled at {len(got)} of {n}"
            for m in c.consume(500, 1.0):
                if m.error():
                    raise KafkaException(m.error())
                assert m.offset() == len(got)
                got.append(m.value())
        return got
    finally:
        c.close()


def kafka_python_read_all(bootstrap: str, n: int, ts: int) -> tuple[list[bytes], int]:
    kc = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tp = KpTP(TOPIC, 0)
        kc.assign([tp])
        kc.seek(tp, 0)
        seen: list[bytes] = []
        while len(seen) < n:
            batch = kc.poll(timeout_ms=10_000)
            assert batch, f"kafka-python stalled at {len(seen)} of {n}"
            seen += [r.value for r in batch.get(tp, [])]
        return seen, kc.offsets_for_times({tp: ts})[tp].offset
    finally:
        kc.close()


@pytest.mark.parametrize("kind", ["fs", "s3"])
async def test_offloaded_ledgers_read_with_their_bookies_dead(
    zookeeper: Any, bookie_cluster: Any, tmp_path: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    if not kafka_dist.is_installed():
        pytest.skip("Kafka jars not cached: run compat_tests/install.sh")
    await asyncio.to_thread(kafka_dist.ensure_installed)  # (re)builds the harness if its sources changed
    url = zookeeper.url()
    tier = ["--offload-deletion-lag-ms", "0"]
    if kind == "fs":
        tier += ["--offload-dir", str(tmp_path / "offload")]  # shared by both gateways
    else:
        sw = request.getfixturevalue("seaweed")
        tier += ["--offload-driver", "s3", "--offload-s3-endpoint", sw.endpoint, "--offload-s3-bucket",
                 sw.new_bucket(), "--offload-s3-access-key", sw.access_key, "--offload-s3-secret-key", sw.secret_key]
    old = await bookie_cluster(2, url)
    gateways = [GatewayProc(n, url, tmp_path / f"gateway-{n}.log", replication="2/2/2", extra_args=tier)
                for n in (1, 2)]
    meta = open_meta(url)
    await meta.start()

    async def ledgers() -> list[dict[str, Any]]:
        doc = await inspect.describe_topic(meta, TOPIC)
        assert doc is not None
        return list(doc["partitions"][0]["ledgers"])

    try:
        g1, g2 = gateways
        g1.start()
        await asyncio.to_thread(g1.wait_ready)
        admin_client = AdminClient({"bootstrap.servers": g1.address})
        configs = {"remote.storage.enable": "true", "local.retention.bytes": "-1", "local.retention.ms": "-1",
                   "segment.bytes": str(SEGMENT)}
        fut = admin_client.create_topics([NewTopic(TOPIC, 1, -1, config=configs)])[TOPIC]
        await asyncio.to_thread(fut.result, 30)
        del admin_client  # its librdkafka handle would keep calling the gateway killed below
        values = values_for(N, 0)
        started = time.monotonic()
        await asyncio.to_thread(produce, g1.address, values, 0)
        print(f"produced {sum(map(len, values)) >> 20} MiB in {time.monotonic() - started:.1f} s")

        before = await ledgers()
        old_addrs = {b.address for b in old}
        assert len(before) >= 5, before
        assert all(set(ens) <= old_addrs for lg in before for _, ens in lg["ensembles"])
        status = await asyncio.to_thread(admin, url, "offload", "trigger", TOPIC)
        # (a rollover may have been under way when `before` was read: the last two may differ)
        assert status[0]["offloaded_ledgers"] >= len(before) - 1 and status[0]["bookie_bytes"] < 2 * SEGMENT, status

        # The tail moves off the old bookies: fresh ones join, the owner dies, and its successor
        # closes the old tail (a new ledger starts) so that it can be offloaded too.
        snapshot = await ledgers()
        old_tail = snapshot[-1]["ledger_id"]
        new = [await bookie_cluster.start_one(url) for _ in range(2)]
        g1.kill()
        g2.start()
        await asyncio.to_thread(g2.wait_ready)

        async def tail_closed() -> bool:
            lgs = await ledgers()
            # (an empty old tail, left by a rollover that ended the data, may be dropped instead)
            return lgs[-1]["ledger_id"] > old_tail and all(
                lg["state"] in ("closed", "offloaded") for lg in lgs if lg["ledger_id"] == old_tail)

        await eventually(tail_closed, within=60, what="the successor closed the old tail")
        await asyncio.to_thread(admin, url, "offload", "trigger", TOPIC)
        after = await ledgers()
        # every ledger holding data from before the fresh bookies joined is offloaded, its
        # bookie copy deleted
        held = [lg for lg in after if lg["ledger_id"] <= old_tail and lg["entries"] > 0]
        assert len(held) >= len(before) - 1
        for lg in held:
            assert "offload" in lg and lg["offload"]["bookie_deleted"] and lg["offload"]["driver"] == kind, lg
        assert held[0]["first_offset"] == 0 and held[-1]["next_offset"] == N
        # every bookie that held the offloaded ledgers dies
        for b in old:
            b.kill()
        more = values_for(M, N)
        await asyncio.to_thread(produce, g2.address, more, N)
        tail = (await ledgers())[-1]
        assert "offload" not in tail and set(tail["ensembles"][-1][1]) <= {b.address for b in new}, tail

        everything = values + more
        total = N + M
        mid = N // 2
        started = time.monotonic()
        got = await asyncio.to_thread(confluent_read_all, g2.address, total)
        print(f"confluent-kafka read {total} records in {time.monotonic() - started:.1f} s")
        assert got == everything
        seen, at = await asyncio.to_thread(kafka_python_read_all, g2.address, total, T0 + 1000 * mid - 1)
        assert seen == everything
        assert at == mid
        events = await asyncio.to_thread(run_harness, "checksum", bootstrap=g2.address, topic=TOPIC,
                                         count=total, timestamp=T0 + 1000 * 7 + 1, timeout_ms=240_000,
                                         timeout=300.0)
        java = one(events, "checksum")
        assert (java["count"], java["bytes"], java["sha256"]) == (total, sum(map(len, everything)), digest(everything))
        at_time = one(events, "offset_for_time")
        assert (at_time["offset"], at_time["timestamp"]) == (8, T0 + 8000)
        # ListOffsets by timestamp inside offloaded ledgers (raw request, v9)
        assert await asyncio.to_thread(list_offset, g2.address, TOPIC, T0 + 1000 * 7 + 1) == (8, T0 + 8000)
        last = N - 1  # the old tail's last record, in the last offloaded ledger
        assert await asyncio.to_thread(list_offset, g2.address, TOPIC, T0 + 1000 * last) == (last, T0 + 1000 * last)
        local, _ = await asyncio.to_thread(list_offset, g2.address, TOPIC, -4)
        last_tiered, _ = await asyncio.to_thread(list_offset, g2.address, TOPIC, -5)
        assert (local, last_tiered) == (N, N - 1)
    except BaseException:
        for g in gateways:
            print(f"--- gateway {g.node_id} output ---\n{g.output()}")
        raise
    finally:
        for g in gateways:
            g.kill()
        await meta.close()
