"""The nemesis: one randomized fault at a time (from a seeded random.Random), each healed before
the next. Faults: SIGKILL and restart of one or two bookies, a gateway, the ZooKeeper server;
SIGSTOP/SIGCONT of a gateway past its session timeout (a zombie owner) and of a bookie; a
bookie's disk wiped (it must refuse to start until `quire bookie format`) and a bookie's disk
filled.

Disk full without root mounts: the bookie is restarted with quire.bookie.disk.usage.threshold
just above its filesystem's current use, then a file (fallocate) pushes the use past it; the
file is removed and the bookie restarted with the normal threshold afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from store import layout
from store.meta.api import NoNodeError
from tests.faults.harness import ROOT, Cluster, Proc, log

FILLER_BYTES = 2 << 30  # fallocated at once; large against what other writers of the disk change meanwhile


@dataclass
class Event:
    at: float  # monotonic
    fault: str
    detail: str


@dataclass
class Nemesis:
    cluster: Cluster
    rng: random.Random
    gap_s: tuple[float, float] = (2.0, 6.0)  # quiet time between faults
    events: list[Event] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)  # unexpected behaviour seen while injecting
    wiped_up_ms: int = 0  # wall ms when the last wiped bookie was serving again
    checks_since_wipe: set[int] = field(default_factory=set)  # sampled checks finished since then
    only: frozenset[str] = frozenset()  # fault names to choose from (empty: all)

    @property
    def faults(self) -> int:
        return len(self.events)

    def _faults(self) -> list[tuple[float, Callable[[], Awaitable[str]]]]:
        return [
            (3, self.kill_bookie), (2, self.kill_two_bookies), (3, self.kill_gateway), (1, self.kill_zookeeper),
            (2, self.zombie_gateway), (2, self.pause_bookie), (1, self.wipe_bookie), (1, self.fill_disk),
        ]

    async def run(self, until: float) -> None:
        """Inject faults until time.monotonic() >= until; every fault healed on return."""
        chosen = [(w, f) for w, f in self._faults() if not self.only or f.__name__ in self.only]
        if not chosen:
            raise ValueError(f"no fault named in {sorted(self.only)}")
        weights, faults = zip(*chosen, strict=True)
        while time.monotonic() < until:
            await asyncio.sleep(self.rng.uniform(*self.gap_s))
            if time.monotonic() >= until:
                break
            fault = self.rng.choices(faults, weights)[0]
            t = time.monotonic()
            try:
                detail = await fault()
            except Exception as e:
                detail = f"FAILED: {e!r}"[:2000]
                self.anomalies.append(f"{fault.__name__}: {detail}")
                await self.heal()
            self.events.append(Event(t, fault.__name__, detail))
            log(f"nemesis: {fault.__name__}: {detail} ({time.monotonic() - t:.1f} s)")

    def _pick(self, procs: list[Proc], n: int = 1) -> list[Proc]:
        return self.rng.sample(procs, n)

    # -- kills ---------------------------------------------------------------------------------

    async def kill_bookie(self) -> str:
        (b,) = self._pick(self.cluster.bookies)
        down = self.rng.uniform(1.0, 12.0)
        self.cluster.kill(b)
        await asyncio.sleep(down)
        await self.cluster.start_proc(b)
        return f"{b.name} down {down:.1f} s"

    async def kill_two_bookies(self) -> str:
        pair = self._pick(self.cluster.bookies, 2)
        down = self.rng.uniform(1.0, 12.0)
        for b in pair:
            self.cluster.kill(b)
        await asyncio.sleep(down)
        await asyncio.gather(*(self.cluster.start_proc(b) for b in pair))
        return f"{pair[0].name} and {pair[1].name} down {down:.1f} s"

    async def kill_gateway(self) -> str:
        (g,) = self._pick(self.cluster.gateways)
        down = self.rng.uniform(0.5, 6.0)
        self.cluster.kill(g)
        await asyncio.sleep(down)
        await self.cluster.start_proc(g)
        return f"{g.name} down {down:.1f} s"

    async def kill_zookeeper(self) -> str:
        down = self.rng.uniform(1.0, 6.0)
        await self.cluster.kill_zookeeper()
        await asyncio.sleep(down)
        await self.cluster.start_zookeeper()
        return f"zookeeper down {down:.1f} s"

    # -- pauses -----------------------------------------------------------------------------------

    async def zombie_gateway(self) -> str:
        (g,) = self._pick(self.cluster.gateways)
        paused = self.cluster.config.gateway_session_timeout * 2 + self.rng.uniform(0.0, 4.0)
        self.cluster.pause(g)
        await asyncio.sleep(paused)
        self.cluster.resume(g)
        return f"{g.name} stopped {paused:.1f} s (session timeout {self.cluster.config.gateway_session_timeout} s)"

    async def pause_bookie(self) -> str:
        (b,) = self._pick(self.cluster.bookies)
        paused = self.rng.uniform(1.0, 10.0)
        self.cluster.pause(b)
        await asyncio.sleep(paused)
        self.cluster.resume(b)
        return f"{b.name} stopped {paused:.1f} s"

    # -- disks ------------------------------------------------------------------------------------

    async def replicated(self) -> tuple[bool, str]:
        """Whether every ledger is fully replicated: none marked, none naming a bookie that is not
        registered and, after a wipe, two sampled checks finished since the wiped bookie was back
        (the first may have started before, when it was not yet there to be checked)."""
        marked, bad = await self.cluster.replication_state()
        if self.wiped_up_ms and len(self.checks_since_wipe) < 2:
            done = int(str((await self.cluster.recovery_stats()).get("last_check_ms", 0)))
            if done > self.wiped_up_ms:
                self.checks_since_wipe.add(done)
        checked = not self.wiped_up_ms or len(self.checks_since_wipe) >= 2
        return (not marked and not bad and checked,
                f"{marked} marked, {len(bad)} on missing bookies, sampled checks since the last wipe: "
                f"{len(self.checks_since_wipe) if self.wiped_up_ms else '-'}")

    async def _settled(self, within: float) -> bool:
        """Whether every ledger is fully replicated (waiting up to `within` s)."""
        deadline = time.monotonic() + within
        while True:
            try:
                if (await self.replicated())[0]:
                    return True
            except Exception:
                pass  # ZooKeeper may be reconnecting
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(1.0)

    async def wipe_bookie(self) -> str:
        # One permanently lost replica at a time: wait until the last one is refilled.
        if not await self._settled(60.0):
            return await self.kill_bookie() + " (instead of a wipe: ledgers still under-replicated)"
        (b,) = self._pick(self.cluster.bookies)
        bp = self.cluster.bookie(b)
        self.cluster.kill(b)
        shutil.rmtree(bp.data_dir, ignore_errors=True)
        bp.data_dir.mkdir(parents=True)
        bp.extra_args = self.cluster.bookie_args()
        bp.spawn()
        code = await asyncio.to_thread(bp.wait_exit, 120.0)
        if code != 2:
            self.anomalies.append(f"wiped {b.name} started without a format (exit {code})")
        # Its registration outlives a SIGKILL by the session timeout; format refuses until then.
        await self._wait_unregistered(bp.address, 60.0)
        fmt = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "quire", "bookie", "format", "--dir", str(bp.data_dir), "--port", str(bp.port),
             "--meta", self.cluster.meta_url],
            capture_output=True, text=True, cwd=ROOT, timeout=120,
        )
        if fmt.returncode != 0:
            self.anomalies.append(f"quire bookie format {b.name} failed: {fmt.stderr.strip()[-300:]}")
        await self.cluster.start_proc(b)
        self.wiped_up_ms, self.checks_since_wipe = int(time.time() * 1000), set()
        return f"{b.name} wiped: start refused (exit {code}), formatted (exit {fmt.returncode}), started"

    async def _wait_unregistered(self, address: str, within: float) -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                meta = await self.cluster.live_meta()
                if await asyncio.wait_for(meta.exists(layout.bookie_available(address)), 10.0) is None:
                    return
            except TimeoutError:
                pass
            await asyncio.sleep(0.5)

    async def _read_only(self, address: str) -> bool | None:
        meta = await self.cluster.live_meta()
        try:
            data, _ = await asyncio.wait_for(meta.get(layout.bookie_available(address)), 10.0)
        except (NoNodeError, TimeoutError):
            return None
        doc = json.loads(data) if data else {}
        return bool(doc.get("read_only", False)) if isinstance(doc, dict) else None

    async def _wait_mode(self, address: str, read_only: bool, within: float) -> bool:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if await self._read_only(address) is read_only:
                return True
            await asyncio.sleep(0.5)
        return False

    async def fill_disk(self) -> str:
        (b,) = self._pick(self.cluster.bookies)
        bp = self.cluster.bookie(b)
        usage = shutil.disk_usage(bp.data_dir)
        threshold = (usage.used + FILLER_BYTES / 2) / usage.total
        lwm = (usage.used + FILLER_BYTES / 4) / usage.total
        # Restarts with another threshold are the harness's means, not the fault: clean ones (a
        # SIGKILLed bookie's registration lingers for its session timeout).
        await self.cluster.terminate(b)
        await self.cluster.start_proc(b, ["--bookie-disk-usage-threshold", repr(threshold),
                                          "--bookie-disk-usage-lwm", repr(lwm)])
        filler = bp.data_dir.parent / f"{b.name}.filler"
        held = self.rng.uniform(3.0, 12.0)
        try:
            await asyncio.to_thread(_allocate, filler, FILLER_BYTES)
            went = await self._wait_mode(bp.address, True, 20.0)
            await asyncio.sleep(held)
        finally:
            filler.unlink(missing_ok=True)
        back = await self._wait_mode(bp.address, False, 20.0)
        if not went:
            self.anomalies.append(f"{b.name} did not turn read-only with its disk full")
        # The low threshold would trip on other writers of this filesystem: back to the default.
        await self.cluster.terminate(b)
        await self.cluster.start_proc(b)
        return (f"{b.name} disk full {held:.1f} s: read-only {'yes' if went else 'NO'}, writable again "
                f"{'yes' if back else 'no (others wrote to the disk meanwhile)'}; restarted")

    async def heal(self) -> None:
        """Everything running and resumed (the faults heal themselves; this is a safety net)."""
        if not self.cluster.zk.alive:
            await self.cluster.start_zookeeper()
        for p in self.cluster.bookies + self.cluster.gateways:
            if p.paused:
                self.cluster.resume(p)
            if not p.alive:
                await self.cluster.start_proc(p)


def _allocate(path: Path, size: int) -> None:
    with open(path, "wb") as f:
        os.posix_fallocate(f.fileno(), 0, size)
