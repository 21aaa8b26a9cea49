"""Kafka-partition benchmark: PartitionLog.append (validate + patch + sequence + append) against
ManagedLog.append of the same bytes, and PartitionLog.read throughput (catch-up from bookies and
tailing from the entry cache).

Starts an embedded metadata store and bookie processes (default 3: E=WQ=3, AQ=2) in a temp dir.
Usage: python3 bench/partition.py [--seconds 2] [--batch-kib 16] [--window 200] [--bookies 3]
Ends with: BENCH partition append_MBps=<n> raw_MBps=<n> overhead_pct=<n> read_MBps=<n>
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import _bookies as bk  # noqa: E402

from gateway.partition.log import PartitionLog  # noqa: E402
from gateway.topics.registry import TopicInfo  # noqa: E402
from kafka_log.view import batch_offsets  # noqa: E402
from kafka_wire.records import Compression, NewRecord, build_batch  # noqa: E402
from store.ledger.client import LedgerClient  # noqa: E402
from store.managed.cache import EntryCache  # noqa: E402
from store.meta.factory import open_meta  # noqa: E402


def make_batch(kib: int) -> bytes:
    recs = [NewRecord(b"key-%d" % i, bytes(1000), (), int(time.time() * 1000)) for i in range(kib)]
    return build_batch(recs, compression=Compression.NONE)


async def pump(fn: Any, seconds: float, window: int) -> int:
    slots = asyncio.Semaphore(window)
    n = 0
    last = None
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        await slots.acquire()
        last = fn()
        last.add_done_callback(lambda _f: slots.release())
        n += 1
    if last is not None:
        await last
    return n


async def run(args: argparse.Namespace) -> None:
    base = Path(tempfile.mkdtemp(prefix="quire-bench-partition-"))
    url = f"embedded://{base / 'meta'}"
    procs = bk.spawn_bookies(url, base, args.bookies)
    meta = open_meta(url)
    await meta.start()
    client = LedgerClient(meta)
    try:
        await bk.wait_bookies(meta, procs, args.bookies, base)
        e = min(3, args.bookies)
        repl = (e, e, min(2, e))
        template = make_batch(args.batch_kib)
        size = len(template)
        results: dict[str, list[float]] = {"plog": [], "raw": []}
        for rnd in range(args.rounds):
            topic = TopicInfo(f"bench{rnd}", uuid.uuid4(), 1, {})
            plog = await PartitionLog.open(meta, client, topic, 0, cache=EntryCache(), replication=repl)

            def plog_append(plog: PartitionLog = plog) -> Any:
                return plog.append(bytearray(template), api_version=9, max_message_bytes=1 << 24,
                                   log_append_time=False)

            def raw_append(plog: PartitionLog = plog) -> Any:
                return plog.ml.append(bytes(bytearray(template)))

            order = [("plog", plog_append), ("raw", raw_append)]
            if rnd % 2:
                order.reverse()
            for name, fn in order:
                t0 = time.monotonic()
                n = await pump(fn, args.seconds, args.window)
                results[name].append(n * size / (time.monotonic() - t0) / 1e6)
            if rnd == args.rounds - 1:
                # catch-up read of everything the PartitionLog wrote, from bookies (fresh cache)
                await plog.close()
                reader = await PartitionLog.open(meta, client, topic, 0, cache=EntryCache(1 << 20),
                                                 replication=repl)
                off, total = 0, 0
                t0 = time.monotonic()
                hw = reader.high_watermark
                while off < hw:
                    bufs = await reader.read(off, 4 << 20)
                    whole = [b for b in bufs if len(b) >= 61 and int.from_bytes(b[8:12], "big") + 12 == len(b)]
                    total += sum(len(b) for b in whole)
                    off = batch_offsets(whole[-1])[1] + 1
                read_mbps = total / (time.monotonic() - t0) / 1e6
                await reader.close()
            else:
                await plog.close()
        ap = sorted(results["plog"])[len(results["plog"]) // 2]
        raw = sorted(results["raw"])[len(results["raw"]) // 2]
        print(f"batch {size} bytes, window {args.window}, {args.bookies} bookies, E/WQ/AQ {repl}")
        print(f"PartitionLog.append: {ap:.1f} MB/s (rounds {[round(x, 1) for x in results['plog']]})")
        print(f"ManagedLog.append:   {raw:.1f} MB/s (rounds {[round(x, 1) for x in results['raw']]})")
        print(f"catch-up read:       {read_mbps:.1f} MB/s")
        print(f"BENCH partition append_MBps={ap:.1f} raw_MBps={raw:.1f} "
              f"overhead_pct={100 * (raw - ap) / raw:.1f} read_MBps={read_mbps:.1f}")
    finally:
        await client.close()
        await meta.close()
        bk.stop(procs)
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch-kib", type=int, default=16)
    ap.add_argument("--window", type=int, default=200)
    ap.add_argument("--bookies", type=int, default=3)
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
