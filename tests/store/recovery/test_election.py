"""Auditor election through the metadata-store interface, on both implementations."""

from __future__ import annotations

import asyncio

from store.meta.factory import open_meta
from store.recovery.auditor import current_auditor, elect, is_auditor


async def test_one_auditor_at_a_time_and_takeover(meta_url: str) -> None:
    a, b = open_meta(meta_url), open_meta(meta_url)
    await a.start()
    await b.start()
    try:
        await elect(a, "a")
        waiting = asyncio.create_task(elect(b, "b"))
        assert await current_auditor(a) == "a" and await is_auditor(a) and not await is_auditor(b)
        assert not waiting.done()
        await a.close()  # its session ends: the ephemeral node goes, b's watch fires
        await asyncio.wait_for(waiting, 30)
        assert await current_auditor(b) == "b" and await is_auditor(b)
    finally:
        await b.close()
