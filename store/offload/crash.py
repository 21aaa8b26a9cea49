"""Test hook: QUIRE_OFFLOAD_CRASH_AT=<step> makes the process SIGKILL itself at that offload
step (upload, switch, delete), so tests can check that a crash there leaves the old state or
the new one and that a restart converges."""

from __future__ import annotations

import os
import signal

ENV = "QUIRE_OFFLOAD_CRASH_AT"
STEPS = ("upload", "switch", "delete")


def crash_point(step: str) -> None:
    if os.environ.get(ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)
