"""The bookie's read cache: entries read from the entry logs (with read-ahead), least recently
used first out, bounded in bytes."""

from __future__ import annotations

from collections import OrderedDict

from store.bookie.flush import Entry


class ReadCache:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple[int, int], Entry] = OrderedDict()
        self._bytes = 0

    def get(self, ledger_id: int, entry_id: int) -> Entry | None:
        key = (ledger_id, entry_id)
        e = self._entries.get(key)
        if e is not None:
            self._entries.move_to_end(key)
        return e

    def put(self, ledger_id: int, entry_id: int, entry: Entry) -> None:
        key = (ledger_id, entry_id)
        if key in self._entries:
            return
        self._entries[key] = entry
        self._bytes += len(entry)
        while self._bytes > self.capacity and self._entries:
            _, old = self._entries.popitem(last=False)
            self._bytes -= len(old)

    def drop(self, ledger_id: int) -> None:
        for key in [k for k in self._entries if k[0] == ledger_id]:
            self._bytes -= len(self._entries.pop(key))

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0
