"""Runs the harness's own Java program (compat_tests/java/src, built by install.sh) and parses
its output: one JSON object per line, each with an "event" field, ending with "done"."""

from __future__ import annotations

import json
from typing import Any

from compat_tests.support import kafka_dist

MAIN_CLASS = "quire.compat.Harness"


class HarnessError(AssertionError):
    """The program failed; the message carries its error event and stderr tail."""


def run_harness(command: str, *, timeout: float = 180.0, **args: object) -> list[dict[str, Any]]:
    """`Harness <command> key=value...`; returns the events (without the final "done")."""
    kafka_dist.ensure_installed()
    argv = [f"{k.replace('_', '.') if k.endswith('_ms') else k}={v}" for k, v in args.items()]
    proc = kafka_dist.run_tool(MAIN_CLASS, [command, *argv], timeout=timeout, check=False, harness=True)
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not events or events[-1]["event"] != "done":
        errors = [e for e in events if e["event"] == "error"]
        raise HarnessError(
            f"Harness {command} exited {proc.returncode}: {errors}\n--- stderr ---\n{proc.stderr[-4000:]}"
        )
    return events[:-1]


def only(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == name]


def one(events: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = only(events, name)
    assert len(found) == 1, f"expected one {name!r} event, got {len(found)}: {found}"
    return found[0]
