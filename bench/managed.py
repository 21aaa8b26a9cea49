"""Segmented-log benchmark: append throughput vs the raw ledger, tailing-read latency from the
entry cache, and catch-up read throughput from bookies over many ledgers.

Starts its own embedded metadata store and 3 bookie processes (E=WQ=3, AQ=2) in a temp dir.
Usage: python3 bench/managed.py [--seconds 2] [--rounds 6] [--size 1024] [--window 1000] [--catchup-mib 1024]
Ends with: BENCH managed append_vs_ledger=<ratio> tail_p99_ms=<n> catchup_MBps=<n>
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import _bookies as bk  # noqa: E402

from store.ledger.client import LedgerClient  # noqa: E402
from store.managed.cache import EntryCache  # noqa: E402
from store.managed.config import LogConfig  # noqa: E402
from store.managed.log import ManagedLog  # noqa: E402
from store.managed.position import Position  # noqa: E402
from store.meta.api import MetaStore  # noqa: E402
from store.meta.factory import open_meta  # noqa: E402

E, WQ, AQ = 3, 3, 2


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


async def _pump(append: Any, payload: bytes, seconds: float, window: int) -> float:
    """Pipelined appends through `append` for `seconds`; returns entries/s."""
    slots = asyncio.Semaphore(window)
    n = 0
    last: asyncio.Future[Any] | None = None
    loop = asyncio.get_running_loop()
    start = loop.time()
    end = start + seconds
    while loop.time() < end:
        await slots.acquire()
        last = append(payload)
        last.add_done_callback(lambda _f: slots.release())
        n += 1
    if last is not None:
        await last
    return n / (loop.time() - start)


async def bench_append(
    meta: MetaStore, client: LedgerClient, size: int, seconds: float, window: int, rounds: int
) -> float:
    """Alternating rounds (order flipped every round) so both paths see the same noisy machine."""
    payload = os.urandom(size)
    raw: list[float] = []
    managed: list[float] = []
    cfg = LogConfig(ensemble_size=E, write_quorum=WQ, ack_quorum=AQ, retention_ms=-1)
    mlog = await ManagedLog.open(meta, client, "bench-append", config=cfg, cache=EntryCache())

    async def one_raw() -> None:
        w = await client.create(E, WQ, AQ)
        raw.append(await _pump(w.append, payload, seconds, window))
        await w.close()

    async def one_managed() -> None:
        managed.append(await _pump(mlog.append, payload, seconds, window))

    for rnd in range(rounds):
        for step in (one_raw, one_managed) if rnd % 2 == 0 else (one_managed, one_raw):
            await step()
    rolled = len(mlog.ledgers) - 1
    await mlog.close()
    r, m = sum(raw) / len(raw), sum(managed) / len(managed)
    # Median of per-round ratios: each pair ran back to back, so slow drifts of a shared
    # machine's load cancel out better than in the ratio of the means.
    ratios = sorted(mi / ri for mi, ri in zip(managed, raw))
    ratio = (ratios[(len(ratios) - 1) // 2] + ratios[len(ratios) // 2]) / 2
    print(
        f"append {size} B, window {window}: ledger {r:,.0f}/s ({r * size / 1e6:.1f} MB/s), managed log {m:,.0f}/s "
        f"({m * size / 1e6:.1f} MB/s, {rolled} rollovers); rounds ledger={[round(x) for x in raw]} "
        f"managed={[round(x) for x in managed]}; ratio of means {m / r:.3f}, median ratio {ratio:.3f}"
    )
    return ratio


async def bench_tail(meta: MetaStore, client: LedgerClient, n: int, rate: float) -> float:
    """Latency from an append's confirmation to a tailing reader holding it (served from cache)."""
    cfg = LogConfig(ensemble_size=E, write_quorum=WQ, ack_quorum=AQ, retention_ms=-1)
    mlog = await ManagedLog.open(meta, client, "bench-tail", config=cfg, cache=EntryCache())
    confirmed: dict[Position, float] = {}
    lat: list[float] = []

    async def reader() -> None:
        pos = mlog.next_position(mlog.last_confirmed)
        while len(lat) < n:
            got = await mlog.read_or_wait(pos, max_entries=100, max_wait=5)
            now = time.perf_counter()
            for e in got:
                lat.append(now - confirmed.pop(e.position, now))
            if got:
                pos = mlog.next_position(got[-1].position)

    task = asyncio.create_task(reader())
    payload = os.urandom(1024)
    for _ in range(n):
        fut = mlog.append(payload)
        fut.add_done_callback(lambda f: confirmed.__setitem__(f.result(), time.perf_counter()))
        await asyncio.sleep(1 / rate)
    await asyncio.wait_for(task, 60)
    await mlog.close()
    p50, p99 = _pct(lat, 0.5) * 1000, _pct(lat, 0.99) * 1000
    print(
        f"tail read from cache: {len(lat)} entries, p50 {p50:.3f} ms, p99 {p99:.3f} ms, max {max(lat) * 1000:.3f} ms"
    )
    return p99


async def bench_catchup(meta: MetaStore, client: LedgerClient, total_mib: int, entry_kib: int) -> float:
    cfg = LogConfig(
        ensemble_size=E,
        write_quorum=WQ,
        ack_quorum=AQ,
        max_bytes=max(total_mib // 16, 1) << 20,
        retention_ms=-1,
    )
    mlog = await ManagedLog.open(
        meta, client, "bench-catchup", config=cfg, cache=EntryCache(max_bytes=1 << 20)
    )
    payload = os.urandom(entry_kib << 10)
    n = (total_mib << 20) // len(payload)
    t0 = time.perf_counter()
    slots = asyncio.Semaphore(64)
    last = None
    for _ in range(n):
        await slots.acquire()
        last = mlog.append(payload)
        last.add_done_callback(lambda _f: slots.release())
    assert last is not None
    await last
    await mlog.flush()
    wt = time.perf_counter() - t0
    ledgers = len(mlog.ledgers)
    await mlog.close()
    # A fresh owner with a cold cache reads everything from the bookies.
    reader = await ManagedLog.open(meta, client, "bench-catchup", cache=EntryCache(max_bytes=1 << 20))
    t0 = time.perf_counter()
    pos, got_bytes, got_n = Position(0, 0), 0, 0
    while True:
        got = await reader.read(pos, max_entries=10_000, max_bytes=16 << 20)
        if not got:
            break
        got_n += len(got)
        got_bytes += sum(len(e.data) for e in got)
        pos = reader.next_position(got[-1].position)
    rt = time.perf_counter() - t0
    await reader.close()
    assert got_n == n, (got_n, n)
    mbps = got_bytes / rt / 1e6
    print(
        f"catch-up: wrote {got_bytes / 2**20:.0f} MiB in {ledgers} ledgers ({got_bytes / wt / 1e6:.1f} MB/s), "
        f"read back from bookies in {rt:.2f} s = {mbps:.1f} MB/s"
    )
    return mbps


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.0, help="per append round")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--tail-entries", type=int, default=3000)
    ap.add_argument("--tail-rate", type=float, default=1000.0)
    ap.add_argument("--catchup-mib", type=int, default=1024)
    ap.add_argument("--catchup-entry-kib", type=int, default=64)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="quire-bench-managed-"))
    url = f"embedded://{base / 'meta'}"
    procs = bk.spawn_bookies(url, base, 3)
    meta = open_meta(url)
    await meta.start()
    client = LedgerClient(meta)
    try:
        await bk.wait_bookies(meta, procs, 3, base)
        print(f"3 bookies, E={E} WQ={WQ} AQ={AQ}, data in {base}")
        ratio = await bench_append(meta, client, args.size, args.seconds, args.window, args.rounds)
        p99 = await bench_tail(meta, client, args.tail_entries, args.tail_rate)
        mbps = await bench_catchup(meta, client, args.catchup_mib, args.catchup_entry_kib)
    finally:
        await client.close()
        await meta.close()
        bk.stop(procs)
        shutil.rmtree(base, ignore_errors=True)
    print(f"BENCH managed append_vs_ledger={ratio:.3f} tail_p99_ms={p99:.3f} catchup_MBps={mbps:.1f}")


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main())
