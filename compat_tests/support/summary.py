"""The compat table printed at the end of a run: suite | client | passed | failed | allow-listed."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from compat_tests.support.allowlist import lookup


@dataclass
class Row:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    allowed: set[str] = field(default_factory=set)


class CompatResults:
    def __init__(self) -> None:
        self.labels: dict[str, tuple[str, str]] = {}  # nodeid -> (suite, client)
        self.outcomes: dict[str, str] = {}
        self.allowed: dict[str, set[str]] = defaultdict(set)

    def label(self, nodeid: str, suite: str, client: str) -> None:
        self.labels[nodeid] = (suite, client)

    def record(self, nodeid: str, when: str, outcome: str, allowed: list[str]) -> None:
        if nodeid not in self.labels:
            return
        self.allowed[nodeid].update(allowed)
        if outcome == "failed":
            self.outcomes[nodeid] = "failed"
        elif when == "call" or (when == "setup" and outcome == "skipped"):
            self.outcomes.setdefault(nodeid, outcome)

    def rows(self) -> dict[tuple[str, str], Row]:
        rows: dict[tuple[str, str], Row] = defaultdict(Row)
        for nodeid, outcome in self.outcomes.items():
            row = rows[self.labels[nodeid]]
            if outcome == "passed":
                row.passed += 1
            elif outcome == "failed":
                row.failed += 1
            else:
                row.skipped += 1
            row.allowed |= self.allowed.get(nodeid, set())
        return dict(sorted(rows.items()))

    def render(self) -> list[str]:
        rows = self.rows()
        if not rows:
            return []
        head = ("suite", "client", "passed", "failed", "skipped", "allow-listed differences")
        table = [head] + [
            (s, c, str(r.passed), str(r.failed), str(r.skipped), str(len(r.allowed)))
            for (s, c), r in rows.items()
        ]
        widths = [max(len(line[i]) for line in table) for i in range(len(head))]
        out = [" | ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table]
        out.insert(1, "-+-".join("-" * w for w in widths))
        allowed = sorted({d for r in rows.values() for d in r.allowed})
        if allowed:
            out.append("")
            out.append("allow-listed differences from Apache Kafka (compat_tests/known_differences.toml):")
            for diff_id in allowed:
                known = lookup(diff_id)
                out.append(f"  {diff_id}: {known.reason if known else '?'}")
        return out
