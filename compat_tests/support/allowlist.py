"""The allow-list of known differences from Apache Kafka (known_differences.toml) and the
per-test recorder that compares what Quire and Kafka answered."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ALLOWLIST_PATH = Path(__file__).resolve().parents[1] / "known_differences.toml"


@dataclass(frozen=True)
class KnownDifference:
    id: str  # "<scenario>.<observation>", fnmatch patterns allowed
    reason: str


@cache
def known_differences(path: Path = ALLOWLIST_PATH) -> tuple[KnownDifference, ...]:
    data = tomllib.loads(path.read_text())
    out = []
    for entry in data.get("difference", []):
        if not entry.get("reason", "").strip():
            raise ValueError(f"{path}: difference {entry.get('id')!r} has no reason")
        out.append(KnownDifference(id=entry["id"], reason=" ".join(entry["reason"].split())))
    return tuple(out)


def lookup(diff_id: str) -> KnownDifference | None:
    for known in known_differences():
        if fnmatch.fnmatchcase(diff_id, known.id):
            return known
    return None


def _show(value: object) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


class Differences:
    """Collects observations of one scenario from both systems; `verify()` fails on every
    difference not in the allow-list and reports the allowed ones through `on_allowed`."""

    def __init__(self, scenario: str, on_allowed: Callable[[str], None]) -> None:
        self.scenario = scenario
        self.on_allowed = on_allowed
        self.unexpected: list[str] = []
        self.allowed: list[str] = []
        self.compared = 0

    def compare(self, key: str, quire: object, kafka: object) -> None:
        self.compared += 1
        if quire == kafka:
            return
        diff_id = f"{self.scenario}.{key}"
        known = lookup(diff_id)
        if known is None:
            self.unexpected.append(f"{diff_id}: quire={_show(quire)} kafka={_show(kafka)}")
        else:
            self.allowed.append(diff_id)
            self.on_allowed(diff_id)

    def compare_all(self, quire: dict[str, object], kafka: dict[str, object]) -> None:
        """Compares two observation dicts key by key (a key missing on one side is None)."""
        for key in sorted(set(quire) | set(kafka)):
            self.compare(key, quire.get(key), kafka.get(key))

    def verify(self) -> None:
        assert self.compared, f"{self.scenario}: nothing was compared"
        if self.unexpected:
            raise AssertionError(
                f"{len(self.unexpected)} difference(s) from Apache Kafka not in "
                f"{ALLOWLIST_PATH.name}:\n  " + "\n  ".join(self.unexpected)
            )
