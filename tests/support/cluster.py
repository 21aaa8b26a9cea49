"""`quire gateway` processes for cluster tests (ZooKeeper and bookies come from their fixtures)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from store.net import free_port
from tests.support.gateway import api_versions_ok

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0


@dataclass
class GatewayProc:
    """One gateway process: start(), wait_ready(), kill() (SIGKILL), output() (its log's tail)."""

    node_id: int
    meta_url: str
    log_path: Path
    port: int = field(default_factory=free_port)
    session_timeout: float = 2.0  # seconds: a dead gateway's leases vanish this long after it dies
    replication: str = "3/3/2"
    extra_args: list[str] = field(default_factory=list)  # more `quire gateway` flags
    proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        cmd = [
            sys.executable, "-m", "quire", "--log-level", "INFO", "gateway",
            "--session-timeout", str(self.session_timeout),
            "--meta", self.meta_url,
            "--listen", self.address,
            "--id", str(self.node_id),
            "--replication", self.replication,
            *self.extra_args,
        ]  # fmt: skip
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT
            )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not api_versions_ok("127.0.0.1", self.port, timeout=1.0):
            assert self.proc is not None
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"gateway {self.node_id} did not start:\n{self.output()}")
            time.sleep(0.1)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""
