"""Raw bookie throughput: every entry added to all of 3 bookie processes (as WQ=3 would).

Starts an embedded metadata store dir and 3 `quire bookie` processes in a temp dir, then runs
pipelined adds through BookieClient with a bounded in-flight window, for 1 KiB and 64 KiB
entries, then a READ_RANGE scan, then the flush-debt check: a burst at full speed followed at
once (no pause for the bookies to catch up) by half that rate, whose p99 latency must stay low.

    python3 bench/bookie.py [--seconds 5] [--window 2000] [--bookie-args "--no-fsync ..."]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from store import layout  # noqa: E402
from store.bookie.client import BookieClient  # noqa: E402
from store.bookie.entry import pack_entry  # noqa: E402
from store.meta.factory import open_meta  # noqa: E402
from store.net import free_port  # noqa: E402


async def _wait_registered(meta_url: str, addrs: list[str]) -> None:
    meta = open_meta(meta_url)
    await meta.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if all([await meta.exists(layout.bookie_available(a)) for a in addrs]):
                return
            await asyncio.sleep(0.05)
        raise RuntimeError("bookies did not register")
    finally:
        await meta.close()


async def _adds(
    clients: list[BookieClient], ledger_id: int, size: int, seconds: float, window: int
) -> tuple[int, float]:
    """Entries in flight bounded by `window`; an entry counts once all 3 bookies acked it."""
    payload = os.urandom(size)
    done = 0
    in_flight = 0
    room = asyncio.Event()
    errors: list[BaseException] = []

    def acked(f: asyncio.Future[bytes], left: list[int]) -> None:
        nonlocal done, in_flight
        if f.exception() is not None:
            errors.append(f.exception())  # type: ignore[arg-type]
        left[0] -= 1
        if left[0] == 0:
            done += 1
            in_flight -= 1
            if in_flight < window // 2 or in_flight == 0:
                room.set()

    start = time.perf_counter()
    eid = 0
    while time.perf_counter() - start < seconds and not errors:
        while in_flight < window:
            e = pack_entry(ledger_id, eid, eid - 1, payload)
            left = [len(clients)]
            for c in clients:
                c.add_nowait(ledger_id, e).add_done_callback(lambda f, left=left: acked(f, left))
            in_flight += 1
            eid += 1
        room.clear()
        await room.wait()
    while in_flight:
        room.clear()
        await room.wait()
    if errors:
        raise errors[0]
    return done, time.perf_counter() - start


async def _scan(client: BookieClient, ledger_id: int, count: int) -> tuple[int, float]:
    start = time.perf_counter()
    got = 0
    nbytes = 0
    while got < count:
        es = await client.read_range(ledger_id, got, count - 1, 4 << 20)
        got += len(es)
        nbytes += sum(len(e) for e in es)
    return nbytes, time.perf_counter() - start


async def _paced(clients: list[BookieClient], ledger_id: int, rate: float, seconds: float) -> list[float]:
    """Offer `rate` 1 KiB adds/s (1 ms ticks); latency of each until all bookies acked it."""
    payload = os.urandom(1024)
    loop = asyncio.get_running_loop()
    lat: list[float] = []
    futs: list[asyncio.Future[bytes]] = []

    def acked(t0: float, left: list[int], f: asyncio.Future[bytes]) -> None:
        left[0] -= 1
        if left[0] == 0:
            lat.append(loop.time() - t0)

    start = loop.time()
    sent = 0
    while (now := loop.time()) - start < seconds:
        while sent < int((now - start) * rate):
            e = pack_entry(ledger_id, sent, sent - 1, payload)
            left = [len(clients)]
            for c in clients:
                f = c.add_nowait(ledger_id, e)
                f.add_done_callback(functools.partial(acked, loop.time(), left))
                futs.append(f)
            sent += 1
        await asyncio.sleep(0.001)
    await asyncio.gather(*futs)
    return sorted(lat)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_share(pids: list[int], before: list[float], seconds: float) -> str:
    used = [(_cpu_seconds(p) - b) / seconds for p, b in zip([os.getpid(), *pids], before)]
    return f"cpu: client={used[0]:.2f} bookies={'/'.join(f'{u:.2f}' for u in used[1:])} cores"


async def main_async(addrs: list[str], seconds: float, window: int, pids: list[int]) -> None:
    clients = [BookieClient(a) for a in addrs]
    for c in clients:
        await c.connect()
    n1, t1 = await _adds(clients, 1, 1024, seconds, window)
    print(f"1 KiB adds to 3 bookies: {n1} in {t1:.2f} s = {n1 / t1:,.0f} entries/s")
    n64, t64 = await _adds(clients, 2, 64 << 10, seconds, max(16, window // 16))
    mbs = n64 * 64 / 1024 / t64
    print(f"64 KiB adds to 3 bookies: {n64} in {t64:.2f} s = {n64 / t64:,.0f} entries/s, {mbs:.1f} MB/s")
    nb, ts = await _scan(clients[0], 1, n1)
    print(
        f"READ_RANGE scan of ledger 1 from one bookie: {nb / 1e6:.1f} MB in {ts:.2f} s = {nb / 1e6 / ts:.1f} MB/s"
    )
    nb_, tb = await _adds(clients, 3, 1024, seconds * 2, window)
    c0 = [_cpu_seconds(p) for p in [os.getpid(), *pids]]
    lat = await _paced(clients, 4, nb_ / tb / 2, seconds * 2)
    p99 = lat[int(len(lat) * 0.99)] * 1000
    print(
        f"flush debt: burst {nb_ / tb:,.0f} adds/s for {tb:.1f} s, then at once half that rate: "
        f"p50={lat[len(lat) // 2] * 1000:.1f} ms p99={p99:.1f} ms max={lat[-1] * 1000:.1f} ms "
        f"{_cpu_share(pids, c0, seconds * 2)}"
    )
    for c in clients:
        await c.close()
    print(
        f"BENCH bookie adds_1k_per_s={n1 / t1:.0f} adds_64k_per_s={n64 / t64:.0f} "
        f"mb_per_s_64k={mbs:.1f} scan_mb_per_s={nb / 1e6 / ts:.1f} after_burst_p99_ms={p99:.1f}"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--window", type=int, default=2000)
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (bookie logs)")
    ap.add_argument("--bookie-args", default="", help="extra `quire bookie` options, e.g. --no-fsync")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="quire-bench-bookie-"))
    meta_url = f"embedded://{base / 'meta'}"
    procs: list[subprocess.Popen[bytes]] = []
    addrs: list[str] = []
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        for i in range(3):
            port = free_port()
            addrs.append(f"127.0.0.1:{port}")
            cmd = [sys.executable, "-m", "quire", "bookie", "--dir", str(base / f"b{i}"), "--port", str(port)]
            cmd += ["--meta", meta_url, *shlex.split(args.bookie_args)]
            with open(base / f"b{i}.log", "wb") as out:
                procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT))
        asyncio.run(_wait_registered(meta_url, addrs))
        try:
            import uvloop

            uvloop.run(main_async(addrs, args.seconds, args.window, [p.pid for p in procs]))
        except ImportError:
            asyncio.run(main_async(addrs, args.seconds, args.window, [p.pid for p in procs]))
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
