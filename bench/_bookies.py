"""Bookie processes for the benchmarks: start N on free loopback ports, wait until they are
registered in the metadata store, stop them (SIGTERM, then SIGKILL)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from store import layout
from store.meta.api import MetaStore
from store.net import free_port

ROOT = Path(__file__).resolve().parents[1]


def spawn_bookies(
    url: str, base: Path, n: int, *, extra: Sequence[str] = (), profile_dir: str | None = None
) -> list[subprocess.Popen[bytes]]:
    """Start n `quire bookie` processes with data and logs under `base` (extra: more bookie
    flags; profile_dir: run each under cProfile, writing bookie-<i>.prof there)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = []
    base.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        d = base / f"bookie-{i}"
        d.mkdir(parents=True)
        prof = ["-m", "cProfile", "-o", f"{profile_dir}/bookie-{i}.prof"] if profile_dir else []
        cmd = [sys.executable, *prof, "-m", "quire", "bookie", "--dir", str(d),
               "--port", str(free_port()), "--meta", url, *extra]  # fmt: skip
        with (base / f"bookie-{i}.log").open("wb") as out:
            procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT))
    return procs


async def wait_bookies(meta: MetaStore, procs: list[subprocess.Popen[bytes]], n: int, base: Path) -> None:
    """Until n bookies are registered; stops them and raises if one exits or 60 s pass."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if len(await meta.children(layout.BOOKIES_AVAILABLE)) >= n:
                return
        except Exception:
            pass  # the store may not have the path yet
        if any(p.poll() is not None for p in procs):
            break
        await asyncio.sleep(0.1)
    stop(procs)
    raise RuntimeError(f"bookies did not register; see logs in {base}")


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def process_tree(pid: int) -> list[int]:
    """pid and its descendants (from /proc/<pid>/task/*/children), parents first."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass  # the task ended meanwhile
    return out


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process from /proc/<pid>/stat, in seconds (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
