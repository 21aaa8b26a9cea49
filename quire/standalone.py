"""`quire standalone`: embedded metadata store, N bookie child processes and one gateway.

Data layout under DATA_DIR: meta/ (embedded store), bookie-<i>/ (each bookie's ledgers and
journal, its output in bookie-<i>.log), standalone.json (the bookies' ports: a bookie's
identity is its address, so a restart must reuse them) and lock (flock: one standalone per data
dir). Replication: E=WQ=min(N,3), AQ=min(N,2) unless quire.replication says otherwise.
Start-up problems an operator can fix (port in use, data dir unusable or locked) are one line on
stderr and exit code 2, and a data dir this start created is removed again.
Bookies run as child processes so the work spreads over cores; they get SIGTERM if this process
dies (PR_SET_PDEATHSIG) and on a clean stop, after the gateway has closed its partition logs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from gateway.app import run_gateway
from gateway.config import GatewayConfig
from gateway.server import GatewayServer
from quire import settings as st
from quire.gateway import build_config
from quire.realtime import apply_realtime
from store import layout
from store.heap import settle_heap
from store.meta.api import MetaStore
from store.meta.factory import open_meta
from store.metrics import start_metrics
from store.net import free_port
from store.tasks import ProcessStop, cancel_and_wait, run_async

log = logging.getLogger(__name__)

STANDALONE_NODE_ID = 1
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


def replication(bookies: int) -> tuple[int, int, int]:
    """(E, WQ, AQ) for a standalone with this many bookies."""
    e = min(bookies, 3)
    return e, e, min(bookies, 2)


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
    extra_args: list[str] = field(default_factory=list)  # bookie settings, as flags
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
        # -P and cwd=the data dir: a `quire` folder in the caller's directory must not shadow the
        # package (python -m would put the current directory first on sys.path).
        cmd = [sys.executable, "-P", "-m", "quire", "--log-level", self.log_level, "bookie",
               "--data-dir", str(self.data_dir), "--host", self.host, "--port", str(self.port),
               "--meta", self.meta_url, *self.extra_args]
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=self.data_dir.parent,
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
        p = free_port(host)
        if p not in ports:
            ports.append(p)
    tmp = state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"bookie_ports": ports}))
    os.replace(tmp, state_file)
    return ports[:n]


class StartError(Exception):
    """A start-up problem the operator can fix: the message names it and the fix."""


def _port_problem(host: str, port: int) -> str | None:
    if _port_free(host, port):
        return None
    return (f"{host}:{port} is already in use (another Kafka or Quire?): stop it or choose another "
            "address with --listen HOST:PORT")


def _open_data_dir(path: Path) -> tuple[IO[str], bool]:
    """Create (if needed) and lock the data dir: (the held lock file, whether this created it)."""
    flag = "--data-dir"
    if path.exists() and not path.is_dir():
        raise StartError(f"data dir {path} is a file, not a directory: remove it or choose another {flag}")
    created = not path.exists()
    try:
        path.mkdir(parents=True, exist_ok=True)
        lock = open(path / "lock", "a+")
    except OSError as e:
        if created:
            shutil.rmtree(path, ignore_errors=True)
        reason = "it is not writable" if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS) else e.strerror
        raise StartError(f"cannot use data dir {path}: {reason}: choose a writable {flag}") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "?"
        lock.close()
        raise StartError(f"data dir {path} is in use by another quire standalone (pid {holder}): stop it "
                         f"first or choose another {flag}") from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock, created


def _bookie_flags(r: st.Resolved) -> list[str]:
    """The bookie settings of a standalone, passed on to its bookie children."""
    out = []
    for s in st.for_role(st.BOOKIE):
        if (st.STANDALONE not in s.roles or s.key in ("quire.data.dir", "quire.metrics")
                or r[s.key].source == "default"):
            continue
        v = r.get_value(s.key)
        out += [s.flag_name if v else f"--no-{s.flag_name[2:]}"] if s.type is bool else [s.flag_name, str(v)]
    return out


def bookie_metrics(address: tuple[str, int] | None, bookies: int) -> list[str]:
    """Each bookie child's --metrics: the ports after the gateway's (port 0: any free port each).
    Always explicit, so that a QUIRE_METRICS the children inherit does not apply to them."""
    if address is None:
        return ["off"] * bookies
    host, port = address
    return [f"{host}:{port + 1 + i if port else 0}" for i in range(bookies)]


def ready_line(config: GatewayConfig, port: int, base: Path, bookies: int, metrics: str | None,
               bookie_ports: list[str] | None = None, realtime: int = 0) -> str:
    """The one line printed when the standalone serves (metrics: the gateway's metrics URL, and
    the ports of its bookies'; realtime: the SCHED_RR priority its threads run at, 0 for none)."""
    e, wq, aq = config.ensemble_size, config.write_quorum, config.ack_quorum
    line = (f"quire standalone ready: {config.listen_host}:{port}, data {base}, "
            f"{bookies} bookie{'s' if bookies != 1 else ''} (E/WQ/AQ {e}/{wq}/{aq})")
    if metrics:
        line += f", metrics {metrics}"
        if bookie_ports:
            line += f" (bookies on ports {', '.join(bookie_ports)})"
    if realtime:
        line += f", real-time priority {realtime}"
    return line


async def run_standalone(r: st.Resolved, base: Path, *, log_level: str = "WARNING",
                         on_ready: Callable[[GatewayServer], None] | None = None) -> None:
    bookies = r.get_value("quire.bookies")
    meta_dir = base / "meta"
    meta_dir.mkdir(exist_ok=True)
    meta_url = f"embedded://{meta_dir}"
    ports = _load_ports(base / "standalone.json", bookies, "127.0.0.1")
    flags = _bookie_flags(r)
    metrics = bookie_metrics(st.metrics(r), bookies)
    children = [BookieChild(i, base / f"bookie-{i}", "127.0.0.1", ports[i], meta_url, log_level,
                            [*flags, "--metrics", metrics[i]]) for i in range(bookies)]
    repl = r.get_value("quire.replication")
    config = build_config(
        r, st.STANDALONE, meta_url=meta_url, data_dir=str(base),
        node_id=r.get_value("node.id") if r.get_value("node.id") is not None else STANDALONE_NODE_ID,
        replication=st.replication(repl) if repl else replication(bookies),
    )
    stop = ProcessStop().event
    meta = open_meta(meta_url)
    await meta.start()
    watchdog: asyncio.Task[None] | None = None
    try:
        for b in children:
            await b.start(meta)
        for b in children:
            await b.wait_registered(meta)
        watchdog = asyncio.create_task(_restart_dead(children, meta, stop))
        if not stop.is_set():
            await run_gateway(config, stop=stop, on_ready=on_ready)
    finally:
        await cancel_and_wait([watchdog])
        for b in children:
            b.terminate()
        await asyncio.gather(*(b.wait_exit(STOP_TIMEOUT) for b in children))
        with contextlib.suppress(Exception):
            await meta.close()


def main(args: argparse.Namespace) -> int:
    """`quire standalone`: 0 after a clean stop, 2 for a start-up problem (one line on stderr)."""
    r = st.resolve(st.STANDALONE, args, file=args.config)
    if args.host is not None or args.port is not None:  # --host/--port: shorthands for --listen
        host, port = st.hostport(r.get_value("listeners"), "listeners")
        r["listeners"] = st.Value(f"{args.host or host}:{args.port if args.port is not None else port}", "flag")
    if r.get_value("quire.bookies") < 1:
        raise st.SettingsError("quire.bookies (--bookies) must be at least 1")
    realtime = apply_realtime(r.get_value("quire.realtime.priority"))  # before any thread starts: they inherit it
    host, port = st.hostport(r.get_value("listeners"), "listeners (--listen)")
    metrics = st.metrics(r)
    base = Path(r.get_value("quire.data.dir")).resolve()
    ready = False
    created = False
    try:
        problem = _port_problem(host, port) if port else None
        if problem:
            raise StartError(problem)
        lock, created = _open_data_dir(base)
    except StartError as e:
        print(f"quire standalone: {e}", file=sys.stderr)
        return 2
    metrics_url = start_metrics(metrics)  # after the checks above: a refused start serves nothing
    bookie_ports = [a.rpartition(":")[2] for a in bookie_metrics(metrics, r.get_value("quire.bookies"))]

    def on_ready(server: GatewayServer) -> None:
        nonlocal ready
        ready = True
        print(ready_line(server.config, server.port, base, r.get_value("quire.bookies"), metrics_url,
                         bookie_ports if metrics and metrics[1] else None,
                         r.get_value("quire.realtime.priority") if realtime else 0), file=sys.stderr, flush=True)
        settle_heap()

    try:
        run_async(run_standalone(r, base, log_level=args.log_level, on_ready=on_ready))
    except OSError as e:
        print(f"quire standalone: {e.strerror or e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # a bookie child that would not start: its output follows
        print(f"quire standalone: {e}", file=sys.stderr)
        return 1
    finally:
        if created and not ready:
            shutil.rmtree(base, ignore_errors=True)  # leave nothing behind after a failed first start
        lock.close()
    return 0


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
