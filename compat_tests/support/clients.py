"""Small client-side helpers shared by the scenarios (topic setup through confluent-kafka's
admin, unique names, running a CLI with a timeout)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Sequence


def unique(prefix: str) -> str:
    """A topic/group name no other scenario (or earlier run on an external target) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, -1, config=config or {})], operation_timeout=30)
    futures[name].result(60)


def run(cmd: Sequence[str], *, input: bytes | None = None, timeout: float = 60.0,
        cwd: str | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run a client CLI; a non-zero exit fails with its output."""
    proc = subprocess.run(list(cmd), input=input, capture_output=True, timeout=timeout, cwd=cwd,
                          stdin=None if input is not None else subprocess.DEVNULL)
    if proc.returncode != 0:
        raise AssertionError(
            f"{cmd[0]} exited {proc.returncode}\nstdout: {proc.stdout[-3000:]!r}\nstderr: {proc.stderr[-3000:]!r}"
        )
    return proc
