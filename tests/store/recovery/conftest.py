"""Shared by the auto-recovery tests: an embedded metadata store and ledgers of known payloads."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from store.ledger import LedgerClient
from store.ledger.placement import available_bookies
from store.meta.api import MetaStore
from store.meta.factory import open_meta


@pytest.fixture
async def meta(tmp_path: Path) -> AsyncIterator[tuple[str, MetaStore]]:
    url = f"embedded://{tmp_path / 'meta'}"
    m = open_meta(url)
    await m.start()
    yield url, m
    await m.close()


def payload(lid: int, i: int) -> bytes:
    return b"%d:%06d:" % (lid, i) + bytes([i % 251]) * (i % 300)


async def write_ledger(lc: LedgerClient, n: int, *, close: bool = True) -> Any:
    w = await lc.create(3, 3, 2)
    await asyncio.gather(*(w.append(payload(w.ledger_id, i)) for i in range(n)))
    if close:
        await w.close()
    return w


async def read_all(meta: MetaStore, lid: int) -> list[bytes]:
    lc = LedgerClient(meta, read_timeout=2.0)
    try:
        r = await lc.open(lid)
        return await r.read(0, r.metadata.last_entry_id) if r.metadata.last_entry_id >= 0 else []
    finally:
        await lc.close()


async def gone(m: MetaStore, address: str) -> bool:
    return address not in {b.address for b in await available_bookies(m)}


