"""Fixtures for the metadata-store tests: store factories and child-process clients."""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from store.meta.api import MetaStore, WatchEvent
from store.meta.factory import open_meta

REPO = Path(__file__).resolve().parents[3]
CHILD = Path(__file__).with_name("meta_child.py")
WAIT = 30.0  # generous deadline for things that happen "eventually" (no timing asserted)

StoreFactory = Callable[..., Awaitable[MetaStore]]


@pytest.fixture
async def open_store(meta_url: str) -> AsyncIterator[StoreFactory]:
    """open_store(session_timeout=10.0) -> a started store on this test's URL; closed at the end."""
    opened: list[MetaStore] = []

    async def factory(session_timeout: float = 10.0, url: str | None = None) -> MetaStore:
        store = open_meta(url or meta_url, session_timeout=session_timeout)
        await store.start()
        opened.append(store)
        return store

    yield factory
    for store in reversed(opened):
        await store.close()


class Events:
    """Collects watch events; `await events.next()` returns the next one."""

    def __init__(self) -> None:
        self.seen: list[WatchEvent] = []
        self._queue: asyncio.Queue[WatchEvent] = asyncio.Queue()

    def __call__(self, event: WatchEvent) -> None:
        self.seen.append(event)
        self._queue.put_nowait(event)

    async def next(self) -> WatchEvent:
        return await asyncio.wait_for(self._queue.get(), WAIT)


class ChildClient:
    """tests/store/meta/meta_child.py in a subprocess; lines in, lines out."""

    def __init__(self, url: str, session_timeout: float) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), url, str(session_timeout)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=str(REPO),
            env=env,
            text=True,
        )
        self.pid = self.proc.pid
        self._lines: queue.Queue[str] = queue.Queue()
        self._buffer: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        ready = self.expect("READY")
        self.session_id = int(ready.split()[1])

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put("EOF")

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def expect(self, prefix: str | tuple[str, ...], timeout: float = WAIT) -> str:
        """The first unconsumed line starting with `prefix`; other lines stay for later."""
        deadline = time.monotonic() + timeout
        while True:
            for i, line in enumerate(self._buffer):
                if line.startswith(prefix):
                    del self._buffer[i]
                    return line
            if "EOF" in self._buffer:
                raise AssertionError(f"child {self.pid} exited before printing {prefix!r}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"child {self.pid} printed no {prefix!r} line within {timeout} s")
            try:
                self._buffer.append(self._lines.get(timeout=left))
            except queue.Empty:
                continue

    async def ask(self, command: str) -> str:
        """Send a command and return its OK/ERR answer (without blocking the event loop)."""
        self.send(command)
        return await asyncio.to_thread(self.expect, ("OK", "ERR"))

    async def expect_async(self, prefix: str) -> str:
        return await asyncio.to_thread(self.expect, prefix)

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGCONT)
            os.kill(self.pid, signal.SIGKILL)
        self.proc.wait()


@pytest.fixture
def spawn_child() -> Iterator[Callable[[str, float], ChildClient]]:
    children: list[ChildClient] = []

    def spawn(url: str, session_timeout: float) -> ChildClient:
        child = ChildClient(url, session_timeout)
        children.append(child)
        return child

    yield spawn
    for child in children:
        child.kill()
