"""Ledger write throughput and latency: one writer, E=WQ=3, AQ=2, pipelined adds.

Starts its own embedded metadata store and 3 bookie processes in a temp dir, then measures
1 KiB and 64 KiB entries at full speed (bounded in-flight window), the p99 add latency at half
the measured 1 KiB rate, and, as the physical reference, a plain write + fdatasync loop of the
same bytes into 3 files. Prints a CPU share per process for each phase, to tell a busy client
from busy bookies. The BENCH line's p99_ms_1k is the one below saturation (50% of the max rate).

    python3 bench/ledger.py [--seconds 10] [--window 1000] [--profile client.prof]
                            [--profile-bookies DIR]   # cProfile dumps of the 1 KiB client / each bookie
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import _bookies as bk  # noqa: E402

from store.ledger import LedgerClient  # noqa: E402
from store.meta.factory import open_meta  # noqa: E402

PROFILE_BOOKIES: str | None = None  # --profile-bookies DIR: run each bookie under cProfile


def _bookie_flags() -> str:
    out = subprocess.run(
        [sys.executable, "-m", "quire", "bookie", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    return out.stdout


def _record(lat: list[float], loop: asyncio.AbstractEventLoop, t0: float, fut: asyncio.Future[int]) -> None:
    lat.append(loop.time() - t0)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu(pids: list[int]) -> list[float]:
    return [_cpu_seconds(p) for p in [os.getpid(), *pids]]


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


async def _saturate(
    client: LedgerClient, size: int, seconds: float, window: int, max_bytes: int
) -> dict[str, float]:
    """As fast as the window allows, until `seconds` pass or max_bytes are written."""
    w = await client.create(3, 3, 2)
    payload = os.urandom(size)
    loop = asyncio.get_running_loop()
    lat: list[float] = []
    # A semaphore, not asyncio.wait over the in-flight set: that costs O(window) per wake-up.
    slots = asyncio.Semaphore(window)

    def acked(t0: float, fut: asyncio.Future[int]) -> None:
        lat.append(loop.time() - t0)
        slots.release()

    n = 0
    start = loop.time()
    end = start + seconds
    last: asyncio.Future[int] | None = None
    while n * size < max_bytes and (n % 256 or loop.time() < end):
        await slots.acquire()
        last = w.append(payload)
        last.add_done_callback(functools.partial(acked, loop.time()))
        n += 1
    if last is not None:
        await last  # acks come in order: the last one means all
    elapsed = loop.time() - start
    await w.close()
    return {
        "entries": n,
        "seconds": elapsed,
        "entries_per_s": n / elapsed,
        "MBps": n * size / elapsed / 1e6,
        "p50_ms": _pct(lat, 0.50) * 1000,
        "p99_ms": _pct(lat, 0.99) * 1000,
    }


async def _paced(client: LedgerClient, size: int, rate: float, seconds: float) -> dict[str, float]:
    """Offer `rate` adds/s (in 1 ms ticks) and measure latency below saturation."""
    w = await client.create(3, 3, 2)
    payload = os.urandom(size)
    loop = asyncio.get_running_loop()
    lat: list[float] = []
    futs: list[asyncio.Future[int]] = []
    start = loop.time()
    sent = 0
    while (now := loop.time()) - start < seconds:
        due = int((now - start) * rate)
        while sent < due:
            fut = w.append(payload)
            fut.add_done_callback(functools.partial(_record, lat, loop, loop.time()))
            futs.append(fut)
            sent += 1
        await asyncio.sleep(0.001)
    # Acks complete in entry order: the last one covers all (gathering ~100k futures would add
    # as many callbacks at once and delay the last acks it measures).
    if futs:
        await futs[-1]
    await w.close()
    return {"rate": sent / seconds, "p50_ms": _pct(lat, 0.5) * 1000, "p99_ms": _pct(lat, 0.99) * 1000}


def _raw_disk(base: Path, size: int, total: int) -> float:
    """Payload MB/s of write + fdatasync of each `size` chunk to 3 files (3 copies)."""
    fds = [os.open(base / f"raw-{i}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) for i in range(3)]
    buf = os.urandom(size)
    t0 = time.perf_counter()
    written = 0
    try:
        while written < total:
            for fd in fds:
                os.write(fd, buf)
                os.fdatasync(fd)
            written += size
    finally:
        for fd in fds:
            os.close(fd)
    return written / (time.perf_counter() - t0) / 1e6


async def _run_phases(
    url: str, args: argparse.Namespace, label: str, pids: list[int]
) -> dict[str, dict[str, float]]:
    meta = open_meta(url)
    await meta.start()
    client = LedgerClient(meta)
    out: dict[str, dict[str, float]] = {}
    try:
        prof = cProfile.Profile() if args.profile else None
        if prof:
            prof.enable()
        c0 = _cpu(pids)
        out["1k"] = await _saturate(client, 1024, args.seconds, args.window, 1 << 40)
        if prof:
            prof.disable()
            prof.dump_stats(args.profile)
        print(
            f"[{label}] 1 KiB : {_fmt(out['1k'])} {_cpu_share(c0, _cpu(pids), out['1k']['seconds'])}",
            flush=True,
        )
        # The bookies flush their write caches in the background after a burst: let that debt
        # drain, or the next phase measures it instead of itself.
        await asyncio.sleep(args.settle)
        if not args.skip_paced:
            rate = out["1k"]["entries_per_s"] * 0.5
            out["paced"] = await _paced(client, 1024, rate, args.seconds)
            print(f"[{label}] 1 KiB at {rate:.0f}/s (50% of max): {_fmt(out['paced'])}", flush=True)
            await asyncio.sleep(args.settle)
        c0 = _cpu(pids)
        out["64k"] = await _saturate(client, 64 << 10, args.seconds, args.window_64k, 4 << 30)
        print(
            f"[{label}] 64 KiB: {_fmt(out['64k'])} {_cpu_share(c0, _cpu(pids), out['64k']['seconds'])}",
            flush=True,
        )
    finally:
        await client.close()
        await meta.close()
    return out


def _cpu_share(before: list[float], after: list[float], seconds: float) -> str:
    used = [(a - b) / seconds for a, b in zip(after, before)]
    return f"cpu: client={used[0]:.2f} bookies={'/'.join(f'{u:.2f}' for u in used[1:])} cores"


def _fmt(d: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in d.items())


async def _cluster_run(
    base: Path, args: argparse.Namespace, extra: list[str], label: str
) -> dict[str, dict[str, float]]:
    url = f"embedded://{base / 'meta'}"
    meta = open_meta(url)
    await meta.start()
    procs = bk.spawn_bookies(url, base / "bookies", 3, extra=extra, profile_dir=PROFILE_BOOKIES)
    await bk.wait_bookies(meta, procs, 3, base / "bookies")
    try:
        return await _run_phases(url, args, label, [p.pid for p in procs])
    finally:
        bk.stop(procs)
        await meta.close()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--window-64k", type=int, default=256)
    ap.add_argument("--settle", type=float, default=10.0, help="pause between phases (bookie flushes)")
    ap.add_argument("--profile", default=None)
    ap.add_argument("--skip-paced", action="store_true")
    ap.add_argument("--profile-bookies", default=None, help="directory for a cProfile dump per bookie")
    ap.add_argument("--dir", default=None, help="where to put bookie data (default: a temp dir)")
    args = ap.parse_args()
    global PROFILE_BOOKIES
    PROFILE_BOOKIES = args.profile_bookies
    base = Path(tempfile.mkdtemp(prefix="quire-bench-ledger-", dir=args.dir))
    try:
        # The disk is shared: measure the reference before and after, keep the better one.
        raw_before = _raw_disk(base, 1 << 20, 128 << 20)
        synced = await _cluster_run(base / "synced", args, [], "fsync")
        nosync_flag = "--no-fsync" if "--no-fsync" in _bookie_flags() else None
        unsynced = None
        if nosync_flag:
            unsynced = await _cluster_run(base / "unsynced", args, [nosync_flag], "no-fsync")
        raw = max(raw_before, _raw_disk(base, 1 << 20, 128 << 20))  # best of before and after
        raw64 = _raw_disk(base, 64 << 10, 64 << 20)
        print(
            f"raw disk, write+fdatasync x3 files: {raw:.1f} MB/s (1 MiB writes), {raw64:.1f} MB/s (64 KiB writes)"
        )
        ratio = synced["64k"]["MBps"] / raw
        print(f"ledger 64 KiB MB/s / raw disk MB/s = {ratio:.2f}")
        if unsynced:
            r = synced["1k"]["entries_per_s"] / unsynced["1k"]["entries_per_s"]
            print(f"fsync'd / unsynced entries/s at 1 KiB = {r:.2f}")
        else:
            print("unsynced comparison: n/a (the bookie has no --no-fsync flag)")
        p99 = synced.get("paced", synced["1k"])["p99_ms"]
        print(
            f"BENCH ledger entries_per_s_1k={synced['1k']['entries_per_s']:.0f} "
            f"MBps_64k={synced['64k']['MBps']:.1f} p99_ms_1k={p99:.1f} vs_raw_disk={ratio:.2f}"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())
