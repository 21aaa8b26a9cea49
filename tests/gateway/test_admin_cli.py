"""`quire admin` against a real store: bookie processes, an embedded metadata store laid out as
a standalone's data dir, and partitions written through the real PartitionManager/PartitionLog
by two successive owners (so there are closed ledgers, an epoch history and an open tail)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.cluster.membership import ClusterView, GatewayNode
from gateway.cluster.partitions import PartitionManager
from gateway.topics.registry import TopicRegistry
from kafka_wire.records import NewRecord, build_batch
from quire.admin import main as admin_main
from store.ledger.client import LedgerClient
from store.meta.factory import open_meta

ROOT = Path(__file__).resolve().parents[2]


def batch(n: int, value: bytes = b"x" * 100) -> bytearray:
    return bytearray(build_batch([NewRecord(b"k", value, (), 1000 + i) for i in range(n)]))


async def admin_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    capsys.readouterr()
    code = await asyncio.to_thread(admin_main, ["--json", *argv])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


async def test_admin_describes_topics_ledgers_and_bookies(
    tmp_path: Path, bookie_cluster: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "standalone"
    url = f"embedded://{data_dir / 'meta'}"
    bookies = await bookie_cluster(3, url, racks=["r1", "r2", "r3"])
    addrs = sorted(b.address for b in bookies)

    meta = open_meta(url, session_timeout=3.0)
    await meta.start()
    ledgers = LedgerClient(meta)
    topics = TopicRegistry(meta)
    await topics.start()
    try:
        topic = await topics.create("admin-t", 2, {"retention.ms": "60000"})
        offsets = []
        for node_id in (1, 2):  # two owners one after the other: epochs 0 then 1
            cluster = ClusterView(meta, GatewayNode(node_id, "127.0.0.1", 9000 + node_id), topics)
            await cluster.start()
            pm = PartitionManager(meta, ledgers, topics, cluster, node_id, replication=(3, 3, 2))
            await pm.start()
            log = await pm.get(topic, 0)
            for n in (3, 2):
                res = await log.append(
                    batch(n), api_version=9, max_message_bytes=1 << 20, log_append_time=False
                )
                offsets.append(res.base_offset)
            if node_id == 1:
                await pm.close()
                await cluster.close()
        assert offsets == [0, 3, 5, 8]
        await pm.reconcile()  # node 2 holds both partitions now

        # Through the real command line once (the wiring of `quire admin`), options last.
        proc = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "quire", "admin", "topics", "list", "--data-dir", str(data_dir)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert (
            "admin-t" in proc.stdout
            and topic.topic_id.hex in proc.stdout
            and "retention.ms=60000" in proc.stdout
        )

        listed = await admin_json(capsys, "--data-dir", str(data_dir), "topics", "list")
        assert [(t["name"], t["partitions"], t["topic_id"]) for t in listed] == [
            ("admin-t", 2, topic.topic_id.hex)
        ]

        doc = await admin_json(capsys, "--meta", url, "topics", "describe", "admin-t")
        p0 = doc["partitions"][0]
        assert p0["owner"] == 2 and p0["owner_address"] == "127.0.0.1:9002"
        assert p0["leader_epoch"] == 1
        assert p0["epochs"] == [[0, 0], [1, 5]]
        assert p0["log_start_offset"] == 0
        assert p0["next_offset"] >= 5  # the open tail may not be checkpointed yet
        first = p0["ledgers"][0]
        assert first["state"] == "closed"
        assert (first["first_offset"], first["next_offset"], first["entries"]) == (0, 5, 2)
        assert first["size"] > 500 and first["quorum"] == [3, 3, 2]
        assert sorted(first["ensembles"][0][1]) == addrs
        assert p0["ledgers"][-1]["state"] == "open"
        assert p0["size"] >= first["size"]
        # Partition 1 was never written (both owners opened it in the background, though).
        p1 = doc["partitions"][1]
        assert p1["owner"] == 2 and p1["next_offset"] == 0
        assert all(lg["entries"] == 0 for lg in p1["ledgers"])

        gws = await admin_json(capsys, "--meta", url, "gateways", "list")
        assert gws == [
            {
                "node_id": 2,
                "address": "127.0.0.1:9002",
                "rack": None,
                "controller": True,
                "owned_partitions": 2,
            }
        ]

        bookies[0].kill()
        await asyncio.sleep(0)
        listed_b = await admin_json(capsys, "--meta", url, "bookies", "list")
        assert [b["address"] for b in listed_b] == addrs
        by_addr = {b["address"]: b for b in listed_b}
        assert {b["rack"] for b in listed_b} == {"r1", "r2", "r3"}
        for b in bookies[1:]:
            assert by_addr[b.address]["alive"] is True and by_addr[b.address]["disk_used_bytes"] > 0
        # A killed bookie stays registered until its session expires; then only its cookie is left.
        for _ in range(200):
            listed_b = await admin_json(capsys, "--meta", url, "bookies", "list")
            if not {b["address"]: b for b in listed_b}[bookies[0].address]["alive"]:
                break
            await asyncio.sleep(0.1)
        assert not {b["address"]: b for b in listed_b}[bookies[0].address]["alive"]

        # The tables.
        capsys.readouterr()
        assert await asyncio.to_thread(admin_main, ["--meta", url, "topics", "describe", "admin-t"]) == 0
        text = capsys.readouterr().out
        assert "EPOCH_HISTORY" in text and "0@0 1@5" in text and "closed" in text and addrs[0] in text
        assert await asyncio.to_thread(admin_main, ["--meta", url, "bookies", "list"]) == 0
        text = capsys.readouterr().out
        assert "down (cookie only)" in text and text.count(" up ") == 2
        assert await asyncio.to_thread(admin_main, ["--meta", url, "topics", "describe", "nope"]) == 1
        missing = await asyncio.to_thread(
            admin_main, ["--data-dir", str(tmp_path / "none"), "topics", "list"]
        )
        assert missing == 2
        await pm.close()
        await cluster.close()
    finally:
        await topics.close()
        await ledgers.close()
        await meta.close()
