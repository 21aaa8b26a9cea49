"""Ensemble placement: which bookies hold a new ledger, and who replaces a failed one.

RackAwarePlacement (the default) spreads an ensemble over as many racks as possible and orders
it so that every round-robin write quorum spans as many racks as it can; with no racks known it
is simply random. RandomPlacement ignores racks.
"""

from __future__ import annotations

import abc
import asyncio
import itertools
import json
import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from store import layout
from store.ledger.errors import NotEnoughBookiesError
from store.ledger.quorum import write_set
from store.meta.api import MetaStore, NoNodeError


@dataclass(frozen=True)
class BookieInfo:
    address: str
    rack: str | None = None
    read_only: bool = False  # disk full or being decommissioned: serves reads, takes no new entries


async def available_bookies(meta: MetaStore) -> list[BookieInfo]:
    """Live bookies as registered (ephemeral nodes under BOOKIES_AVAILABLE); read-only if
    their registration says so (disk full) or they are being decommissioned."""
    try:
        names = await meta.children(layout.BOOKIES_AVAILABLE)
    except NoNodeError:
        return []
    try:
        draining = set(await meta.children(layout.DECOMMISSIONED))
    except NoNodeError:
        draining = set()

    async def info(name: str) -> BookieInfo | None:
        try:
            data, _ = await meta.get(layout.bookie_available(name))
        except NoNodeError:
            return None  # went away between children() and get()
        doc: Any = {}
        try:
            doc = json.loads(data) if data else {}
        except ValueError:
            pass
        if not isinstance(doc, dict):
            doc = {}
        rack = doc.get("rack")
        return BookieInfo(name, str(rack) if rack else None, bool(doc.get("read_only", False)) or name in draining)

    found = await asyncio.gather(*(info(n) for n in names))
    return [b for b in found if b is not None]


def _candidates(bookies: Sequence[BookieInfo], exclude: Collection[str]) -> list[BookieInfo]:
    """Writable bookies not excluded (a read-only bookie takes no new ledgers or fragments)."""
    seen: set[str] = set()
    out = []
    for b in bookies:
        if b.address not in exclude and b.address not in seen and not b.read_only:
            seen.add(b.address)
            out.append(b)
    return out


def _not_enough(need: int, have: list[BookieInfo], exclude: Collection[str]) -> NotEnoughBookiesError:
    excl = f" (excluding {sorted(exclude)})" if exclude else ""
    return NotEnoughBookiesError(
        f"need {need} bookies but only {len(have)} live bookies are available{excl}: "
        f"{sorted(b.address for b in have)}"
    )


class PlacementPolicy(abc.ABC):
    @abc.abstractmethod
    def new_ensemble(
        self,
        ensemble_size: int,
        write_quorum: int,
        bookies: Sequence[BookieInfo],
        exclude: Collection[str] = (),
    ) -> list[str]:
        """Addresses of a new ensemble, in striping order. NotEnoughBookiesError if impossible."""

    @abc.abstractmethod
    def replace_bookie(
        self,
        ensemble: Sequence[str],
        index: int,
        write_quorum: int,
        bookies: Sequence[BookieInfo],
        exclude: Collection[str] = (),
    ) -> str:
        """A bookie, not in `ensemble` nor `exclude`, to take position `index`."""


class RandomPlacement(PlacementPolicy):
    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def new_ensemble(
        self,
        ensemble_size: int,
        write_quorum: int,
        bookies: Sequence[BookieInfo],
        exclude: Collection[str] = (),
    ) -> list[str]:
        cands = _candidates(bookies, exclude)
        if len(cands) < ensemble_size:
            raise _not_enough(ensemble_size, cands, exclude)
        return [b.address for b in self._rng.sample(cands, ensemble_size)]

    def replace_bookie(
        self,
        ensemble: Sequence[str],
        index: int,
        write_quorum: int,
        bookies: Sequence[BookieInfo],
        exclude: Collection[str] = (),
    ) -> str:
        cands = _candidates(bookies, set(exclude) | set(ensemble))
        if not cands:
            raise _not_enough(1, cands, set(exclude) | set(ensemble))
        return self._rng.choice(cands).address


_NO_RACK = "\x00default-rack"
_MAX_PERMUTED = 6  # search every ordering up to this ensemble size (720 orderings)


def min_racks_per_write_quorum(racks: Sequence[str], write_quorum: int) -> int:
    """The fewest distinct racks any round-robin write quorum of this ensemble spans."""
    e = len(racks)
    return min(len({racks[i] for i in write_set(start, e, write_quorum)}) for start in range(e))


class RackAwarePlacement(PlacementPolicy):
    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def new_ensemble(
        self,
        ensemble_size: int,
        write_quorum: int,
        bookies: Sequence[BookieInfo],
        exclude: Collection[str] = (),
    ) -> list[str]:
        cands = _candidates(bookies, exclude)
        if len(cands) < ensemble_size:
            raise _not_enough(ensemble_size, cands, exclude)
        by_rack: dict[str, list[BookieInfo]] = {}
        for b in cands:
            by_rack.setdefault(b.rack or _NO_RACK, []).append(b)
        groups = list(by_rack.values())
        for g in groups:
            self._rng.shuffle(g)
        self._rng.shuffle(groups)
        # Round-robin over racks: as many distinct racks as possible, evenly used.
        chosen: list[BookieInfo] = []
        while len(chosen) < ensemble_size:
            for g in groups:
                if g and len(chosen) < ensemble_size:
                    chosen.append(g.pop())
        if len(chosen) <= _MAX_PERMUTED and len(by_rack) > 1:
            chosen = self._best_order(chosen, write_quorum)
        return [b.address for b in chosen]

    def _best_order(self, chosen: list[BookieInfo], write_quorum: int) -> list[BookieInfo]:
        best, best_score = chosen, -1
        for perm in itertools.permutations(chosen):
            score = min_racks_per_write_quorum([b.rack or _NO_RACK for b in perm], write_quorum)
            if score > best_score:
                best, best_score = list(perm), score
                if score == min(write_quorum, len({b.rack for b in chosen})):
                    break
        return best

    def replace_bookie(
        self,
        ensemble: Sequence[str],
        index: int,
        write_quorum: int,
        bookies: Sequence[BookieInfo],
        exclude: Collection[str] = (),
    ) -> str:
        cands = _candidates(bookies, set(exclude) | set(ensemble))
        if not cands:
            raise _not_enough(1, cands, set(exclude) | set(ensemble))
        rack_of = {b.address: b.rack or _NO_RACK for b in bookies}
        racks = [rack_of.get(a, _NO_RACK) for a in ensemble]
        e = len(ensemble)
        quorums = [q for q in (write_set(s, e, write_quorum) for s in range(e)) if index in q]

        def score(b: BookieInfo) -> tuple[int, int, float]:
            trial = list(racks)
            trial[index] = b.rack or _NO_RACK
            worst = min(len({trial[i] for i in q}) for q in quorums)
            return worst, len(set(trial)), self._rng.random()

        return max(cands, key=score).address


def default_placement() -> PlacementPolicy:
    return RackAwarePlacement()
