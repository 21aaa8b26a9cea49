"""Ledger metadata: its state, quorum sizes and fragments, stored as JSON at layout.ledger(id)."""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field, replace
from typing import Any

OPEN = "open"
IN_RECOVERY = "in_recovery"
CLOSED = "closed"
_STATES = (OPEN, IN_RECOVERY, CLOSED)
_FORMAT = 1


@dataclass
class LedgerMetadata:
    ledger_id: int
    state: str
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    # Fragments: (first entry id, bookie addresses), sorted by first entry id. The last one is
    # the only fragment that can still receive writes.
    ensembles: list[tuple[int, list[str]]]
    last_entry_id: int = -1
    length: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    ctime_ms: int = 0
    # The metadata-store version this copy was read at (for compare-and-set); not serialised.
    version: int = field(default=-1, compare=False)

    def __post_init__(self) -> None:
        if self.state not in _STATES:
            raise ValueError(f"unknown ledger state {self.state!r}")
        if not self.ensemble_size >= self.write_quorum >= self.ack_quorum >= 1:
            raise ValueError(
                f"need E >= WQ >= AQ >= 1, got E={self.ensemble_size} WQ={self.write_quorum} AQ={self.ack_quorum}"
            )
        if not self.ensembles:
            raise ValueError("a ledger needs at least one ensemble")
        for _, ens in self.ensembles:
            if len(ens) != self.ensemble_size:
                raise ValueError(f"ensemble {ens} does not have {self.ensemble_size} bookies")

    @property
    def is_closed(self) -> bool:
        return self.state == CLOSED

    @property
    def last_ensemble(self) -> tuple[int, list[str]]:
        return self.ensembles[-1]

    def fragment_index(self, entry_id: int) -> int:
        starts = [first for first, _ in self.ensembles]
        return max(bisect.bisect_right(starts, entry_id) - 1, 0)

    def ensemble_for(self, entry_id: int) -> list[str]:
        return self.ensembles[self.fragment_index(entry_id)][1]

    def fragment_end(self, index: int) -> int | None:
        """Last entry id of fragment `index`, or None for the open-ended last fragment."""
        if index + 1 < len(self.ensembles):
            return self.ensembles[index + 1][0] - 1
        return None

    def bookies(self) -> set[str]:
        return {b for _, ens in self.ensembles for b in ens}

    def copy(self, **changes: Any) -> LedgerMetadata:
        base = replace(
            self, ensembles=[(f, list(e)) for f, e in self.ensembles], properties=dict(self.properties)
        )
        return replace(base, **changes) if changes else base

    def with_ensemble(self, first_entry_id: int, ensemble: list[str]) -> LedgerMetadata:
        """A copy with a new last fragment from first_entry_id (replacing the last one in place
        if it starts there already: it never received an acknowledged entry)."""
        last_first = self.ensembles[-1][0]
        if first_entry_id < last_first:
            raise ValueError(f"new fragment at {first_entry_id} precedes the last one at {last_first}")
        out = self.copy()
        if first_entry_id == last_first:
            out.ensembles[-1] = (first_entry_id, list(ensemble))
        else:
            out.ensembles.append((first_entry_id, list(ensemble)))
        return out

    def to_bytes(self) -> bytes:
        doc = {
            "format": _FORMAT,
            "ledger_id": self.ledger_id,
            "state": self.state,
            "ensemble_size": self.ensemble_size,
            "write_quorum": self.write_quorum,
            "ack_quorum": self.ack_quorum,
            "ensembles": [[first, list(ens)] for first, ens in self.ensembles],
            "last_entry_id": self.last_entry_id,
            "length": self.length,
            "properties": dict(self.properties),
            "ctime_ms": self.ctime_ms,
        }
        return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes, version: int = -1) -> LedgerMetadata:
        doc = json.loads(data)
        if doc.get("format") != _FORMAT:
            raise ValueError(f"unsupported ledger metadata format {doc.get('format')!r}")
        return cls(
            ledger_id=int(doc["ledger_id"]),
            state=str(doc["state"]),
            ensemble_size=int(doc["ensemble_size"]),
            write_quorum=int(doc["write_quorum"]),
            ack_quorum=int(doc["ack_quorum"]),
            ensembles=[(int(first), [str(b) for b in ens]) for first, ens in doc["ensembles"]],
            last_entry_id=int(doc["last_entry_id"]),
            length=int(doc["length"]),
            properties={str(k): str(v) for k, v in doc["properties"].items()},
            ctime_ms=int(doc["ctime_ms"]),
            version=version,
        )
