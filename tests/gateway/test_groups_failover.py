"""Coordinator failover: ZooKeeper + a bookie + two `quire gateway` processes; a confluent-kafka
member consumes and commits; the gateway coordinating its group is SIGKILLed. The group
re-forms on the survivor and resumes from the last committed offsets: every message is
consumed, and only the batch in flight at the crash is consumed twice."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from coordinator.group.cursors import read_group_offsets
from gateway import paths
from gateway.paths import partition_log_name
from gateway.topics.registry import TopicInfo
from kafka_wire.messages.find_coordinator import FindCoordinatorRequest
from kafka_wire.messages.offset_fetch import OffsetFetchRequest
from store.managed.names import cursors_path, decode_name
from store.meta.factory import open_meta
from store.net import free_port
from tests.coordinator.gateway_support import FAST_GROUP_ENV, Member, wait_for
from tests.support.gateway import RawKafka, api_versions_ok

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
TOPIC, GROUP, PARTITIONS = "fo-t", "fo-g", 4


class Gateway:
    def __init__(self, node_id: int, meta_url: str, log_path: Path) -> None:
        self.node_id, self.port = node_id, free_port()
        cmd = [sys.executable, "-m", "quire", "--log-level", "INFO", "gateway", "--meta", meta_url,
               "--listen", f"127.0.0.1:{self.port}", "--id", str(node_id), "--replication", "1/1/1",
               "--session-timeout", "2"]
        env = dict(os.environ, PYTHONPATH=str(ROOT), **FAST_GROUP_ENV)
        self.log_path = log_path
        with open(log_path, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=ROOT, env=env)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while not api_versions_ok("127.0.0.1", self.port, timeout=1.0):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"gateway {self.node_id} did not start:\n{self.log_path.read_text()[-3000:]}")
            time.sleep(0.1)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def coordinator_port(address: str) -> int:
    with RawKafka(address) as raw:
        for _ in range(100):
            r: Any = raw.request(10, 3, FindCoordinatorRequest(key=GROUP, key_type=0))
            if r.error_code == 0:
                return int(r.port)
            time.sleep(0.2)
    raise AssertionError("no coordinator found")


def committed(address: str) -> dict[int, int]:
    with RawKafka(address) as raw:
        r: Any = raw.request(9, 7, OffsetFetchRequest(group_id=GROUP, topics=None))
        assert r.error_code == 0, r
        return {p.partition_index: p.committed_offset for t in r.topics for p in t.partitions}


def produce(bootstrap: str, n: int, start: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 60000})
    for i in range(start, start + n):
        p.produce(TOPIC, value=str(i).encode(), partition=i % PARTITIONS)
    assert p.flush(60) == 0


async def test_group_survives_coordinator_crash(zookeeper: Any, bookie_cluster: Any, tmp_path: Path) -> None:
    url = zookeeper.url()
    await bookie_cluster(1, url)
    gws = [Gateway(1, url, tmp_path / "gw1.log"), Gateway(2, url, tmp_path / "gw2.log")]
    member: Member | None = None
    try:
        for g in gws:
            await asyncio.to_thread(g.wait_ready)
        bootstrap = ",".join(g.address for g in gws)
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        await asyncio.to_thread(produce, bootstrap, 400, 0)
        port = await asyncio.to_thread(coordinator_port, gws[0].address)
        victim = next(g for g in gws if g.port == port)
        survivor = next(g for g in gws if g is not victim)
        member = Member("confluent", bootstrap, TOPIC, GROUP)
        m = member
        await asyncio.to_thread(wait_for, lambda: len(m.consumed()) >= 400, 60, "first 400 consumed")
        await asyncio.to_thread(wait_for, lambda: sum(committed(victim.address).values()) == 400, 30, "commits")
        before = committed(victim.address)
        assert sum(before.values()) == 400
        victim.kill()
        # The survivor becomes the coordinator and still knows the committed offsets.
        await asyncio.to_thread(wait_for, lambda: coordinator_port(survivor.address) == survivor.port, 30,
                                "coordinator moved to the survivor")
        assert committed(survivor.address) == before
        await asyncio.to_thread(produce, survivor.address, 200, 400)
        await asyncio.to_thread(wait_for, lambda: len(m.consumed()) >= 600, 90, "all 600 consumed")
        counts = Counter(line for line in m.snapshot() if line.startswith("MSG "))
        assert max(counts.values()) == 1, "a committed message was consumed again after the failover"
        await asyncio.to_thread(wait_for, lambda: sum(committed(survivor.address).values()) == 600, 30,
                                "final commits")
        # The committed offsets reach the partitions' logs as durable group cursors.
        meta = open_meta(url)
        await meta.start()
        try:
            data, _ = await meta.get(paths.topic(TOPIC))
            tid = TopicInfo.from_bytes(TOPIC, data).topic_id
            final = committed(survivor.address)
            for p in range(PARTITIONS):
                for _ in range(100):
                    offsets, _v = await read_group_offsets(meta, tid, p)
                    names = {decode_name(c) for c in await meta.children(cursors_path(partition_log_name(tid, p)))}
                    if offsets.get(GROUP) == final[p] and f"group:{GROUP}" in names:
                        break
                    await asyncio.sleep(0.1)
                else:
                    raise AssertionError(f"partition {p}: published {offsets}, cursors {names}")
        finally:
            await meta.close()
    finally:
        if member is not None:
            member.kill()
        for g in gws:
            g.kill()
