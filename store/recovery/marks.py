"""Under-replication marks, recovery counters and decommissioned bookies in the metadata store.

A mark is a persistent node under_replicated(ledger) holding JSON
{"ledger_id", "bookies": {address: {"since_ms", "reason"}}}: which bookies of the ledger's
fragments lost (or never got) their copies, since when and why ("lost": gone past the grace
period; "check": a sampled read found an entry missing or corrupt; "decommission"). Marks are
merged with compare-and-set, so an auditor and an operator can add to the same ledger's mark.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from store import layout
from store.meta.api import BadVersionError, MetaStore, NodeExistsError, NoNodeError

LOST, CHECK, DECOMMISSION = "lost", "check", "decommission"


@dataclass
class Mark:
    ledger_id: int
    bookies: dict[str, dict[str, Any]] = field(default_factory=dict)  # address -> since_ms, reason
    version: int = -1

    @property
    def since_ms(self) -> int:
        return min((int(b["since_ms"]) for b in self.bookies.values()), default=0)

    def to_bytes(self) -> bytes:
        return json.dumps({"ledger_id": self.ledger_id, "bookies": self.bookies}, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes, version: int) -> Mark:
        doc = json.loads(data)
        return cls(int(doc["ledger_id"]), dict(doc.get("bookies", {})), version)


def now_ms() -> int:
    return int(time.time() * 1000)


async def mark(meta: MetaStore, ledger_id: int, bookies: dict[str, tuple[int, str]]) -> bool:
    """Add `bookies` (address -> (since_ms, reason)) to the ledger's mark, creating it if
    needed. True if the mark changed."""
    path = layout.under_replicated(ledger_id)
    while True:
        current = await get_mark(meta, ledger_id)
        m = current or Mark(ledger_id)
        changed = False
        for addr, (since, reason) in bookies.items():
            if addr not in m.bookies:
                m.bookies[addr] = {"since_ms": since, "reason": reason}
                changed = True
        if not changed:
            return False
        try:
            if current is None:
                await meta.create(path, m.to_bytes(), make_parents=True)
            else:
                await meta.set(path, m.to_bytes(), current.version)
            return True
        except (NodeExistsError, BadVersionError, NoNodeError):
            continue


async def get_mark(meta: MetaStore, ledger_id: int) -> Mark | None:
    try:
        data, stat = await meta.get(layout.under_replicated(ledger_id))
    except NoNodeError:
        return None
    return Mark.from_bytes(data, stat.version)


async def marked_ledgers(meta: MetaStore) -> list[int]:
    try:
        return [int(n) for n in await meta.children(layout.UNDER_REPLICATED)]
    except NoNodeError:
        return []


async def list_marks(meta: MetaStore) -> list[Mark]:
    out = []
    for lid in await marked_ledgers(meta):
        m = await get_mark(meta, lid)
        if m is not None:
            out.append(m)
    return out


async def unmark(meta: MetaStore, m: Mark) -> bool:
    """Delete the mark if nobody added to it since it was read (else the worker goes again)."""
    try:
        await meta.delete(layout.under_replicated(m.ledger_id), m.version)
        return True
    except NoNodeError:
        return True
    except BadVersionError:
        return False


# -- counters -------------------------------------------------------------------------------


async def read_stats(meta: MetaStore) -> dict[str, Any]:
    try:
        data, _ = await meta.get(layout.RECOVERY_STATS)
    except NoNodeError:
        return {}
    return dict(json.loads(data))


async def update_stats(meta: MetaStore, *, add: dict[str, int] | None = None, put: dict[str, Any] | None = None) -> None:
    """Add to the cluster-wide counters (bytes_rereplicated, entries_rereplicated,
    ledgers_rereplicated) and set values (last_full_replication_s), with compare-and-set."""
    while True:
        try:
            data, stat = await meta.get(layout.RECOVERY_STATS)
            doc, version = json.loads(data), stat.version
        except NoNodeError:
            doc, version = {}, None
        for k, v in (add or {}).items():
            doc[k] = int(doc.get(k, 0)) + v
        doc.update(put or {})
        raw = json.dumps(doc, sort_keys=True).encode()
        try:
            if version is None:
                await meta.create(layout.RECOVERY_STATS, raw, make_parents=True)
            else:
                await meta.set(layout.RECOVERY_STATS, raw, version)
            return
        except (NodeExistsError, BadVersionError, NoNodeError):
            continue


# -- decommissioning -----------------------------------------------------------------------


async def decommissioned(meta: MetaStore) -> set[str]:
    try:
        return set(await meta.children(layout.DECOMMISSIONED))
    except NoNodeError:
        return set()


async def set_decommissioned(meta: MetaStore, address: str) -> None:
    try:
        await meta.create(layout.decommissioned(address), str(now_ms()).encode(), make_parents=True)
    except NodeExistsError:
        pass
