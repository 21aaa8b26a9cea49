"""An in-memory ledger client with the store/ledger API and its fencing semantics, for fast
tests of the segmented-log logic (the real client is exercised in test_real_*.py)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from store.ledger.errors import LedgerClosedError, LedgerFencedError, NoSuchLedgerError, ReadBeyondLacError


@dataclass
class FakeMeta:
    ledger_id: int
    state: str = "open"
    last_entry_id: int = -1
    length: int = 0
    ctime_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    properties: dict[str, str] = field(default_factory=dict)


class _Ledger:
    def __init__(self, lid: int, props: dict[str, str]) -> None:
        self.meta = FakeMeta(lid, properties=dict(props))
        self.entries: list[bytes] = []
        self.fenced = False
        self.lac = -1


class FakeWriter:
    def __init__(self, led: _Ledger) -> None:
        self._led = led
        self.ledger_id = led.meta.ledger_id
        self.metadata = led.meta
        self.last_add_confirmed = -1
        self.length = 0
        self._pending: list[asyncio.Future[int]] = []
        self._closing = False

    def append(self, payload: bytes) -> asyncio.Future[int]:
        if self._led.fenced:
            raise LedgerFencedError(f"ledger {self.ledger_id} fenced")
        if self._closing:
            raise LedgerClosedError("closed")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()
        eid = len(self._led.entries)
        self._led.entries.append(bytes(payload))
        self._pending.append(fut)

        def ack() -> None:
            self._pending.remove(fut)
            if self._led.fenced and eid > self._led.lac:
                fut.set_exception(LedgerFencedError("fenced"))
                return
            self.last_add_confirmed = eid
            self._led.lac = eid
            self.length += len(payload)
            fut.set_result(eid)

        loop.call_soon(ack)
        return fut

    async def close(self) -> None:
        self._closing = True
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        if self._led.fenced:
            raise LedgerFencedError("fenced")
        self._led.meta.state = "closed"
        self._led.meta.last_entry_id = self.last_add_confirmed
        self._led.meta.length = self.length


class FakeReader:
    def __init__(self, led: _Ledger, lac: int) -> None:
        self._led = led
        self.ledger_id = led.meta.ledger_id
        self.metadata = led.meta
        self.last_add_confirmed = lac

    @property
    def is_closed(self) -> bool:
        return self.metadata.state == "closed"

    async def read(self, first: int, last: int, max_bytes: int | None = None) -> list[bytes]:
        if last > self.last_add_confirmed:
            await self.read_lac()
            if last > self.last_add_confirmed:
                raise ReadBeyondLacError(f"{last} > {self.last_add_confirmed}")
        self._led_check()
        await asyncio.sleep(0)
        out = self._led.entries[first : last + 1]
        if max_bytes is not None:  # as the real reader: stop once max_bytes is reached
            total = 0
            for i, e in enumerate(out):
                total += len(e)
                if total >= max_bytes:
                    return out[: i + 1]
        return out

    def _led_check(self) -> None:
        if self._led.meta.state == "deleted":
            raise NoSuchLedgerError(str(self.ledger_id))

    async def read_lac(self) -> int:
        self.last_add_confirmed = max(self.last_add_confirmed, self._led.lac)
        return self.last_add_confirmed

    async def close(self) -> None:
        pass


class FakeLedgerClient:
    def __init__(self) -> None:
        self.ledgers: dict[int, _Ledger] = {}
        self._next = 1
        self.reads = 0

    async def create(
        self,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        *,
        properties: dict[str, str] | None = None,
    ) -> FakeWriter:
        lid = self._next
        self._next += 1
        led = _Ledger(lid, properties or {})
        self.ledgers[lid] = led
        return FakeWriter(led)

    async def open(self, ledger_id: int, *, recovery: bool = False) -> FakeReader:
        led = self.ledgers.get(ledger_id)
        if led is None:
            raise NoSuchLedgerError(str(ledger_id))
        if recovery and led.meta.state != "closed":
            led.fenced = True
            led.meta.state = "closed"
            led.meta.last_entry_id = led.lac
            del led.entries[led.lac + 1 :]
            led.meta.length = sum(len(e) for e in led.entries)
        self.reads += 1
        lac = led.meta.last_entry_id if led.meta.state == "closed" else led.lac
        return FakeReader(led, lac)

    async def delete(self, ledger_id: int) -> None:
        led = self.ledgers.pop(ledger_id, None)
        if led is None:
            raise NoSuchLedgerError(str(ledger_id))
        led.meta.state = "deleted"

    async def metadata(self, ledger_id: int) -> FakeMeta:
        led = self.ledgers.get(ledger_id)
        if led is None:
            raise NoSuchLedgerError(str(ledger_id))
        return led.meta

    async def close(self) -> None:
        pass
