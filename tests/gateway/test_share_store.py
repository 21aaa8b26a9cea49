"""A share-partition's state on its cursor (gateway/shares.py CursorShareStore), over the
in-memory ledger client."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from gateway.shares import SPANS_PROP, SPSO_PROP, CursorShareStore
from store.managed.cache import EntryCache
from store.managed.config import LogConfig
from store.managed.log import ManagedLog
from store.meta.api import MetaStore
from tests.store.managed.conftest import fake_client, meta  # noqa: F401  (fixtures)
from tests.store.managed.fakes import FakeLedgerClient
from tests.store.managed.test_cursor import ONE


def _entries(client: FakeLedgerClient) -> int:
    return sum(len(led.entries) for led in client.ledgers.values())


async def test_a_save_is_one_cursor_record(meta: MetaStore, fake_client: FakeLedgerClient) -> None:  # noqa: F811
    mlog = await ManagedLog.open(meta, fake_client, "sh", config=LogConfig(**ONE, retention_ms=-1), cache=EntryCache())
    cur = await mlog.open_cursor("share-g", "earliest")
    pos = list(await asyncio.gather(*[mlog.append(bytes(10)) for _ in range(3)]))
    # The log is past the SPSO (0 < high watermark 3): the mark-delete goes before its entry.
    plog: Any = SimpleNamespace(high_watermark=3, log_start_offset=0, ml=mlog)

    async def position_of(offset: int) -> Any:
        return pos[offset]

    plog.position_of = position_of
    store = CursorShareStore(cur, plog)
    await store.save(0, [(0, 0, 1, 1)])
    await cur.flush()
    before = _entries(fake_client)
    await store.save(2, [])
    # Properties and mark-delete together: one record, not one each.
    assert _entries(fake_client) == before + 1
    assert cur.mark_delete == pos[1] and cur.properties[SPSO_PROP] == "2"
    await mlog.close()
    again = await ManagedLog.open(meta, fake_client, "sh", cache=EntryCache())
    c = again.cursors["share-g"]
    assert c.mark_delete == pos[1] and c.properties[SPSO_PROP] == "2" and SPANS_PROP in c.properties
    await again.close()
