"""Helpers for the real-client group tests (tests/gateway/test_groups_*.py): a standalone
gateway with fast group settings, member processes, and waiting on what they print."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.gateway import StandaloneGateway

ROOT = Path(__file__).resolve().parents[2]
FAST_GROUP_ENV = {
    "QUIRE_GROUP_INITIAL_REBALANCE_DELAY_MS": "300",
    "QUIRE_OFFSETS_TOPIC_PARTITIONS": "4",
    # Consumer-protocol members learn of a rebalance from their next heartbeat: beat often.
    "QUIRE_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": "300",
    "QUIRE_GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS": "100",
    # Targets computed on the heartbeat that needs one (Kafka before 4.3), for step-by-step tests.
    "QUIRE_GROUP_CONSUMER_ASSIGNMENT_INTERVAL_MS": "0",
    # A crashed consumer-protocol member is fenced after 6 s, not Kafka's 45 s.
    "QUIRE_GROUP_CONSUMER_SESSION_TIMEOUT_MS": "6000",
    "QUIRE_GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS": "1000",
    # transactions past their timeout are looked for often (tests wait for the abort)
    "QUIRE_TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS": "200",
}


@contextmanager
def fast_group_env() -> Iterator[None]:
    """Group settings for tests (GatewayConfig has no flags for them yet: env fallback)."""
    saved = {k: os.environ.get(k) for k in FAST_GROUP_ENV}
    os.environ.update(FAST_GROUP_ENV)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def start_gateway(data_dir: Path) -> StandaloneGateway:
    with fast_group_env():
        gw = StandaloneGateway(data_dir)
        return gw.start()


class Member:
    """One group member process (tests/coordinator/group_member.py) and what it printed."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, *extra: str) -> None:
        self.client = client
        cmd = [sys.executable, "-m", "tests.coordinator.group_member", "--client", client,
               "--bootstrap", bootstrap, "--topic", topic, "--group", group, *extra]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.DEVNULL, cwd=ROOT, env=env, text=True)
        self.lines: list[str] = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.lock:
                self.lines.append(line.strip())

    def snapshot(self) -> list[str]:
        with self.lock:
            return list(self.lines)

    @property
    def assignment(self) -> set[int] | None:
        """The latest assignment it printed (None before its first)."""
        for line in reversed(self.snapshot()):
            if line.startswith("ASSIGN"):
                rest = line[len("ASSIGN"):].strip()
                return {int(p) for p in rest.split(",")} if rest else set()
        return None

    def stats(self) -> dict[str, str]:
        """The latest librdkafka statistics it printed (confluent members; {} before the first)."""
        for line in reversed(self.snapshot()):
            if line.startswith("STATS "):
                return dict(kv.split("=", 1) for kv in line.split()[1:])
        return {}

    def heartbeats(self) -> int:
        return int(self.stats().get("heartbeats", 0))

    def assign_count(self) -> int:
        return sum(1 for line in self.snapshot() if line.startswith("ASSIGN"))

    def consumed(self) -> set[tuple[int, int]]:
        out = set()
        for line in self.snapshot():
            if line.startswith("MSG "):
                _, p, o = line.split()
                out.add((int(p), int(o)))
        return out

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive:
            self.proc.kill()
        self.proc.wait()

    def terminate(self, timeout: float = 30.0) -> None:
        if self.alive:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_for(pred: Callable[[], bool], within: float, what: str, interval: float = 0.2) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {within} s waiting for {what}")


def exact_cover(members: list[Member], partitions: int) -> bool:
    """Every partition has exactly one owner among the members' latest assignments."""
    seen: list[int] = []
    for m in members:
        a = m.assignment
        if a is None:
            return False
        seen += sorted(a)
    return sorted(seen) == list(range(partitions))
