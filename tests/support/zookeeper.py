"""pytest fixtures: a real ZooKeeper (Debian's package) on a free loopback port.

`zookeeper` (session scope) starts one ZooKeeper per test session; `meta_url` (function scope,
parametrized over embedded and zk) gives each test a fresh metadata-store URL.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from store.net import free_port

ZK_JAR = "/usr/share/java/zookeeper.jar"
TICK_MS = 200  # min session timeout 2 ticks = 0.4 s, so tests can expire sessions quickly
START_TIMEOUT = 90.0


def _four_letter(port: int, word: bytes, timeout: float = 1.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(word)
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
        return b"".join(chunks)


@dataclass
class ZooKeeperServer:
    port: int
    pid: int
    data_dir: str

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, chroot: str | None = None) -> str:
        """A zk:// URL with a fresh chroot (a unique one unless given)."""
        chroot = chroot or f"/test-{uuid.uuid4().hex[:12]}"
        if not chroot.startswith("/"):
            chroot = "/" + chroot
        return f"zk://{self.address}{chroot}"


def start_zookeeper(base: Path, port: int | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """Start a ZooKeeper server with its data under `base` (kept: a restart on the same base and
    port resumes it) on `port` (default: a free one); (process, port). Output: base/zookeeper.out."""
    port = port or free_port()
    data = base / "data"
    data.mkdir(parents=True, exist_ok=True)
    cfg = base / "zoo.cfg"
    cfg.write_text(
        "\n".join(
            [
                f"tickTime={TICK_MS}",
                f"dataDir={data}",
                f"clientPort={port}",
                "clientPortAddress=127.0.0.1",
                "maxSessionTimeout=60000",
                "admin.enableServer=false",
                "4lw.commands.whitelist=ruok,srvr,stat,mntr",
                "maxClientCnxns=0",
                # Test data is disposable: don't fsync every transaction.
                "forceSync=no",
                "",
            ]
        )
    )
    log_dir = base / "logs"
    log_dir.mkdir(exist_ok=True)
    env = dict(os.environ, ZOO_LOG_DIR=str(log_dir), JVMFLAGS="-Xmx256m")
    cmd = [
        "java",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        f"-Dzookeeper.log.dir={log_dir}",
        "-cp",
        f"{ZK_JAR}:/usr/share/java/*",
        "org.apache.zookeeper.server.quorum.QuorumPeerMain",
        str(cfg),
    ]
    with open(base / "zookeeper.out", "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    return proc, port


def wait_zookeeper_ready(proc: subprocess.Popen[bytes], port: int, base: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log = (base / "zookeeper.out").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"ZooKeeper exited with {proc.returncode}:\n{log}")
        try:
            if _four_letter(port, b"ruok") == b"imok" and b"Mode:" in _four_letter(port, b"srvr"):
                return
        except OSError:
            pass
        time.sleep(0.1)
    log = (base / "zookeeper.out").read_text(errors="replace")[-3000:]
    raise RuntimeError(f"ZooKeeper did not answer on port {port} within {START_TIMEOUT} s:\n{log}")


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[ZooKeeperServer]:
    if shutil.which("java") is None:
        pytest.skip("java is not installed (apt-get install default-jre-headless zookeeper)")
    if not os.path.exists(ZK_JAR):
        pytest.skip(f"{ZK_JAR} is missing (apt-get install zookeeper)")
    base = Path(tempfile.mkdtemp(prefix="quire-zk-"))
    proc = None
    try:
        for attempt in range(3):
            proc, port = start_zookeeper(base / f"run{attempt}")
            try:
                wait_zookeeper_ready(proc, port, base / f"run{attempt}")
                break
            except RuntimeError:
                # Most likely the free port was taken between probing and binding: retry.
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                if attempt == 2:
                    raise
        assert proc is not None
        yield ZooKeeperServer(port=port, pid=proc.pid, data_dir=str(base))
    finally:
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=["embedded", "zk"])
def meta_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh metadata-store URL: an empty embedded directory, or a unique ZooKeeper chroot."""
    if request.param == "embedded":
        return f"embedded://{tmp_path / 'meta'}"
    server: ZooKeeperServer = request.getfixturevalue("zookeeper")
    return server.url()
