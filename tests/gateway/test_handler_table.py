"""The handler table is loaded at start-up: a handler module that fails to import stops
`quire gateway` with one line naming the module and the cause, instead of the gateway running
on without that module's APIs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.gateway import ROOT, _env

pytestmark = pytest.mark.timeout(120)

# Runs `quire gateway` with one module made unimportable: a dependency that only the
# DescribeLogDirs handler module imports, as when a package is missing from an install.
_CHILD = """
import runpy, sys

BLOCKED = "kafka_wire.messages.describe_log_dirs"

class Block:
    def find_spec(self, name, path=None, target=None):
        if name == BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Block())
sys.argv = ["quire", "gateway", "--meta", sys.argv[1], "--listen", "127.0.0.1:0"]
runpy.run_module("quire", run_name="__main__")
"""


def test_broken_handler_module_fails_startup_with_one_line(tmp_path: Path) -> None:
    meta_url = f"embedded://{tmp_path / 'meta'}"
    # A gateway that swallowed the error would keep serving: the timeout turns that into a failure.
    done = subprocess.run([sys.executable, "-c", _CHILD, meta_url], capture_output=True, text=True,
                          env=_env(), cwd=ROOT, timeout=60)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        "quire gateway: handler module gateway.handlers.describe_log_dirs failed to import "
        "(ModuleNotFoundError: No module named 'kafka_wire.messages.describe_log_dirs')"
    ]
