"""What a bookie knows of each ledger (fenced, LAC, last entry) and its tombstones.

A deleted ledger leaves a tombstone: adds and fences to it are refused from then on (an old
writer must not bring it back), and the tombstone is persisted with the ledger states at every
checkpoint. Its index file goes at the next checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from store.bookie.errors import NoLedgerError
from store.bookie.index import FLAG_DELETED, FLAG_FENCED

State = tuple[int, int, int]  # (flags, LAC, last entry id), as in the ledger state file


@dataclass
class LedgerInfo:
    fenced: bool = False
    lac: int = -1  # highest LAC carried by any entry of this ledger or sent by WRITE_LAC
    last_entry: int = -1


class LedgerStates:
    def __init__(self) -> None:
        self._infos: dict[int, LedgerInfo] = {}
        self.tombstones: set[int] = set()  # deleted ledgers: adds and fences to them are refused
        self._unlinked: set[int] = set()  # deleted ledgers whose index files go at the next checkpoint

    def load(self, states: dict[int, State], last_entries: dict[int, int]) -> None:
        """From the ledger state file and the last entry of each index file found on disk."""
        for lid, last in last_entries.items():
            self._infos[lid] = LedgerInfo(last_entry=last)
        for lid, (flags, lac, last) in states.items():
            if flags & FLAG_DELETED:
                self.tombstones.add(lid)
                self._infos.pop(lid, None)
                continue
            info = self._infos.setdefault(lid, LedgerInfo())
            info.fenced = bool(flags & FLAG_FENCED)
            info.lac = max(info.lac, lac)
            info.last_entry = max(info.last_entry, last)

    def get(self, ledger_id: int) -> LedgerInfo | None:
        return self._infos.get(ledger_id)

    def __getitem__(self, ledger_id: int) -> LedgerInfo:
        return self._infos[ledger_id]

    def __contains__(self, ledger_id: int) -> bool:
        return ledger_id in self._infos

    def __len__(self) -> int:
        return len(self._infos)

    def info(self, ledger_id: int) -> LedgerInfo:
        info = self._infos.get(ledger_id)
        if info is None:
            raise NoLedgerError(f"no ledger {ledger_id} on this bookie")
        return info

    def get_or_create(self, ledger_id: int) -> LedgerInfo:
        info = self._infos.get(ledger_id)
        if info is None:
            info = self._infos[ledger_id] = LedgerInfo()
        return info

    def delete(self, ledger_id: int) -> bool:
        """Leave a tombstone; True if the ledger was known here."""
        self.tombstones.add(ledger_id)
        if self._infos.pop(ledger_id, None) is None:
            return False
        self._unlinked.add(ledger_id)
        return True

    # -- for checkpoints --

    def checkpoint_states(self) -> dict[int, State]:
        states = {lid: (FLAG_FENCED if i.fenced else 0, i.lac, i.last_entry) for lid, i in self._infos.items()}
        states.update((lid, (FLAG_FENCED | FLAG_DELETED, -1, -1)) for lid in self.tombstones)
        return states

    def take_unlinked(self) -> set[int]:
        """The deleted ledgers whose index files this checkpoint removes."""
        unlinked, self._unlinked = self._unlinked, set()
        return unlinked

    def unlink_later(self, ledger_ids: Iterable[int]) -> None:
        """Their index files go at the next checkpoint (this one failed, or wrote them anew)."""
        self._unlinked.update(ledger_ids)
