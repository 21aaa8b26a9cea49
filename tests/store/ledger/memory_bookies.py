"""In-memory bookies with fault switches, for deterministic tests of the writer's quorum,
ensemble-change and fencing logic. Real-process tests cover the same paths end to end."""

from __future__ import annotations

import asyncio
import json

from store import layout
from store.bookie.entry import peek_ids, unpack_entry
from store.bookie.errors import BookieUnavailableError, FencedError, NoEntryError, NoLedgerError
from store.framing import Buffer
from store.meta.api import MetaStore


class MemoryBookie:
    def __init__(self, address: str) -> None:
        self.address = address
        self.ledgers: dict[int, dict[int, bytes]] = {}
        self.fenced: set[int] = set()
        self.explicit_lac: dict[int, int] = {}  # WRITE_LAC
        self.write_lacs = 0
        self.down = False  # requests fail at once (connection refused)
        self.hang = False  # requests never answer (SIGSTOP)
        self.add_delay = 0.0
        self.adds = 0

    async def _gate(self) -> None:
        if self.hang:
            await asyncio.Event().wait()
        if self.down:
            raise BookieUnavailableError(f"{self.address} is down")

    async def add(self, ledger_id: int, entry: Buffer | list[Buffer], *, recovery: bool = False) -> None:
        if isinstance(entry, list):  # in pieces, as the writer sends it: one buffer on the wire
            entry = b"".join(entry)
        await self._gate()
        if self.add_delay:
            await asyncio.sleep(self.add_delay)
            await self._gate()
        unpack_entry(entry, ledger_id)
        if ledger_id in self.fenced and not recovery:
            raise FencedError(f"ledger {ledger_id} fenced on {self.address}")
        _, eid, _ = peek_ids(entry)
        self.ledgers.setdefault(ledger_id, {})[eid] = bytes(entry)
        self.adds += 1

    def add_nowait(
        self, ledger_id: int, entry: Buffer | list[Buffer], *, recovery: bool = False
    ) -> asyncio.Future[None]:
        return asyncio.ensure_future(self.add(ledger_id, entry, recovery=recovery))

    async def read(self, ledger_id: int, entry_id: int, *, fence: bool = False) -> bytes:
        await self._gate()
        if fence:
            self.fenced.add(ledger_id)
        entries = self.ledgers.get(ledger_id)
        if entries is None:
            raise NoLedgerError(f"no ledger {ledger_id}")
        if entry_id not in entries:
            raise NoEntryError(f"no entry {entry_id}")
        return entries[entry_id]

    async def read_range(
        self, ledger_id: int, first: int, last: int, max_bytes: int = 4 << 20
    ) -> list[bytes]:
        out = [await self.read(ledger_id, first)]
        for e in range(first + 1, last + 1):
            got = self.ledgers[ledger_id].get(e)
            if got is None:
                break
            out.append(got)
        return out

    def _lac(self, ledger_id: int) -> tuple[int, int]:
        explicit = self.explicit_lac.get(ledger_id, -1)
        entries = self.ledgers.get(ledger_id)
        if not entries:
            return explicit, -1
        last = max(entries)
        return max(peek_ids(entries[last])[2], explicit), last

    async def read_lac(self, ledger_id: int) -> tuple[int, int]:
        await self._gate()
        return self._lac(ledger_id)

    async def wait_lac(self, ledger_id: int, previous_lac: int, timeout: float) -> int:  # noqa: ASYNC109
        await self._gate()
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while loop.time() < end:
            # As the real bookie: a ledger not seen yet parks the poll until it appears.
            if ledger_id in self.ledgers or ledger_id in self.explicit_lac:
                lac = self._lac(ledger_id)[0]
                if lac > previous_lac:
                    return lac
            await asyncio.sleep(0.01)
        return previous_lac

    async def fence(self, ledger_id: int) -> tuple[int, int]:
        await self._gate()
        self.fenced.add(ledger_id)
        return self._lac(ledger_id)

    async def write_lac(self, ledger_id: int, lac: int) -> None:
        await self._gate()
        if ledger_id in self.fenced:
            raise FencedError(f"ledger {ledger_id} fenced on {self.address}")
        self.write_lacs += 1
        self.explicit_lac[ledger_id] = max(lac, self.explicit_lac.get(ledger_id, -1))

    async def delete_ledger(self, ledger_id: int) -> None:
        await self._gate()
        self.ledgers.pop(ledger_id, None)
        self.explicit_lac.pop(ledger_id, None)


class MemoryBookies:
    """A BookieConns over MemoryBookie objects, registered in the metadata store as live."""

    def __init__(self, n: int) -> None:
        self.bookies = {f"127.0.0.1:{4000 + i}": MemoryBookie(f"127.0.0.1:{4000 + i}") for i in range(n)}

    def get(self, address: str) -> MemoryBookie:
        return self.bookies[address]

    async def register(self, meta: MetaStore, racks: list[str] | None = None) -> None:
        for i, addr in enumerate(self.bookies):
            await meta.create(
                layout.bookie_available(addr),
                json.dumps({"address": addr, "rack": racks[i] if racks else None}).encode(),
                ephemeral=True,
                make_parents=True,
            )

    async def unregister(self, meta: MetaStore, address: str) -> None:
        await meta.delete(layout.bookie_available(address))
