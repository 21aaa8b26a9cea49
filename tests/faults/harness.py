"""A Quire cluster of real processes on loopback for fault runs: one ZooKeeper (Debian's, as in
tests/support/zookeeper.py), bookies (E=3, WQ=3, AQ=2) and gateways, plus a supervisor that
restarts any process that exits while the nemesis is not holding it down (a bookie stops itself
when its metadata session is lost, e.g. across a ZooKeeper outage: an operator's systemd would
start it again).

Shared by tests/faults/ (the suite's 2-minute run) and bench/chaos.py (long runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from store import layout
from store.meta.api import MetaStore, NoNodeError, SessionExpiredError
from store.meta.factory import open_meta
from tests.support.bookies import BookieProcess
from tests.support.cluster import GatewayProc
from tests.support.zookeeper import start_zookeeper, wait_zookeeper_ready

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")
META_TIMEOUT = 10.0  # one metadata call of the harness (ZooKeeper may be down)
logging.getLogger("kazoo").setLevel(logging.ERROR)  # the nemesis kills ZooKeeper: reconnects are expected


@dataclass
class ClusterConfig:
    bookies: int = 5
    gateways: int = 3
    replication: str = "3/3/2"
    gateway_session_timeout: float = 3.0  # seconds; a zombie pause lasts longer than this
    recovery_delay_s: float = 5.0  # a missing bookie's grace period before its ledgers are marked
    recovery_audit_interval_s: float = 10.0
    recovery_check_interval_s: float = 20.0  # the sampled check finds wiped copies
    disk_check_interval_s: float = 1.0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def bookie_base() -> Path:
    """Where bookies keep their data: a fresh directory on a tmpfs (/dev/shm) when there is one.
    The disk-fill fault measures the bookie's filesystem: on a disk other programs share, their
    writes and deletes move the usage by gigabytes while a fault lasts; a tmpfs of our own does
    not move (and SIGKILL loses nothing there that a disk would keep)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return Path(tempfile.mkdtemp(prefix="quire-faults-", dir=shm))
    return Path(tempfile.mkdtemp(prefix="quire-faults-bookies-"))


class ZooKeeperProc:
    """A ZooKeeper server on a fixed port and data dir, killable and restartable."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        self.proc, self.port = start_zookeeper(self.base, self.port or None)
        wait_zookeeper_ready(self.proc, self.port, self.base)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()


@dataclass
class Proc:
    """One supervised process: `down` while the nemesis holds it down (no automatic restart)."""

    name: str
    kind: str  # "bookie" | "gateway" | "zookeeper"
    handle: BookieProcess | GatewayProc | ZooKeeperProc
    down: bool = False
    paused: bool = False
    exits: list[int | None] = field(default_factory=list)  # unexpected exit codes seen

    @property
    def pid(self) -> int | None:
        p = self.handle.proc
        return p.pid if p is not None and p.poll() is None else None

    @property
    def alive(self) -> bool:
        p = self.handle.proc
        return p is not None and p.poll() is None

    def signal(self, sig: int) -> None:
        if (pid := self.pid) is not None:
            os.kill(pid, sig)


class Cluster:
    def __init__(self, base: Path, config: ClusterConfig | None = None) -> None:
        self.base = base
        self.config = config or ClusterConfig()
        self.bookie_base = bookie_base()
        self.zk = ZooKeeperProc(base / "zookeeper")
        self.meta_url = ""
        self.bookies: list[Proc] = []
        self.gateways: list[Proc] = []
        self.meta: MetaStore | None = None
        self.restarts = 0  # by the supervisor
        self._supervisor: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # nemesis and supervisor never start the same process at once

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(self.gateway(g).address for g in self.gateways)

    def bookie_args(self) -> list[str]:
        c = self.config
        return ["--recovery-delay-s", str(c.recovery_delay_s),
                "--recovery-audit-interval-s", str(c.recovery_audit_interval_s),
                "--recovery-check-interval-s", str(c.recovery_check_interval_s),
                "--bookie-disk-check-interval-s", str(c.disk_check_interval_s)]

    async def start(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(self.zk.start)
        self.meta_url = f"zk://{self.zk.address}/quire"
        log(f"zookeeper on {self.zk.address}")
        self.meta = open_meta(self.meta_url, session_timeout=10.0)
        await self.meta.start()
        for i in range(self.config.bookies):
            b = BookieProcess(self.meta_url, self.bookie_base / f"bookie-{i}", extra_args=self.bookie_args())
            self.bookies.append(Proc(f"bookie-{i}", "bookie", b))
        for p in self.bookies:
            self.bookie(p).spawn()
        for p in self.bookies:
            await self.bookie(p).wait_registered(self.meta)
        log("bookies: " + ", ".join(self.bookie(p).address for p in self.bookies))
        for n in range(1, self.config.gateways + 1):
            g = GatewayProc(n, self.meta_url, self.base / f"gateway-{n}.log",
                            session_timeout=self.config.gateway_session_timeout,
                            replication=self.config.replication)
            self.gateways.append(Proc(f"gateway-{n}", "gateway", g))
            g.start()
        for p in self.gateways:
            await asyncio.to_thread(self.gateway(p).wait_ready)
        log(f"gateways: {self.bootstrap}")
        self._supervisor = asyncio.create_task(self._supervise())

    async def close(self) -> None:
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        for p in self.gateways + self.bookies:
            with contextlib.suppress(OSError):
                p.signal(signal.SIGCONT)
            self._kill(p)
        if self.meta is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.meta.close(), META_TIMEOUT)
        self.zk.kill()
        if self.bookie_base != self.base:
            for f in self.bookie_base.glob("*.log"):  # the logs stay with the run's other files
                shutil.move(f, self.base / f.name)
            shutil.rmtree(self.bookie_base, ignore_errors=True)

    @staticmethod
    def bookie(p: Proc) -> BookieProcess:
        assert isinstance(p.handle, BookieProcess)
        return p.handle

    @staticmethod
    def gateway(p: Proc) -> GatewayProc:
        assert isinstance(p.handle, GatewayProc)
        return p.handle

    # -- process control (nemesis and supervisor) -----------------------------------------------

    def _kill(self, p: Proc) -> None:
        proc = p.handle.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGCONT)
                os.kill(proc.pid, signal.SIGKILL)
        if proc is not None:
            proc.wait()
        p.paused = False

    def kill(self, p: Proc) -> None:
        """SIGKILL and hold down (no supervisor restart) until start()."""
        p.down = True
        self._kill(p)

    async def terminate(self, p: Proc) -> None:
        """SIGTERM (a clean shutdown: a bookie unregisters at once) and hold down until start()."""
        p.down = True
        await asyncio.to_thread(self.bookie(p).terminate)
        p.paused = False

    async def start_proc(self, p: Proc, extra_args: list[str] | None = None) -> None:
        """(Re)start a process held down or dead, and wait until it serves."""
        async with self._lock:
            if p.alive:
                p.down = False
                return
            if p.kind == "bookie":
                b = self.bookie(p)
                b.extra_args = self.bookie_args() + list(extra_args or [])
                b.spawn()
                await b.wait_registered(await self.live_meta(), within=120.0)
            elif p.kind == "gateway":
                g = self.gateway(p)
                g.start()
                await asyncio.to_thread(g.wait_ready)
            p.down = False

    def pause(self, p: Proc) -> None:
        p.paused = True
        p.signal(signal.SIGSTOP)

    def resume(self, p: Proc) -> None:
        p.signal(signal.SIGCONT)
        p.paused = False

    async def kill_zookeeper(self) -> None:
        self.zk.kill()

    async def start_zookeeper(self) -> None:
        await asyncio.to_thread(self.zk.start)

    async def _supervise(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            if not self.zk.alive:
                continue  # the nemesis holds ZooKeeper down; it restarts it itself
            for p in self.bookies + self.gateways:
                if p.down or p.alive or self._lock.locked():
                    continue
                code = p.handle.proc.poll() if p.handle.proc is not None else None
                p.exits.append(code)
                self.restarts += 1
                log(f"supervisor: {p.name} exited with {code}, restarting it")
                try:
                    await self.start_proc(p)
                except Exception as e:
                    log(f"supervisor: {p.name} did not start again: {e!r}")

    # -- metadata views --------------------------------------------------------------------------

    async def live_meta(self) -> MetaStore:
        """The harness's metadata-store client, opened again if its session expired (the harness
        process can be starved past its session timeout on a busy machine, or miss a ZooKeeper
        outage's end): a dead session must not fail every later fault and check."""
        assert self.meta is not None
        try:
            await asyncio.wait_for(self.meta.exists("/"), META_TIMEOUT)
            return self.meta
        except SessionExpiredError:
            pass
        log("harness: metadata session expired, opening a new one")
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.meta.close(), META_TIMEOUT)
        self.meta = open_meta(self.meta_url, session_timeout=10.0)
        await self.meta.start()
        return self.meta

    async def _meta_call(self, coro: Awaitable[T]) -> T:
        return await asyncio.wait_for(coro, META_TIMEOUT)

    async def replication_state(self) -> tuple[int, list[int]]:
        """(marked under-replicated ledgers, ledgers naming a bookie that is not registered)."""
        from store.recovery import marks

        meta = await self.live_meta()
        marked = await self._meta_call(marks.marked_ledgers(meta))
        try:
            alive = set(await self._meta_call(meta.children(layout.BOOKIES_AVAILABLE)))
            names = await self._meta_call(meta.children(layout.LEDGERS))
        except NoNodeError:
            return len(marked), []
        from store.ledger.metadata import LedgerMetadata

        bad = []
        for n in names:
            try:
                data, _ = await self._meta_call(meta.get(layout.ledger(int(n))))
            except (NoNodeError, ValueError):
                continue
            md = LedgerMetadata.from_bytes(data)
            if any(a not in alive for a in md.bookies()):
                bad.append(md.ledger_id)
        return len(marked), bad

    async def recovery_stats(self) -> dict[str, object]:
        from store.recovery import marks

        return dict(await self._meta_call(marks.read_stats(await self.live_meta())))

