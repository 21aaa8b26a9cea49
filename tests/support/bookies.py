"""pytest fixtures: bookies as real `quire bookie` processes.

Async (the usual way)::

    async def test_x(bookie_cluster, meta_url):
        bookies = await bookie_cluster(3, meta_url)            # racks=["r1", "r2", "r3"] optional
        addrs = [b.address for b in bookies]                   # "127.0.0.1:port"
        bookies[0].kill()          # SIGKILL (waits for the exit)
        bookies[1].stop()          # SIGSTOP: alive but unresponsive; .cont() resumes (SIGCONT)
        await bookies[0].restart() # same dirs and port; returns once registered again
        bookies[2].terminate()     # SIGTERM: clean shutdown (everything flushed)

Each process has its own data dir (`b.data_dir`, journal in `b.data_dir / "journal"`) under the
test's tmp_path and its output in `b.log_path`. `bookie_cluster` waits until each bookie's
ephemeral node bookie_available(address) exists with a fresh session, and kills every process
at teardown. `bookie_cluster.start_one(meta_url, data_dir=..., port=...)` starts one more
(e.g. on an existing directory) and `spawn()` starts without waiting (for tests expecting the
start to fail: `b.wait_exit()` returns the exit code).

Sync: `start_bookies(n, meta_url, base_dir, racks=None) -> list[BookieProcess]` does the same
from non-async code; call `stop_all(bookies)` when done.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from store import layout
from store.meta.api import MetaStore
from store.meta.factory import open_meta
from store.net import free_port

T = TypeVar("T")
START_TIMEOUT = 60.0
ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    # Works whether or not the package is pip-installed.
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{path}" if path else str(ROOT))


class BookieProcess:
    def __init__(
        self,
        meta_url: str,
        data_dir: Path,
        port: int | None = None,
        rack: str | None = None,
        journal_dir: Path | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self.meta_url = meta_url
        self.extra_args = list(extra_args or [])  # more `quire bookie` flags
        self.data_dir = Path(data_dir)
        self.journal_dir = journal_dir
        self.port = port or free_port()
        self.rack = rack
        self.host = "127.0.0.1"
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._last_owner = 0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self) -> None:
        """Start the process without waiting for it to register."""
        assert not self.alive, "already running"
        cmd = [sys.executable, "-m", "quire", "--log-level", "INFO", "bookie", "--dir", str(self.data_dir)]
        cmd += ["--host", self.host, "--port", str(self.port), "--meta", self.meta_url]
        if self.journal_dir is not None:
            cmd += ["--journal-dir", str(self.journal_dir)]
        if self.rack is not None:
            cmd += ["--rack", self.rack]
        cmd += self.extra_args
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env(), cwd=ROOT
            )

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    async def wait_registered(self, meta: MetaStore, within: float = START_TIMEOUT) -> None:
        """Until bookie_available(address) exists, owned by a session newer than last time."""
        deadline = time.monotonic() + within
        path = layout.bookie_available(self.address)
        while time.monotonic() < deadline:
            if not self.alive:
                raise RuntimeError(f"bookie {self.address} exited with {self.returncode}:\n{self.output()[-3000:]}")
            stat = await meta.exists(path)
            if stat is not None and stat.ephemeral_owner not in (0, self._last_owner):
                self._last_owner = stat.ephemeral_owner
                return
            await asyncio.sleep(0.05)
        raise RuntimeError(f"bookie {self.address} did not register within {within} s:\n{self.output()[-3000:]}")

    async def start(self, meta: MetaStore) -> None:
        self.spawn()
        await self.wait_registered(meta)

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def _signal(self, sig: int) -> None:
        if self.alive:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.alive:
            self.cont()
            os.kill(self.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()

    def stop(self) -> None:
        self._signal(signal.SIGSTOP)

    def cont(self) -> None:
        self._signal(signal.SIGCONT)

    def terminate(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (clean shutdown) and wait; SIGKILL if it does not exit in time."""
        if self.alive:
            self.cont()
            os.kill(self.pid, signal.SIGTERM)
            try:
                assert self.proc is not None
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.returncode

    def wait_exit(self, timeout: float = START_TIMEOUT) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    async def restart(self, meta: MetaStore | None = None) -> None:
        """Kill if running, then start again on the same dirs and port."""
        self.kill()
        if meta is None:
            meta = self._meta
        await self.start(meta)

    _meta: MetaStore


class BookieCluster:
    """The `bookie_cluster` fixture's value: call it to start bookies."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.bookies: list[BookieProcess] = []
        self._metas: dict[str, MetaStore] = {}
        self._n = 0

    async def meta(self, meta_url: str) -> MetaStore:
        m = self._metas.get(meta_url)
        if m is None:
            m = open_meta(meta_url)
            await m.start()
            self._metas[meta_url] = m
        return m

    def new(
        self, meta_url: str, *, data_dir: Path | None = None, port: int | None = None, rack: str | None = None
    ) -> BookieProcess:
        if data_dir is None:
            data_dir = self.base / f"bookie-{self._n}"
            self._n += 1
        b = BookieProcess(meta_url, data_dir, port=port, rack=rack)
        self.bookies.append(b)
        return b

    async def start_one(
        self, meta_url: str, *, data_dir: Path | None = None, port: int | None = None, rack: str | None = None
    ) -> BookieProcess:
        b = self.new(meta_url, data_dir=data_dir, port=port, rack=rack)
        b._meta = await self.meta(meta_url)
        await b.start(b._meta)
        return b

    async def __call__(self, n: int, meta_url: str, racks: list[str] | None = None) -> list[BookieProcess]:
        meta = await self.meta(meta_url)
        out = [self.new(meta_url, rack=racks[i] if racks else None) for i in range(n)]
        for b in out:
            b._meta = meta
            b.spawn()
        for b in out:
            await b.wait_registered(meta)
        return out

    async def close(self) -> None:
        for b in self.bookies:
            b.kill()
        for m in self._metas.values():
            with contextlib.suppress(Exception):
                await m.close()


@pytest.fixture
async def bookie_cluster(tmp_path: Path) -> AsyncIterator[BookieCluster]:
    cluster = BookieCluster(tmp_path / "bookies")
    try:
        yield cluster
    finally:
        await cluster.close()


def _run_in_thread(coro: Coroutine[Any, Any, T]) -> T:
    result: list[T] = []
    error: list[BaseException] = []

    def run() -> None:
        try:
            result.append(asyncio.run(coro))
        except BaseException as e:
            error.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if error:
        raise error[0]
    return result[0]


def start_bookies(n: int, meta_url: str, base_dir: Path, racks: list[str] | None = None) -> list[BookieProcess]:
    """Sync variant of bookie_cluster (no fixture): start n bookies and wait for them."""
    bookies = [
        BookieProcess(meta_url, Path(base_dir) / f"bookie-{i}", rack=racks[i] if racks else None) for i in range(n)
    ]

    async def go() -> None:
        meta = open_meta(meta_url)
        await meta.start()
        try:
            for b in bookies:
                b.spawn()
            for b in bookies:
                await b.wait_registered(meta)
        finally:
            await meta.close()

    try:
        _run_in_thread(go())
    except BaseException:
        stop_all(bookies)
        raise
    return bookies


def stop_all(bookies: list[BookieProcess]) -> None:
    for b in bookies:
        b.kill()
