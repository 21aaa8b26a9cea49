"""`quire standalone`: embedded metadata store, N bookie child processes and one gateway.

Data layout under DATA_DIR: meta/ (embedded store), bookie-<i>/ (each bookie's ledgers and
journal, its output in bookie-<i>.log) and standalone.json (the bookies' ports: a bookie's
identity is its address, so a restart must reuse them). Replication: E=WQ=min(N,3), AQ=min(N,2).
Bookies run as child processes so the work spreads over cores; they get SIGTERM if this process
dies (PR_SET_PDEATHSIG) and on a clean stop, after the gateway has closed its partition logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from gateway.app import _install_signals, run_gateway
from gateway.config import GatewayConfig
from store import layout
from store.meta.api import MetaStore
from store.meta.factory import open_meta

log = logging.getLogger(__name__)

STANDALONE_NODE_ID = 1
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


def replication(bookies: int) -> tuple[int, int, int]:
    """(E, WQ, AQ) for a standalone with this many bookies."""
    e = min(bookies, 3)
    return e, e, min(bookies, 2)


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the standalone process dies (Linux)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@dataclass
class BookieChild:
    index: int
    data_dir: Path
    host: str
    port: int
    meta_url: str
    log_level: str
    proc: subprocess.Popen[bytes] | None = None
    seen_owners: set[int] = field(default_factory=set)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / f"{self.data_dir.name}.log"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self) -> None:
        cmd = [sys.executable, "-m", "quire", "--log-level", self.log_level, "bookie", "--dir", str(self.data_dir),
               "--host", self.host, "--port", str(self.port), "--meta", self.meta_url]
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         preexec_fn=_die_with_parent if sys.platform == "linux" else None)

    def tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    async def wait_registered(self, meta: MetaStore, within: float = START_TIMEOUT) -> None:
        """Until its availability node exists under a session not seen before this start."""
        deadline = time.monotonic() + within
        path = layout.bookie_available(self.address)
        while time.monotonic() < deadline:
            if not self.alive():
                code = self.proc.returncode if self.proc is not None else None
                raise RuntimeError(f"bookie {self.address} exited with {code}:\n{self.tail()}")
            stat = await meta.exists(path)
            if stat is not None and stat.ephemeral_owner not in self.seen_owners:
                self.seen_owners.add(stat.ephemeral_owner)
                return
            await asyncio.sleep(0.05)
        raise RuntimeError(f"bookie {self.address} did not register within {within} s:\n{self.tail()}")

    async def start(self, meta: MetaStore) -> None:
        stat = await meta.exists(layout.bookie_available(self.address))
        if stat is not None:
            self.seen_owners.add(stat.ephemeral_owner)  # a previous incarnation's node
        deadline = time.monotonic() + 15.0
        while not _port_free(self.host, self.port):  # a previous incarnation may still be exiting
            if time.monotonic() > deadline:
                raise RuntimeError(f"bookie port {self.port} is in use (another standalone on this data dir?)")
            await asyncio.sleep(0.2)
        self.spawn()

    def terminate(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGTERM)

    async def wait_exit(self, limit: float) -> None:
        if self.proc is None:
            return
        try:
            await asyncio.to_thread(self.proc.wait, limit)
        except subprocess.TimeoutExpired:
            log.warning("bookie %s did not stop within %.0f s: killing it", self.address, limit)
            self.proc.kill()
            self.proc.wait()


def _load_ports(state_file: Path, n: int, host: str) -> list[int]:
    ports: list[int] = []
    if state_file.exists():
        ports = [int(p) for p in json.loads(state_file.read_text()).get("bookie_ports", [])]
    while len(ports) < n:
        p = _free_port(host)
        if p not in ports:
            ports.append(p)
    tmp = state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"bookie_ports": ports}))
    os.replace(tmp, state_file)
    return ports[:n]


def _prepare(data_dir: str, bookies: int) -> tuple[Path, str, list[int]]:
    if bookies < 1:
        raise ValueError("--bookies must be at least 1")
    base = Path(data_dir).resolve()
    (base / "meta").mkdir(parents=True, exist_ok=True)
    return base, f"embedded://{base / 'meta'}", _load_ports(base / "standalone.json", bookies, "127.0.0.1")


async def run_standalone(
    data_dir: str, host: str = "127.0.0.1", port: int = 9092, bookies: int = 1, *, log_level: str = "WARNING"
) -> None:
    base, meta_url, ports = _prepare(data_dir, bookies)
    children = [BookieChild(i, base / f"bookie-{i}", "127.0.0.1", ports[i], meta_url, log_level)
                for i in range(bookies)]
    stop = asyncio.Event()
    _install_signals(stop)
    meta = open_meta(meta_url)
    await meta.start()
    watchdog: asyncio.Task[None] | None = None
    try:
        for b in children:
            await b.start(meta)
        for b in children:
            await b.wait_registered(meta)
        watchdog = asyncio.create_task(_restart_dead(children, meta, stop))
        e, wq, aq = replication(bookies)
        config = GatewayConfig(meta_url=meta_url, listen_host=host, listen_port=port, node_id=STANDALONE_NODE_ID,
                               data_dir=str(base), ensemble_size=e, write_quorum=wq, ack_quorum=aq,
                               default_replication_factor=e)
        if not stop.is_set():
            await run_gateway(config, stop=stop)
    finally:
        if watchdog is not None:
            watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watchdog
        for b in children:
            b.terminate()
        await asyncio.gather(*(b.wait_exit(STOP_TIMEOUT) for b in children))
        with contextlib.suppress(Exception):
            await meta.close()


async def _restart_dead(children: list[BookieChild], meta: MetaStore, stop: asyncio.Event) -> None:
    """A bookie that dies while the standalone runs is started again (on the same directory)."""
    while not stop.is_set():
        await asyncio.sleep(1.0)
        for b in children:
            if not b.alive() and not stop.is_set():
                code = b.proc.returncode if b.proc is not None else None
                log.error("bookie %s exited with %s; restarting it:\n%s", b.address, code, b.tail()[-1000:])
                try:
                    await b.start(meta)
                    await b.wait_registered(meta)
                except Exception as e:
                    log.error("restarting bookie %s failed: %s", b.address, e)
