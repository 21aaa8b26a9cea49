"""What every ledger handle shares: the metadata store, bookie connections, placement and
timeouts, plus reading and compare-and-setting ledger metadata."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from store import layout
from store.clock import SYSTEM_CLOCK, Clock
from store.framing import Buffer
from store.ledger.errors import MetadataVersionError, NoSuchLedgerError
from store.ledger.metadata import LedgerMetadata
from store.ledger.placement import PlacementPolicy
from store.meta.api import BadVersionError, MetaStore, NoNodeError


class BookieConn(Protocol):
    """The part of store.bookie.client.BookieClient the ledger client uses."""

    async def add(self, ledger_id: int, entry: Buffer | list[Buffer], *, recovery: bool = False) -> None: ...
    def add_nowait(
        self, ledger_id: int, entry: Buffer | list[Buffer], *, recovery: bool = False
    ) -> asyncio.Future[Any]: ...
    async def read(self, ledger_id: int, entry_id: int, *, fence: bool = False) -> Buffer: ...
    async def read_range(
        self, ledger_id: int, first: int, last: int, max_bytes: int = ...
    ) -> Sequence[Buffer]: ...
    async def read_lac(self, ledger_id: int) -> tuple[int, int]: ...
    async def wait_lac(self, ledger_id: int, previous_lac: int, timeout: float) -> int: ...  # noqa: ASYNC109
    async def fence(self, ledger_id: int) -> tuple[int, int]: ...
    async def delete_ledger(self, ledger_id: int) -> None: ...
    async def write_lac(self, ledger_id: int, lac: int) -> None: ...


class BookieConns(Protocol):
    def get(self, address: str) -> BookieConn: ...


@dataclass
class LedgerEnv:
    meta: MetaStore
    bookies: BookieConns
    placement: PlacementPolicy
    add_timeout: float
    read_timeout: float
    speculative_read_timeout: float
    clock: Clock = SYSTEM_CLOCK  # timers and retry sleeps (a test may drive its own)

    async def read_metadata(self, ledger_id: int) -> LedgerMetadata:
        try:
            data, stat = await self.meta.get(layout.ledger(ledger_id))
        except NoNodeError:
            raise NoSuchLedgerError(f"ledger {ledger_id} does not exist") from None
        return LedgerMetadata.from_bytes(data, stat.version)

    async def cas_metadata(self, md: LedgerMetadata) -> LedgerMetadata:
        """Write `md` if the stored version is still md.version; the returned copy carries
        the new version. MetadataVersionError if someone else wrote first."""
        try:
            stat = await self.meta.set(layout.ledger(md.ledger_id), md.to_bytes(), md.version)
        except BadVersionError:
            raise MetadataVersionError(f"ledger {md.ledger_id} metadata changed under us") from None
        except NoNodeError:
            raise NoSuchLedgerError(f"ledger {md.ledger_id} was deleted") from None
        return md.copy(version=stat.version)
