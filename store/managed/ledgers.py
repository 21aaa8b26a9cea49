"""The slice of the ledger client (store/ledger) that segmented logs use, as structural types,
so this package type-checks against any implementation (the real client or a test double)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol


class LedgerMetadataLike(Protocol):
    ledger_id: int
    state: str
    last_entry_id: int
    length: int
    ctime_ms: int


class WriterLike(Protocol):
    ledger_id: int
    last_add_confirmed: int
    length: int

    def append(self, payload: bytes | memoryview) -> asyncio.Future[int]: ...

    async def close(self) -> None: ...


class ReaderLike(Protocol):
    ledger_id: int
    last_add_confirmed: int
    is_closed: bool

    @property
    def metadata(self) -> Any: ...

    async def read(self, first: int, last: int, max_bytes: int | None = None) -> Sequence[bytes | memoryview]:
        """Entries first..last; with max_bytes, possibly fewer (about that many bytes)."""
        ...

    async def read_lac(self) -> int: ...

    async def read_unconfirmed(self, first: int, max_entries: int) -> list[bytes]: ...

    async def close(self) -> None: ...


class LedgerClientLike(Protocol):
    async def create(
        self,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        *,
        properties: dict[str, str] | None = None,
    ) -> Any: ...

    async def open(self, ledger_id: int, *, recovery: bool = False) -> Any: ...

    async def delete(self, ledger_id: int) -> None: ...

    async def metadata(self, ledger_id: int) -> Any: ...
